"""Issue 17 (the dashboard's part) in headless Chromium, one test per item: both runs in every serving view, playback
over the longer run, the dashboard picture, one unit, the broken axis, links, scale, the keyboard and form errors."""

from __future__ import annotations

import base64
import re
import time

import pytest

pytestmark = pytest.mark.browser

L = "window.__layerscope"
STORE = f"{L}.store"


def open_scenario(page, url: str, name: str, query: str = "") -> None:
    page.page.goto(f"{url}/?scenario={name}{query}")
    page.wait(f"window.__layerscope && {STORE}.scenario && {STORE}.scenario.name === '{name}'", timeout_s=90)
    page.wait(
        "document.getElementById('timeline-plot').data && document.getElementById('stages-plot').data", timeout_s=60
    )
    page.wait(f"{L}.stats.raf > 5")


def open_serving(page, url: str, name: str = "serving-long-prompt-itl", query: str = "") -> None:
    open_scenario(page, url, name, query)
    page.wait(
        "(document.getElementById('latdist-plot').data || []).length > 0"
        " && (document.getElementById('requests-plot').data || []).length > 0",
        timeout_s=60,
    )


def seek(page, t: float) -> None:
    page.js(
        f"(() => {{ const s = document.getElementById('scrubber'); s.value = String({t});"
        " s.dispatchEvent(new Event('change')); })()"
    )
    page.wait(f"Math.abs({STORE}.t - {t}) < 1e-3 * Math.max(1, {t})")


def test_a_serving_comparison_draws_run_b_in_the_lanes_the_steps_and_the_histograms(page, server_url: str) -> None:
    open_serving(page, server_url)
    n_a, n_b = page.js(f"[{L}.serving.order.length, {L}.servingB.order.length]")
    assert n_a > 1 and n_b > 1  # run B's requests are read from its whole run
    # lanes: B's rows below A's, after a gap row, each block labelled with its run
    rows = page.js(
        "(() => { const d = document.getElementById('requests-plot').data;"
        " const ys = (b) => new Set(d.filter(t => t.meta.startsWith('B ') === b)"
        "   .flatMap(t => t.y.filter(v => v !== null)));"
        " const a = ys(false), bb = ys(true); return [a.size, bb.size, Math.max(...a) < Math.min(...bb)]; })()"
    )
    assert rows == [n_a, n_b, True]  # one row per request of each run, B's below A's
    notes = page.js("document.getElementById('requests-plot').layout.annotations.map(a => a.text)")
    assert any(t.startswith("A ") for t in notes) and any(t.startswith("B ") for t in notes)
    # step composition: B's steps on their own row of the same time axis
    metas = page.js("document.getElementById('stepmix-plot').data.map(t => [t.meta, t.yaxis, t.x.length])")
    b_bars = [m for m in metas if m[0] == "B prefill"]
    assert b_bars and b_bars[0][1] == "y3" and b_bars[0][2] > 0
    # histograms: B's outline and its p50 / p99 marks beside A's
    lat = page.js("document.getElementById('latdist-plot').data.map(t => [t.meta, t.y.reduce((a, b) => a + b, 0)])")
    by = dict(lat)
    assert by["B ttft"] == n_b and by["ttft"] == n_a  # every finished request of each run counted once
    marks = page.js("document.getElementById('latdist-plot').layout.annotations.map(a => a.text)")
    for q in ("p50", "p99"):
        assert sum(t.startswith(f"B {q} ") for t in marks) == 3, marks  # one per pane: TTFT, TPOT, ITL
    assert "B p50" in page.js("document.getElementById('latdist-info').textContent")
    # mid-run A counts the requests finished by the cursor, B is drawn whole: the line says which is which
    finishes = page.js(f"{STORE}.main.request.filter(e => e.what === 'finished').map(e => e.t_us)")
    seek(page, min(finishes))
    page.wait(f"!{L}.views.latdist.shown.all")
    assert "B: its whole run" in page.js("document.getElementById('latdist-info').textContent")
    seek(page, 0)
    # the delta line speaks serving: p99 ITL A -> B with its change, the mean TTFT as a ratio
    delta = page.page.get_by_test_id("delta-line").inner_text()
    assert re.search(r"p99 ITL [\d.]+ → [\d.]+ ms \([+−][\d.]+%\)", delta), delta
    assert re.search(r"mean TTFT ×[\d.]+ \([\d.]+ → [\d.]+ ms\)", delta), delta
    a = page.js(f"{STORE}.main.summary.p99_itl_ms")
    assert f"p99 ITL {a:.0f} → " in delta or f"p99 ITL {a:.3g} → " in delta
    assert page.problems == []


