"""The serving views in headless Chromium: request lanes, step mix, latency histograms, bank colours per request,
the comm track, the deployment card and the sweep view, on a known fake serving run (tests/browser/servingfake.py)
played through the real server."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from layerscope.commands.serve import build_app
from layerscope.server.settings import Settings

pytestmark = pytest.mark.browser
servingfake = sys.modules["browser_helpers"].sibling("servingfake")
Page, free_port = sys.modules["browser_helpers"].Page, sys.modules["browser_helpers"].free_port

LS = "window.__layerscope"
SV = f"{LS}.serving"
PRESET = "decode-pulses"  # any preset: the fake simulator ignores what it asks for
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def fake_url() -> Iterator[str]:
    port = free_port()
    app = build_app(Settings(port=port, play_seconds=5.0), simulate=servingfake.fake_serving)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def fpage(browser: Any, fake_url: str) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
    p = Page(ctx.new_page())
    p.page.goto(f"{fake_url}/?scenario={PRESET}")
    p.wait(f"{LS} && {LS}.store.scenario && {LS}.store.scenario.name === '{PRESET}'")
    yield p
    ctx.close()


def plot_points(page: Any, plot: str, meta: str) -> int:
    return page.js(
        f"(document.getElementById('{plot}').data || []).filter(t => t.meta === '{meta}')"
        ".reduce((n, t) => n + (t.x || []).filter(x => x !== null).length, 0)"
    )


def shown(page: Any) -> dict[str, Any]:
    """What the latency histograms' overlay draws now: {all, n, panes: {key: {n, counts, beyond, p50, p99}}}."""
    return page.js(f"{LS}.views.latdist.shown")


def seek(page: Any, t: float) -> None:
    page.js(f"(() => {{ const s = document.querySelector('[data-testid=scrubber]'); s.value = {t};"
            " s.dispatchEvent(new Event('change')); })()")
    page.wait(f"Math.abs({LS}.store.t - {t}) < 1e-6 * Math.max(1, {t})")


def overlay_hash(page: Any, plot: str) -> str:
    return hashlib.sha256(page.js(
        f"document.getElementById('{plot}').parentElement.querySelector('canvas.plot-overlay').toDataURL()"
    ).encode()).hexdigest()


def canvas_hash(page: Any) -> str:
    return hashlib.sha256(page.js("document.getElementById('banks-canvas').toDataURL()").encode()).hexdigest()


def now_line(page: Any, plot: str) -> float | None:
    """Where the plot's time cursor is drawn (css px from the plot area's left; None when not shown)."""
    return page.js(f"{LS}.cursors.find(c => c.plot.id === '{plot}').px")


