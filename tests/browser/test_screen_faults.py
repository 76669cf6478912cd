"""On-screen faults found at the last pass over the dashboard (issue 17), each fixed and asserted in headless Chromium:
canvas overlays that stay on their plot, run B readable beside run A, links that keep their moment through Back, and
one KV pool figure labelled for what it counts."""

from __future__ import annotations

import re
import time

import pytest

pytestmark = pytest.mark.browser

L = "window.__layerscope"
STORE = f"{L}.store"

# Every animation frame: the largest distance (px) between a shown overlay canvas and the figure it lies over (the
# figure's first main-svg), per plot. Installed before the page's own scripts run.
OVERLAY_SAMPLER = """
window.__overlayOff = {};
(function sample() {
  for (const c of document.querySelectorAll('canvas.plot-overlay')) {
    if (c.style.display !== 'block') continue;
    const fig = document.getElementById(c.dataset.plot).querySelector('svg.main-svg');
    if (!fig) continue;
    const a = c.getBoundingClientRect(), b = fig.getBoundingClientRect();
    const off = Math.max(Math.abs(a.left - b.left), Math.abs(a.top - b.top),
                         Math.abs(a.width - b.width), Math.abs(a.height - b.height));
    window.__overlayOff[c.dataset.plot] = Math.max(window.__overlayOff[c.dataset.plot] || 0, off);
  }
  requestAnimationFrame(sample);
})();
"""


def open_scenario(page, url: str, name: str, query: str = "") -> None:
    page.page.goto(f"{url}/?scenario={name}{query}")
    page.wait(f"window.__layerscope && {STORE}.scenario && {STORE}.scenario.name === '{name}'", timeout_s=90)
    page.wait("document.getElementById('timeline-plot').data", timeout_s=60)


def open_serving(page, url: str, name: str) -> None:
    open_scenario(page, url, name)
    page.wait(
        "(document.getElementById('latdist-plot').data || []).length > 0"
        " && (document.getElementById('requests-plot').data || []).length > 0",
        timeout_s=60,
    )