def test_playback_and_the_scrubber_cover_the_longer_run(page, server_url: str) -> None:
    open_scenario(page, server_url, "article-vs-real")
    end = "(r) => Math.max(...r.kernel.map(k => k.start_us + k.dur_us))"
    a_end, b_end = page.js(f"[({end})({STORE}.main), ({end})({STORE}.compareRun)]")
    assert b_end > 2 * a_end  # B (the real engine) runs far longer than A
    assert page.js(f"{STORE}.duration") == pytest.approx(b_end)
    assert float(page.js("document.getElementById('scrubber').max")) == pytest.approx(b_end)
    assert page.page.get_by_test_id("clock").inner_text().endswith(f"/ {b_end / 1000:.2f} ms · one layer")
    # the server plays and seeks past A's end, to B's
    seek(page, (a_end + b_end) / 2)
    seek(page, b_end)
    assert page.js(f"{L}.stats.errors.length") == 0
    page.page.get_by_test_id("speed").select_option("64")
    seek(page, 0)
    page.page.get_by_test_id("play").click()
    page.wait(f"{STORE}.t > {a_end * 1.5}", timeout_s=30)
    page.page.get_by_test_id("pause").click()
    assert page.problems == []


def test_the_dashboard_picture_keeps_every_legend_and_the_whole_delta_line(page, server_url: str) -> None:
    open_serving(page, server_url)
    page.page.locator("#files-menu summary").click()
    page.page.get_by_test_id("export-dashboard-png").click()
    page.wait(f"{L}.stats.exports.length > 0", timeout_s=60)
    pic = page.js(f"{L}.exporter.lastPicture")
    on_screen = page.js(
        "[...document.querySelectorAll('#panels .legend .key')]"
        ".filter(k => k.offsetParent && k.textContent.trim()).map(k => k.textContent.trim())"
    )
    assert on_screen and set(on_screen) <= set(pic["keys"])  # every legend key, in the picture
    text = " ".join(pic["lines"])
    norm = lambda s: " ".join(s.split())  # noqa: E731
    for line in ("story-line", "delta-line"):
        assert norm(page.page.get_by_test_id(line).inner_text()) in text  # whole, never cut
    assert "p99 ITL" in text and pic["plots"] > len(pic["items"])  # the KV blocks plot under HBM memory too
    png = base64.b64decode(page.js(f"{L}.exporter.lastUrl").split(",", 1)[1])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.problems == []