def test_lanes_step_mix_and_histograms_show_the_whole_run_before_play_and_the_cursor_moves_over_them(fpage) -> None:
    p = fpage
    n = len(servingfake.OUTPUTS)
    # before play: every lane to its end, every step's bar, every request in the histograms (issue 11's first screen)
    p.wait(f"{SV}.whole && {SV}.finishedCount === {n}")
    p.wait("document.querySelector('[data-testid=requests]').offsetHeight > 0")
    p.wait("['requests-plot', 'stepmix-plot', 'latdist-plot']"
           ".every(id => (document.getElementById(id).data || []).length > 0)")
    assert p.js(f"{STORE}.t") == 0
    assert plot_points(p, "requests-plot", "finished") == n
    assert plot_points(p, "stepmix-plot", "prefill") == p.js(f"{SV}.steps.length")
    assert shown(p)["all"] and shown(p)["panes"]["ttft"]["n"] == n
    assert "whole run" in p.js("document.getElementById('requests-info').textContent")
    lanes0, bars0 = plot_points(p, "requests-plot", "decode"), plot_points(p, "stepmix-plot", "prefill")
    banks0, cursor0 = canvas_hash(p), now_line(p, "requests-plot")
    time.sleep(1.0)  # the first screen's last draws (one Plotly draw per animation frame)
    draws0 = p.js(f"{LS}.stats.drawsBy")
    p.page.get_by_test_id("speed").select_option("0.25")  # 20 s of playback
    p.page.get_by_test_id("play").click()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if canvas_hash(p) != banks0 and now_line(p, "requests-plot") != cursor0 and now_line(p, "stepmix-plot"):
            break
        time.sleep(0.2)
    assert not p.js(f"{LS}.store.ended"), "the changes must come during playback"
    assert canvas_hash(p) != banks0 and now_line(p, "requests-plot") != cursor0
    # the lanes and bars are not re-plotted per frame: the cursor moves over them
    assert (plot_points(p, "requests-plot", "decode"), plot_points(p, "stepmix-plot", "prefill")) == (lanes0, bars0)
    assert p.js(f"{LS}.stats.drawsBy") == draws0
    # the bank map paints each page in its request's colour (the grid's pixel = requestRGB(request_id))
    cells = p.js(
        f"(() => {{ const b = {LS}.views.banks; const m = b.models[0]; const img = b.grids[0].image.data;"
        " const out = [];"
        " m.cells.forEach((c, i) => { if (c && c.req !== null && !c.shared && !m.damage[i])"
        " out.push([c.req, img[i*4], img[i*4+1], img[i*4+2]]); });"
        " return out; })()"
    )
    assert len({c[0] for c in cells}) >= 2, cells
    ids = sorted({c[0] for c in cells})
    colours = p.js(f"import('/static/js/colors.js').then(m => {json.dumps(ids)}.map(m.requestRGB))")
    want = dict(zip(ids, colours, strict=True))
    assert all(c[1:] == want[c[0]] for c in cells)
    assert p.js("document.getElementById('banks-legend').textContent").count("req ") >= 1
    # the colours change with playback: later, other requests hold pages (each pixel still its request's colour)
    held = f"[...new Set({LS}.views.banks.models[0].cells.filter(c => c && c.req !== null).map(c => c.req))].sort()"
    ids0 = p.js(held)
    p.wait(f"JSON.stringify({held}) !== {json.dumps(json.dumps(ids0, separators=(',', ':')))}", timeout_s=15)
    assert not p.js(f"{LS}.store.ended")
    later = p.js(
        f"(() => {{ const b = {LS}.views.banks; const m = b.models[0]; const img = b.grids[0].image.data;"
        " const out = [];"
        " m.cells.forEach((c, i) => { if (c && c.req !== null && !c.shared && !m.damage[i])"
        " out.push([c.req, img[i*4], img[i*4+1], img[i*4+2]]); });"
        " return out; })()"
    )
    ids = sorted({c[0] for c in later})
    colours = p.js(f"import('/static/js/colors.js').then(m => {json.dumps(ids)}.map(m.requestRGB))")
    want = dict(zip(ids, colours, strict=True))
    assert all(c[1:] == want[c[0]] for c in later)
    ARTIFACTS.mkdir(exist_ok=True)
    p.page.screenshot(path=str(ARTIFACTS / "serving-1600x1000.png"), full_page=True)

    p.page.get_by_test_id("speed").select_option("4")
    p.wait(f"{LS}.store.ended", timeout_s=30)
    time.sleep(1.0)
    assert p.js(f"{SV}.finishedCount") == n
    figs = shown(p)
    assert figs["all"] and figs["n"] == n
    for key, count in [("ttft", n), ("tpot", n), ("itl", sum(servingfake.OUTPUTS) - n)]:
        st = figs["panes"][key]
        assert st["n"] == count and sum(st["counts"]) + st["beyond"] == count, (key, st)
        assert st["p50"] <= st["p99"]
    # the whole run's bars (faint, under the overlay) hold the same counts
    ghost = p.js("Object.fromEntries(document.getElementById('latdist-plot').data.map(t => [t.meta, t.y]))")
    assert all(ghost[k] == figs["panes"][k]["counts"] for k in ("ttft", "tpot", "itl"))
    notes = p.js("document.getElementById('latdist-plot').layout.annotations.map(a => a.text).join(' ')")
    assert notes.count("SLA") == 2
    assert plot_points(p, "requests-plot", "preempted") >= 2 and plot_points(p, "requests-plot", "recompute") >= 2
    assert plot_points(p, "requests-plot", "finished") == n
    info = p.js("document.getElementById('requests-info').textContent")
    assert f"{n} finished" in info and "1 preemptions" in info
    # every request finished and freed its KV: the bank map says so beside the run's peak (its bank snapshots)
    peak = p.js(f"Math.max(...{STORE}.main.banks.map(b => b.used.reduce((a, c) => a + c, 0)))")
    assert peak > 0
    assert f"· 0 pages in use (run peak {peak:,})" in p.js("document.getElementById('banks-info').textContent")
    # the comm stream has its own timeline row; zoomed in, the step boundaries show
    assert "comm" in p.js("document.getElementById('timeline-plot').layout.yaxis.categoryarray")
    p.js("Plotly.relayout('timeline-plot', {'xaxis.range': [0, 300]})")
    p.wait("Math.abs(document.getElementById('stepmix-plot').layout.xaxis.range[1] - 300) < 1e-6")
    p.wait("document.getElementById('timeline-plot').data.find(t => t.meta === 'boundaries').x"
           ".filter(x => x !== null).length > 3 * 2")  # one line per engine step in view
    assert p.problems == []