def test_the_histogram_overlay_lies_on_its_plot_from_load_and_follows_it_when_it_moves(page, server_url: str) -> None:
    page.page.add_init_script(OVERLAY_SAMPLER)
    open_serving(page, server_url, "serving-long-prompt-itl")
    page.wait("document.querySelector('canvas.plot-overlay[data-plot=latdist-plot]').style.display === 'block'")
    time.sleep(1.5)  # the first seconds after load, when the overlay used to sit 90 px high
    off = page.js("window.__overlayOff")
    assert off.get("latdist-plot") is not None and off.get("requests-plot") is not None, off
    assert max(off.values()) <= 1, off
    # the header above the plot grows (its info line wraps): the plot moves down, the overlays with it, at once
    page.js("(() => { const p = document.getElementById('latency-dist'); p.style.height = p.offsetHeight + 'px';"
            " document.getElementById('latdist-info').style.display = 'block';"
            " document.getElementById('latdist-info').style.height = '120px'; window.__overlayOff = {}; })()")
    page.js("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    top = page.js("[document.querySelector('canvas.plot-overlay[data-plot=latdist-plot]').getBoundingClientRect().top,"
                  " document.querySelector('#latdist-plot svg.main-svg').getBoundingClientRect().top]")
    assert abs(top[0] - top[1]) <= 1, top
    assert page.problems == []


def test_in_a_comparison_run_bs_labels_stay_above_as_bars_and_its_few_lanes_readable(page, server_url: str) -> None:
    open_serving(page, server_url, "serving-64-h200-tp8")
    n_a, n_b = page.js(f"[{L}.serving.order.length, {L}.servingB.order.length]")
    assert n_a > 8 * n_b  # many A requests beside a few of B's
    # histograms: A's finished bars are drawn on a canvas inside the figure, under Plotly's layer of labels
    order = page.js(
        "(() => { const el = document.getElementById('latdist-plot');"
        " const c = el.querySelector('canvas.plot-overlay'); const notes = [...el.querySelectorAll('.annotation')]"
        "   .filter(n => n.textContent.startsWith('B p'));"
        " return [notes.length, notes.every(n => c.compareDocumentPosition(n) & Node.DOCUMENT_POSITION_FOLLOWING),"
        "   c.parentElement === notes[0].closest('.svg-container')]; })()"
    )
    assert order == [6, True, True], order  # B's p50 and p99 in each of the three panes
    # lanes: B's block takes a readable share of the plot, each of its bars several pixels high
    lanes = page.js(
        "(() => { const el = document.getElementById('requests-plot'); const ya = el._fullLayout.yaxis;"
        " const px = ya._length / Math.abs(ya.range[0] - ya.range[1]);"
        " const b = el.data.find(t => t.meta === 'B decode'); const a = el.data.find(t => t.meta === 'decode');"
        " const ys = (t) => [...new Set(t.y.filter(v => v !== null))];"
        " const bands = [ys(a), ys(b)].map(v => [Math.min(...v), Math.max(...v)]);"
        " return { widthB: b.line.width, rowsB: ys(b).length, rowsA: ys(a).length, bands,"
        "   bandB: (bands[1][1] - bands[1][0] + (bands[1][1] - bands[1][0]) / Math.max(ys(b).length - 1, 1)) * px,"
        "   plot: ya._length }; })()"
    )
    assert lanes["rowsA"] == n_a and lanes["rowsB"] == n_b, lanes
    assert lanes["bands"][1][0] > lanes["bands"][0][1]  # B below A
    assert lanes["widthB"] >= 6, lanes  # a bar of run B is several pixels high (1 px before)
    assert lanes["bandB"] >= 0.2 * lanes["plot"], lanes
    assert page.problems == []


# Every mark's label in the latency histograms, per pane: A's (drawn on the overlay canvas) and B's and the SLA's
# (Plotly annotations), as boxes in css px of the figure.
LABEL_BOXES = """() => {
  const el = document.getElementById('latdist-plot'), v = window.__layerscope.views.latdist;
  const box = el.getBoundingClientRect();
  const out = {};
  for (const [key, labels] of Object.entries(v.labels)) out[key] = labels.map((l) => ({ ...l }));
  const fl = el._fullLayout, keys = ['ttft', 'tpot', 'itl'];
  el.querySelectorAll('.annotation').forEach((n, i) => {
    const a = fl.annotations[Number(n.dataset.index ?? i)];
    const b = (n.querySelector('rect.bg') || n).getBoundingClientRect();
    const pane = keys[Math.max(0, Number((a.xref.match(/\\d+/) || ['1'])[0]) - 1)];
    out[pane].push({ text: a.text, x: b.left - box.left, y: b.top - box.top, w: b.width, h: b.height });
  });
  return out;
}"""


@pytest.mark.parametrize("size", [(1600, 1000), (1280, 720), (390, 844)])
def test_the_histograms_ab_labels_never_cover_each_other(page, server_url: str, size: tuple[int, int]) -> None:
    """Issue 17: A's and B's p50 / p99 labels (and the SLA's) crowded each other; each has its own row in its pane."""
    page.page.set_viewport_size({"width": size[0], "height": size[1]})
    open_serving(page, server_url, "serving-64-h200-tp8")
    page.wait(f"{L}.views.latdist.labels && Object.keys({L}.views.latdist.labels).length === 3")
    boxes = page.page.evaluate(LABEL_BOXES)
    for pane, labels in boxes.items():
        names = sorted(" ".join(b["text"].split(" ")[:2]) for b in labels)
        assert [n for n in names if not n.startswith("SLA")] == ["A p50", "A p99", "B p50", "B p99"], (pane, names)
        assert any(n.startswith("SLA") for n in names) == (pane != "ttft"), (pane, names)  # on TPOT and ITL
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                apart = a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"] or a["y"] + a["h"] <= b["y"] + 0.5 \
                    or b["y"] + b["h"] <= a["y"] + 0.5
                assert apart, (size, pane, a, b)
    assert page.problems == []


def test_back_returns_to_a_link_with_its_moment_even_when_it_was_left_while_playing(page, server_url: str) -> None:
    open_scenario(page, server_url, "article-vs-real", "&t=3000&x0=1000&x1=5000")
    page.wait(f"{STORE}.t === 3000 && new URLSearchParams(location.search).get('t') === '3000'")
    # every frame from now on: was the link's run on screen with a URL that lost its time?
    page.js("(() => { window.__lost = []; (function s() { const q = new URLSearchParams(location.search);"
            f" if ({STORE}.scenario.name === 'article-vs-real'"
            " && q.get('scenario') === 'article-vs-real' && !q.has('t'))"
            " window.__lost.push(location.search); requestAnimationFrame(s); })(); })()")
    page.page.get_by_test_id("play").click()
    page.wait(f"{STORE}.t > 3000", timeout_s=30)
    page.page.get_by_test_id("scenario-select").select_option("decode-pulses")  # left while playing
    page.wait(f"{STORE}.scenario.name === 'decode-pulses' && location.search.includes('decode-pulses')", timeout_s=60)
    page.page.go_back()
    page.wait(f"{STORE}.scenario.name === 'article-vs-real' && location.search.includes('article-vs-real')")
    t = float(page.js("new URLSearchParams(location.search).get('t')"))
    assert t > 3000  # where it was left, not where the link started
    page.wait(f"Math.abs({STORE}.t - {t}) < 1e-3 * {t}")
    time.sleep(0.6)
    assert page.js("window.__lost") == []
    q = page.js("Object.fromEntries(new URLSearchParams(location.search))")
    assert float(q["t"]) == pytest.approx(t) and "x0" in q and "x1" in q
    assert page.problems == []


def test_the_kv_pool_is_one_figure_labelled_for_what_each_count_counts(page, server_url: str) -> None:
    open_serving(page, server_url, "serving-kv-preemption")
    page.wait("document.getElementById('banks-info').textContent.includes('in the pool')")
    banks, cap = page.js(f"[{L}.views.banks.models[0].banks, {L}.views.banks.models[0].cap]")
    pool = banks * cap
    info = page.js("document.getElementById('banks-info').textContent")
    assert f"{banks}×{cap} = {pool:,} pages in the pool" in info, info
    # every block count in the screen's texts is the pool on screen, or the deployment's count labelled as vLLM's
    tokens = page.js(f"{L}.serving.deployment.per_gpu.kv_tokens")
    text = " ".join(page.js(
        "[document.getElementById('tour').innerText, document.getElementById('story').innerText]"))
    figure = re.compile(r"(?<![\d,.])(\d{4})(?=\s+blocks|\s+\(32 banks|\s+of them)|(?<=pool's )(\d{4})")
    said = [(int(m.group(1) or m.group(2)), text[max(0, m.start() - 60):m.end() + 60]) for m in figure.finditer(text)]
    assert said, text
    for n, around in said:
        if n == pool:
            assert "simulated pool" in around, around
        else:
            assert n == tokens // 16 and "vLLM" in around, around
    assert {n for n, _ in said} == {pool, tokens // 16}
    page.page.get_by_test_id("cue-tour").click()  # its first step names the figure the KV blocks climb to
    page.wait(f"{L}.tour.index === 0")
    assert f"simulated pool's {pool} (vLLM's {tokens // 16}" in page.js("document.getElementById('tour').innerText")
    assert page.problems == []