def test_a_serving_run_opens_in_whole_model_units_and_the_switch_moves_every_time(page, server_url: str) -> None:
    open_serving(page, server_url)
    assert page.js(f"{STORE}.axis.units") == "model"
    assert "(s)" in page.js("document.getElementById('timeline-plot').layout.xaxis.title.text")  # seconds long: s
    story = page.page.get_by_test_id("story-line").inner_text()
    w = page.js(f"{STORE}.scenario.workload")
    assert f"{w['num_requests']} requests" in story and "Poisson 4/s" in story and " x H200 tp " in story
    assert re.search(r"\d+\.\d{3} s of the whole model", story) and "decode steps" not in story
    assert page.page.get_by_test_id("clock").inner_text().endswith("· whole model")
    # stages: a per-step figure, of the order of the run's TPOT (never the whole run's sum)
    tpot = page.js(f"{STORE}.main.summary.median_tpot_ms")
    bars = page.js("document.getElementById('stages-plot').data.filter(t => t.xaxis === 'x2').flatMap(t => t.y)")
    assert 0 < max(bars) < 2 * tpot
    assert page.js("document.getElementById('stages-plot').layout.yaxis2.title.text") == "ms / step"
    # one layer: the axes, the clock, the story line and the stages move together
    page.page.locator("#units-layer").click()
    page.wait(f"{STORE}.axis.units === 'layer'")
    assert "one layer of each step" in page.page.get_by_test_id("story-line").inner_text()
    assert page.page.get_by_test_id("clock").inner_text().endswith("· one layer of each step")
    delta = page.page.get_by_test_id("delta-line").inner_text()
    assert "one layer of each step: mean step" in delta  # the delta line moves with the units too
    page.wait("document.getElementById('stages-plot').layout.yaxis2.title.text === 'µs / step'")
    layer_bars = page.js("document.getElementById('stages-plot').data.filter(t => t.xaxis === 'x2').flatMap(t => t.y)")
    layers = page.js(f"{STORE}.layers")
    assert max(layer_bars) == pytest.approx(max(bars) * 1000 / layers, rel=1e-6)  # µs of one layer
    assert "units=layer" in page.js("location.search")
    # a one-request run keeps opening in one layer's units
    page.page.goto(f"{server_url}/?scenario=prefill-8k-chunked")
    page.wait(f"{STORE}.scenario && {STORE}.scenario.name === 'prefill-8k-chunked' && {STORE}.main")
    assert page.js(f"{STORE}.axis.units") == "layer"  # the URL keeps the choice only when it says so
    assert page.problems == []


def test_the_broken_axis_squeezes_only_true_one_offs_with_labels_from_the_data(page, server_url: str) -> None:
    open_scenario(page, server_url, "partial-eviction-spikes")
    refetches = page.js(f"{STORE}.main.kernel.filter(k => k.stage === 'kv_refetch').length")
    assert refetches > 1 and page.js(f"{STORE}.axis.gaps.length") == 0  # the spikes keep their length
    open_scenario(page, server_url, "prefill-8k-chunked")
    notes = page.js(
        "document.getElementById('timeline-plot').layout.annotations"
        ".filter(a => a.text.startsWith('// ')).map(a => a.text)"
    )
    switch = page.js(f"{STORE}.main.kernel.filter(k => k.stage === 'switch_over').reduce((a, k) => a + k.dur_us, 0)")
    assert notes == [f"// switch_over {switch / 1000:.2f} ms"]  # one break, its own cost
    open_scenario(page, server_url, "chunk-adapt-low-memory")
    assert (
        page.js(
            "document.getElementById('timeline-plot').layout.annotations.filter(a => a.text.startsWith('// ')).length"
        )
        <= 1
    )
    assert page.problems == []



def test_the_one_off_label_of_the_decode_latency_stays_inside_the_plot(page, server_url: str) -> None:
    """allocator-off-long-context: step 0's point is the plot's tallest, so its label hangs below it (above, the
    plot's top edge cut it off); in article-vs-real run B is far taller, so A's label stays above, off the ticks."""
    for name, below in (("allocator-off-long-context", True), ("article-vs-real", False)):
        open_scenario(page, server_url, name)
        page.wait("(document.getElementById('latency-plot').data || []).length > 0", timeout_s=60)
        notes = page.js(
            "document.getElementById('latency-plot').layout.annotations"
            ".filter(a => (a.text || '').includes('one-off, not drawn')).map(a => a.ay)"
        )
        assert notes == [30 if below else -30], (name, notes)
    open_scenario(page, server_url, "decode-pulses")  # its switch-over breaks the axis: the break's label is not cut
    tops = page.js(
        "['memory-plot', 'latency-plot'].map(id => { const el = document.getElementById(id);"
        " return [...el.querySelectorAll('.annotation')].filter(n => n.textContent.startsWith('//'))"
        ".map(n => n.getBoundingClientRect().top - el.getBoundingClientRect().top); })"
    )
    assert all(t and min(t) >= 0 for t in tops), tops
    assert page.problems == []