def test_latency_histograms_grow_with_the_cursor_to_the_requests_finished_by_then(fpage) -> None:
    p = fpage
    n = len(servingfake.OUTPUTS)
    p.wait(f"{SV}.whole && {LS}.views.latdist.shown !== null")
    assert shown(p)["all"] and shown(p)["n"] == n  # before play: the whole run
    # finish times from the overview's request table (the server's), not from the view's own state
    finishes = sorted(p.js(f"{STORE}.main.request.filter(e => e.what === 'finished').map(e => e.t_us)"))
    assert len(finishes) == n
    t1 = (finishes[2] + finishes[3]) / 2  # 3 finished
    t2 = (finishes[n - 3] + finishes[n - 2]) / 2  # n - 2 finished
    seen = []
    for t in (t1, t2):
        seek(p, t)
        want = sum(f <= t for f in finishes)
        p.wait(f"{LS}.views.latdist.shown.n === {want} && !{LS}.views.latdist.shown.all")
        figs = shown(p)
        for key in ("ttft", "tpot"):
            assert sum(figs["panes"][key]["counts"]) + figs["panes"][key]["beyond"] == want, key
            assert figs["panes"][key]["n"] == want
        # ITL: one gap per output token after the first, of the requests finished by then
        gaps = p.js(f"{STORE}.main.request.filter(e => e.what === 'finished' && e.t_us <= {t})"
                    ".reduce((a, e) => a + e.output_len - 1, 0)")
        assert figs["panes"]["itl"]["n"] == gaps
        info = p.js("document.getElementById('latdist-info').textContent")
        assert f"{want} of {n} requests finished by the cursor" in info
        with p.page.expect_download() as dl:
            p.page.get_by_test_id("export-latency-dist-png").click()
        seen.append((figs, overlay_hash(p, "latdist-plot"), Path(dl.value.path()).read_bytes()))
    (a, ha, png_a), (b, hb, png_b) = seen
    assert png_a[:8] == b"\x89PNG\r\n\x1a\n" and png_a != png_b  # the panel's picture shows the bars of its time
    assert a["n"] == 3 and b["n"] == n - 2
    for key in ("ttft", "tpot", "itl"):  # every bin grows or stays: the set only gained requests
        assert all(y >= x for x, y in zip(a["panes"][key]["counts"], b["panes"][key]["counts"], strict=True))
    assert ha != hb  # the overlay drew the new bars
    ta, tb = a["panes"]["ttft"], b["panes"]["ttft"]
    assert (ta["p50"], ta["p99"]) != (tb["p50"], tb["p99"])  # the marks move with the set
    seek(p, t1)  # back: the bins shrink to the same counts as before
    p.wait(f"{LS}.views.latdist.shown.n === 3")
    assert shown(p)["panes"] == a["panes"]
    assert p.problems == []