def test_run_bs_latency_marks_and_the_sla_label_stay_inside_their_pane_apart(page, server_url: str) -> None:
    """serving-long-prompt-itl: B's p99 TTFT (2452 ms) sits at the right edge of its pane; its label reads leftwards
    instead of running into the TPOT pane, and the SLA label is not drawn at B's p50 label's height."""
    open_serving(page, server_url)
    boxes = page.js(
        "(() => { const el = document.getElementById('latdist-plot'); const fl = el._fullLayout;"
        " return [...el.querySelectorAll('.annotation')].map((n, i) => { const a = fl.annotations[i];"
        " const ax = fl[a.xref.replace('x', 'xaxis')]; const r = n.getBoundingClientRect();"
        " const left = el.getBoundingClientRect().left + ax._offset;"
        " return [a.text, a.y, r.left >= left - 2 && r.right <= left + ax._length + 2]; }); })()"
    )
    assert boxes and all(inside for _, _, inside in boxes), boxes
    sla_heights = {y for text, y, _ in boxes if text.startswith("SLA")}
    b_heights = {y for text, y, _ in boxes if text.startswith("B ")}
    assert sla_heights and not sla_heights & b_heights
    assert page.page.get_by_test_id("log-empty").is_visible()  # a run without faults: the events panel says so
    assert page.problems == []

def test_a_link_is_a_moment_and_back_returns_to_the_previous_preset(page, server_url: str) -> None:
    open_scenario(page, server_url, "article-vs-real", "&t=3000&x0=1000&x1=5000&kernel=A5&step=2")
    page.wait(f"{STORE}.t === 3000")
    assert page.js(f"{STORE}.axis.range") == [1000, 5000]
    assert page.js(f"{L}.views.detail.pinned && {L}.views.detail.pinned.k === {STORE}.main.kernel[5]")
    assert page.js(f"{L}.tour.index") == 1
    # the moment stays in the URL as it changes: a pause elsewhere, a new zoom
    seek(page, 4000)
    page.wait("new URLSearchParams(location.search).get('t') === '4000'")
    q = page.js("Object.fromEntries(new URLSearchParams(location.search))")
    assert q["x0"] == "1000" and q["x1"] == "5000" and q["kernel"] == "A5" and q["step"] == "2"
    # a preset switch is a history entry: Back returns to the previous preset
    page.page.get_by_test_id("scenario-select").select_option("decode-pulses")
    page.wait(f"{STORE}.scenario.name === 'decode-pulses' && location.search.includes('decode-pulses')")
    page.page.go_back()
    page.wait(f"{STORE}.scenario.name === 'article-vs-real' && location.search.includes('article-vs-real')")
    page.wait(f"{STORE}.t === 4000")  # with that entry's moment
    # an unknown preset or a refused value: the message, then the default preset
    for query, said in (
        ("?scenario=no-such-preset", "unknown preset 'no-such-preset'"),
        ("?scenario=prefill-8k-chunked&prompt_len=-5", "prompt_len must be at least 1"),
    ):
        page.page.goto(f"{server_url}/{query}")
        page.wait(
            f"{STORE}.scenario && {STORE}.scenario.name === 'prefill-8k-chunked'"
            " && document.getElementById('toast').textContent.length > 0"
        )
        toast = page.page.get_by_test_id("toast").inner_text()
        assert said in toast and "Input should" not in toast, toast
        story = page.page.get_by_test_id("story-line").inner_text()
        assert story != "Loading the run…" and said in story, story  # the reason stays before the default's story
    page.page.goto(f"{server_url}/?scenario=prefill-8k-chunked&t=abc&kernel=Z")
    page.wait(f"{STORE}.scenario && {STORE}.main && document.getElementById('toast').textContent.startsWith('link:')")
    assert "t=abc" in page.page.get_by_test_id("toast").inner_text()