def test_the_cursor_steps_requests_are_highlighted_on_their_lanes(fpage) -> None:
    p = fpage
    p.wait(f"{SV}.whole && (document.getElementById('requests-plot').data || []).length > 0")
    # steps from the overview's step table: the middle one, and one with a different set of requests
    steps = p.js(f"{STORE}.main.step.map(s => [s.start_us, s.model_dur_us, s.request_ids])")
    picked = []
    for i in range(len(steps) // 2, len(steps) - 1):
        if not picked or set(steps[i][2]) != set(picked[0][2]):
            picked.append((steps[i][0], min(steps[i + 1][0] - steps[i][0], steps[i][1]), steps[i][2]))
        if len(picked) == 2:
            break
    assert len(picked) == 2
    hashes = []
    for start, span, ids in picked:
        seek(p, start + 0.25 * span)
        p.wait(f"JSON.stringify({LS}.views.requests.highlighted.slice().sort((a, b) => a - b)) === "
               f"{json.dumps(json.dumps(sorted(ids), separators=(',', ':')))}")
        hashes.append(overlay_hash(p, "requests-plot"))
    assert hashes[0] != hashes[1]
    # the overlay passes the pointer through: the lanes' hover still answers under it
    assert p.js("getComputedStyle(document.querySelector('#requests canvas.plot-overlay')).pointerEvents") == "none"
    assert p.problems == []


def test_the_time_cursor_spans_each_plot_area_even_under_a_legend(fpage) -> None:
    """The cursor is drawn where Plotly put the plot area (its axes' offsets): the step-mix plot's legend above the
    plot pushes the area down, and a line placed by layout.margin stood that much too high."""
    p = fpage
    p.wait(f"{SV}.whole && (document.getElementById('stepmix-plot').data || []).length > 0")
    steps = p.js(f"{STORE}.main.step.map(s => s.start_us)")
    seek(p, steps[len(steps) // 2])
    for plot in ("stepmix-plot", "requests-plot"):
        p.wait(f"{LS}.cursors.find(c => c.plot.id === '{plot}').px !== null")
        inside, above = p.js(
            f"(() => {{ const c = {LS}.cursors.find(c => c.plot.id === '{plot}'); const fl = c.plot._fullLayout;"
            " const cv = c.overlay.canvas; const ctx = cv.getContext('2d'); const dpr = cv.width / cv.clientWidth;"
            " const x = Math.round((fl.xaxis._offset + c.px) * dpr);"
            " const at = (y) => ctx.getImageData(x, Math.round(y * dpr), 1, 1).data[3];"
            " return [at(fl.yaxis._offset + fl.yaxis._length - 3), at(fl.yaxis._offset - 4)]; })()")
        assert inside > 0, f"{plot}: no line at the foot of the plot area"
        assert above == 0, f"{plot}: the line runs above the plot area"
    assert p.js("document.getElementById('stepmix-plot')._fullLayout._size.t") > p.js(
        "document.getElementById('stepmix-plot')._fullLayout.margin.t"), "the legend no longer pushes the plot down"


def test_a_shared_prefix_block_is_marked_after_a_seek(fpage) -> None:
    p = fpage
    # request 5 holds request 1's first block from 495 µs to 813 µs (servingfake); a seek rebuilds the map there
    p.js("(() => { const s = document.querySelector('[data-testid=scrubber]'); s.value = 600;"
         " s.dispatchEvent(new Event('change')); })()")
    p.wait(f"Math.abs({LS}.store.t - 600) < 1e-6")
    p.wait(f"{LS}.views.banks.models[0].cells.some(c => c && c.shared)")
    holders = p.js(f"{LS}.views.banks.models[0].cells.find(c => c && c.shared).holders")
    assert sorted(holders) == [1, 5]
    assert p.problems == []


def test_deployment_card_shows_the_plan(fpage) -> None:
    p = fpage
    p.page.get_by_test_id("step").click()  # the deployment event sits at t = 0
    p.wait("document.querySelector('[data-testid=deployment-plan]') !== null")
    text = p.page.get_by_test_id("deployment").inner_text()
    for words in ["8 × h100-sxm", "tp 8", "54.80 GiB", "66.90 GiB", "358,000", "87.40×", "GPU KV cache size"]:
        assert words in text, words
    assert p.problems == []


def test_the_sweep_view_plots_a_file_and_loads_a_clicked_point(fpage, tmp_path: Path) -> None:
    p = fpage
    sweep = {
        "scenario": PRESET, "grid": {"chunk_size": [1024, 2048, 4096]},
        "points": [
            {"set": {"chunk_size": 1024}, "summary": {}, "output_throughput_per_gpu": 900.0, "median_tpot_ms": 30.0,
             "pareto": True},
            {"set": {"chunk_size": 2048}, "summary": {}, "output_throughput_per_gpu": 1400.0, "median_tpot_ms": 45.0,
             "pareto": True},
            {"set": {"chunk_size": 4096}, "summary": {}, "output_throughput_per_gpu": 1000.0, "median_tpot_ms": 60.0,
             "pareto": False},
        ],
    }
    f = tmp_path / "sweep.json"
    f.write_text(json.dumps(sweep))
    p.page.get_by_test_id("sweep-file").set_input_files(str(f))
    p.wait("(document.getElementById('sweep-plot').data || []).length === 2")
    assert p.js("document.getElementById('sweep-plot').data[1].x") == [30.0, 45.0]  # the front, by TPOT
    assert "2 on the Pareto front" in p.js("document.getElementById('sweep-info').textContent")
    p.page.locator("#sweep").scroll_into_view_if_needed()
    x, y = p.js(
        "(() => { const el = document.getElementById('sweep-plot'); const fl = el._fullLayout;"
        " const r = el.getBoundingClientRect();"
        " return [r.left + fl._size.l + fl.xaxis.l2p(45), r.top + fl._size.t + fl.yaxis.l2p(1400)]; })()"
    )
    p.page.mouse.click(x, y)
    p.wait(f"{LS}.store.scenario.chunk_size === 2048")
    assert "chunk_size=2048" in p.page.url

    bad = tmp_path / "bad.json"
    bad.write_text('{"points": [{"set": {}}]}')
    p.page.get_by_test_id("sweep-file").set_input_files(str(bad))
    p.wait("document.getElementById('sweep-error').textContent.includes('output_throughput_per_gpu')")
    assert p.problems == []


# -- the real engine and presets (conftest's server: play_seconds 6) -------------------------------------------------

STORE = f"{LS}.store"


def open_real(page: Any, url: str, query: str, name: str, timeout_s: float = 90.0) -> None:
    page.page.goto(f"{url}/?{query}")
    page.wait(f"{LS} && {STORE}.scenario && {STORE}.scenario.name === '{name}' && {STORE}.runs.length > 0",
              timeout_s=timeout_s)


def test_a_real_serving_preset_plays_its_requests_steps_and_latencies(page, server_url: str) -> None:
    p = page
    open_real(p, server_url, "scenario=serving-kv-preemption", "serving-kv-preemption")
    assert p.page.get_by_test_id("requests").is_visible() and p.page.get_by_test_id("step-mix").is_visible()
    # the whole run before play: 32 lanes to their ends, every step, the server's figures beside the histograms
    p.wait(f"{SV}.whole && {SV}.order.length === 32 && {SV}.steps.length > 20", timeout_s=30)
    p.wait("['requests-plot', 'latdist-plot'].every(id => (document.getElementById(id).data || []).length > 0)")
    assert p.js(f"{STORE}.t") == 0
    assert plot_points(p, "requests-plot", "finished") == p.js(f"{STORE}.main.summary.completed")
    assert plot_points(p, "stepmix-plot", "decode") == p.js(f"{SV}.steps.length")
    assert "server median" in p.js("document.getElementById('latdist-info').textContent")
    p.page.get_by_test_id("play").click()
    p.wait(f"{STORE}.t > 0")
    # pages in the bank map carry their request's colour
    cells = f"{LS}.views.banks.models[0].cells"
    p.wait(f"new Set({cells}.filter(c => c && c.req !== null).map(c => c.req)).size >= 2", timeout_s=20)
    p.page.get_by_test_id("speed").select_option("64")
    p.wait(f"{STORE}.ended", timeout_s=60)
    time.sleep(1.0)
    summary = p.js(f"{STORE}.summary")
    assert shown(p)["all"] and shown(p)["panes"]["ttft"]["n"] == summary["completed"]
    assert "server median" in p.js("document.getElementById('latdist-info').textContent")
    ttft = p.js(f"{SV}.stats('ttft').p50")
    assert abs(ttft - summary["median_ttft_ms"]) <= 1e-3 * summary["median_ttft_ms"]
    assert f"{summary['num_preemptions']} preemptions" in p.js("document.getElementById('requests-info').textContent")
    assert plot_points(p, "requests-plot", "preempted") > 0
    ARTIFACTS.mkdir(exist_ok=True)
    for w, h in [(1600, 1000), (1280, 720), (390, 844)]:
        p.page.set_viewport_size({"width": w, "height": h})
        time.sleep(0.8)
        p.page.screenshot(path=str(ARTIFACTS / f"serving-real-{w}x{h}.png"), full_page=True)
    assert p.problems == []


def test_the_deployment_card_shows_the_plan_and_a_deployment_that_does_not_fit_shows_why(page, server_url: str) -> None:
    p = page
    open_real(p, server_url, "scenario=real-qwen3-235b-h200", "real-qwen3-235b-h200")
    p.wait("document.querySelector('[data-testid=deployment-plan]') !== null")
    text = p.page.get_by_test_id("deployment").inner_text()
    for words in ["8 × h200", "tp 8", "KV tokens", "max concurrency", "GPU KV cache size"]:
        assert words in text, words
    # the scheduler's limits: vLLM's defaults for `vllm serve` on an H200, from the deployment event
    assert "max_num_seqs 1,024 · max_num_batched_tokens 8,192 · prefix caching on" in text
    kv = p.js(f"{STORE}.main.deployment[0].per_gpu.kv_tokens")  # drawn before play, from the overview
    assert f"{kv:,}" in text
    p.page.locator("#deployment-form select[name=tp]").select_option("2")
    p.page.get_by_test_id("deployment-apply").click()
    p.wait("document.getElementById('deployment-error').textContent.includes('weights need')")
    assert p.page.get_by_test_id("deployment-error").is_visible()
    assert p.js(f"{STORE}.scenario.deployment.tp") == 8  # the run on screen stays
    assert "8 × h200" in p.page.get_by_test_id("deployment").inner_text()
    assert "deployment.tp" not in p.page.url  # a refused setting does not enter the URL
    p.page.locator("#deployment-form select[name=weight_dtype]").select_option("fp8")
    p.page.locator("#deployment-form select[name=tp]").select_option("4")
    p.page.get_by_test_id("deployment-apply").click()
    p.wait(f"{STORE}.scenario.deployment && {STORE}.scenario.deployment.tp === 4", timeout_s=90)
    assert "deployment.tp=4" in p.page.url and "deployment.weight_dtype=fp8" in p.page.url
    assert p.page.get_by_test_id("deployment-error").is_hidden()
    assert p.problems == []


def test_a_grid_run_from_the_form_loads_the_clicked_point(page, server_url: str) -> None:
    p = page
    small = "workload.num_requests=3&workload.input_len=256&workload.output_len=6&workload.range_ratio=0"
    open_real(p, server_url, f"scenario=serving-long-prompt-itl&{small}", "serving-long-prompt-itl")
    assert p.js(f"{STORE}.scenario.workload.num_requests") == 3
    p.page.get_by_test_id("sweep-grid").fill("scheduler.max_num_batched_tokens=256,2048")
    p.page.get_by_test_id("sweep-run").click()
    p.wait("(document.getElementById('sweep-plot').data || []).length === 2", timeout_s=90)
    xs, ys = p.js("[document.getElementById('sweep-plot').data[0].x, document.getElementById('sweep-plot').data[0].y]")
    assert len(xs) == 2 and all(v > 0 for v in xs + ys)
    pts = p.js(f"{LS}.views.sweep.data.points.map(q => q.set['scheduler.max_num_batched_tokens'])")
    i = pts.index(256)
    p.page.locator("#sweep").scroll_into_view_if_needed()
    x, y = p.js(
        "(() => { const el = document.getElementById('sweep-plot'); const fl = el._fullLayout;"
        " const r = el.getBoundingClientRect(); const d = el.data[0];"
        f" return [r.left + fl._size.l + fl.xaxis.l2p(d.x[{i}]), r.top + fl._size.t + fl.yaxis.l2p(d.y[{i}])]; }})()"
    )
    p.page.mouse.click(x, y)
    p.wait(f"{STORE}.scenario.scheduler.max_num_batched_tokens === 256", timeout_s=90)
    assert p.js(f"{STORE}.scenario.workload.num_requests") == 3  # the point keeps the grid's other settings
    assert "scheduler.max_num_batched_tokens=256" in p.page.url
    p.page.get_by_test_id("sweep-grid").fill("nope.field=1,2")
    p.page.get_by_test_id("sweep-run").click()
    p.wait("document.getElementById('sweep-error').textContent.includes('nope')")
    assert [q for q in p.problems if "status of 422" not in q] == []  # the browser logs the refused request itself


def test_a_serving_tour_plays_to_its_steps(page, server_url: str) -> None:
    p = page
    open_real(p, server_url, "scenario=serving-64-h200-tp8", "serving-64-h200-tp8")
    titles = p.js(f"{STORE}.scenario.tour.map(s => s.title)")
    assert len(titles) >= 2
    p.page.get_by_test_id("tour-next").click()
    p.wait(f"document.getElementById('tour-body').textContent.includes({titles[0]!r})", timeout_s=40)
    p.page.get_by_test_id("tour-next").click()
    p.wait(f"document.getElementById('tour-body').textContent.includes({titles[1]!r})", timeout_s=40)
    assert p.problems == []