def test_lanes_and_the_bank_map_at_128_requests_hover_anywhere_and_show_the_used_region(page, server_url: str) -> None:
    open_serving(page, server_url, "serving-64-h200-tp8")
    assert page.js(f"{L}.serving.order.length") == 128
    plot = page.page.locator("#requests-plot")
    fl = page.js(
        "(() => { const f = document.getElementById('requests-plot')._fullLayout;"
        " return [f.xaxis._offset, f.xaxis._length, f.yaxis._offset, f.yaxis._length]; })()"
    )
    # the middle of request 10's decode bar, far from any point Plotly's own hover would find
    row_y = page.js("document.getElementById('requests-plot')._fullLayout.yaxis.l2p(10)")
    mid = page.js(
        f"(() => {{ const r = {L}.serving.requests.get({L}.serving.order[10]);"
        f" return {STORE}.axis.toX((r.firstToken + r.finished) / 2); }})()"
    )
    x = page.js(f"document.getElementById('requests-plot')._fullLayout.xaxis.l2p({mid})")
    assert 0 < x < fl[1]
    plot.hover(position={"x": fl[0] + x, "y": fl[2] + row_y})
    page.wait("!document.getElementById('page-tip').classList.contains('hidden')")
    tip = page.page.get_by_test_id("page-tip").inner_text()
    near = page.js(f"{L}.serving.order.slice(9, 12)")  # rows are about 1.3 px high: the pixel lands on one of these
    assert re.search(r"request (\d+)", tip) and int(re.search(r"request (\d+)", tip).group(1)) in near, tip
    assert "now: decode" in tip
    assert page.js("document.body.dataset.linked").startswith("request:A:")  # the bank map outlines its pages
    # the bank map draws the slots the run used, not 1% of the width
    shown, cap = page.js(f"[{L}.views.banks.models[0].shown, {L}.views.banks.models[0].cap]")
    assert shown < cap * 0.6
    assert "shown: the rest never used" in page.page.get_by_test_id("banks").locator("#banks-info").inner_text()
    seek(page, page.js(f"{STORE}.main.step[Math.floor({STORE}.main.step.length / 3)].start_us"))
    canvas = page.page.locator("#banks-canvas")
    canvas.hover(position={"x": 3, "y": 20})
    page.wait(f"{L}.views.banks.tipText && {L}.views.banks.tipText.request !== null")
    t = page.js(f"{L}.views.banks.tipText")
    assert t["block"] is not None and t["state"]
    tip = page.page.get_by_test_id("page-tip").inner_text()
    assert f"request {t['request']}" in tip and f"block {t['block']}" in tip and "state:" in tip
    assert page.js("document.body.dataset.linked") == f"request:A:{t['request']}"  # its lane is outlined
    # request colours keep off the error reds (evicted, CRC mismatch, the SLA), on both themes
    hues = page.page.evaluate(
        "() => import('/static/js/colors.js').then((m) => ['dark', 'light'].flatMap((th) => { m.setTheme(th);"
        " return [...Array(512).keys()].map((i) => m.requestHue(i)); }))"
    )
    assert min(hues) >= 40 and max(hues) < 310
    page.page.evaluate("() => import('/static/js/colors.js').then((m) => m.setTheme('dark'))")
    assert page.problems == []


def test_the_keyboard_steps_zooms_pans_and_walks_the_kernels(page, server_url: str) -> None:
    open_scenario(page, server_url, "prefill-8k-chunked")
    page.js("document.activeElement && document.activeElement.blur()")
    frames = page.js(f"{STORE}.frames")
    page.page.keyboard.press("ArrowRight")
    page.wait(f"{STORE}.frames > {frames} && {STORE}.kernels.length === 1")
    page.page.keyboard.press("ArrowRight")
    page.wait(f"{STORE}.kernels.length === 2")
    t2 = page.js(f"{STORE}.t")
    page.page.keyboard.press("ArrowLeft")
    page.wait(f"{STORE}.t < {t2}")
    e0, e1 = page.js(f"{STORE}.axis.extent")
    page.page.keyboard.press("w")
    a, b = page.js(f"{STORE}.axis.range")
    assert b - a == pytest.approx((e1 - e0) / 2)
    page.page.keyboard.press("d")
    a2, b2 = page.js(f"{STORE}.axis.range")
    assert a2 == pytest.approx(a + (b - a) / 4) and b2 - a2 == pytest.approx(b - a)
    page.page.keyboard.press("s")
    assert page.js(f"{STORE}.axis.range") is None  # back out to the whole run
    page.page.keyboard.press("]")
    page.wait(f"{L}.views.detail.pinned !== null")
    first = page.js(f"{STORE}.main.kernel.indexOf({L}.views.detail.pinned.k)")
    page.page.keyboard.press("]")
    page.wait(f"{STORE}.main.kernel.indexOf({L}.views.detail.pinned.k) !== {first}")
    k = page.js(f"{L}.views.detail.pinned.k")
    page.wait(f"Math.abs({STORE}.t - {k['start_us']}) < 1e-6")
    # focus: the timeline takes it with a visible ring; Plotly's mode bars are out of the tab order
    assert page.js("document.getElementById('timeline-plot').tabIndex") == 0
    page.js("document.getElementById('timeline-plot').focus({ focusVisible: true })")
    assert page.js("getComputedStyle(document.getElementById('timeline-plot')).outlineStyle") != "none"
    assert page.js("[...document.querySelectorAll('.modebar-btn')].every(a => a.tabIndex === -1)")
    assert page.js("document.querySelectorAll('.modebar-btn').length") > 0
    assert page.page.get_by_role("button", name="export kernel timeline as PNG").count() == 1
    # hover a topology node: the same stage is marked in the stages panel
    node = page.page.locator("#topology-svg g.node").first
    stage = node.get_attribute("data-stage")
    node.hover()
    page.wait(f"document.body.dataset.linked === 'stage:{stage}'")
    assert page.js(
        f"[...document.querySelectorAll('#stages-plot .linked-text')].every(t => t.textContent === '{stage}')"
    )
    assert page.js("document.querySelectorAll('#stages-plot .linked-text').length") >= 1
    assert page.problems == []


def test_reduced_motion_is_honoured(browser, server_url: str) -> None:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, reduced_motion="reduce")
    try:
        pg = ctx.new_page()
        pg.goto(f"{server_url}/?scenario=partial-eviction-spikes")
        deadline = time.monotonic() + 60
        while not pg.evaluate(f"() => !!(window.__layerscope && {STORE}.main)") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pg.evaluate("() => matchMedia('(prefers-reduced-motion: reduce)').matches")
        assert pg.evaluate(
            "() => getComputedStyle(document.querySelector('.topo .node-box') || document.body).transitionDuration"
        ) in ("0s", "")
        pg.evaluate("() => document.getElementById('speed').value = '8'")
        pg.get_by_test_id("play").click()
        pg.wait_for_timeout(1500)
        assert pg.evaluate(f"() => {L}.views.banks.anims.length") == 0  # nothing flies or flashes
    finally:
        ctx.close()


def test_form_errors_name_the_field_and_the_fix_and_mark_the_input(page, server_url: str) -> None:
    open_scenario(page, server_url, "prefill-8k-chunked")
    page.page.get_by_role("button", name="settings").click()
    page.page.locator("input[name=chunk_size]").fill("10")
    loads = page.js(f"{L}.stats.messages")
    page.page.get_by_test_id("apply").click()
    box = page.page.get_by_test_id("form-error")
    assert box.inner_text() == "chunk_size must be a whole number from 16 to 65536 (got 10)"
    inp = page.page.locator("input[name=chunk_size]")
    assert inp.get_attribute("aria-invalid") == "true"
    assert page.js("getComputedStyle(document.querySelector('input[name=chunk_size]')).outlineStyle") == "solid"
    time.sleep(0.3)
    assert page.js(f"{L}.stats.messages") == loads  # refused here, nothing sent
    # the server's refusals read the same way (test_a_link_is_a_moment...: "prompt_len must be at least 1")
    inp.fill("4096")
    page.page.get_by_test_id("apply").click()
    page.wait("!document.querySelector('[aria-invalid]') && document.getElementById('form-error').textContent === ''")
