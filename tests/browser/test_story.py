"""Issue 11 in headless Chromium: the first screen, comparisons, the shared axis, damage, the tour, exports,
themes, layouts and text contrast."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
L = "window.__layerscope"
STORE = f"{L}.store"
TIME_PLOTS = ("timeline-plot", "memory-plot", "latency-plot")
CHECKS = Path(__file__).with_name("story_checks.js").read_text()


def check(page, name: str, *args: object) -> object:
    """Run one of story_checks.js's checks in the page."""
    return page.page.evaluate(f"(args) => ({CHECKS}).{name}(...args)", list(args))


def open_scenario(page, url: str, name: str, query: str = "") -> None:
    page.page.goto(f"{url}/?scenario={name}{query}")
    page.wait(f"window.__layerscope && {STORE}.scenario && {STORE}.scenario.name === '{name}'")
    page.wait("document.getElementById('timeline-plot').data && document.getElementById('latency-plot').data")
    page.wait(f"{L}.stats.raf > 5 && {STORE}.detailsReady")  # the claims and tour checks follow the first screen


def plot_end(plot: str) -> str:
    return f"document.getElementById('{plot}').layout.xaxis.range[1]"


def x_range(page, plot: str) -> list[float]:
    return page.js(f"document.getElementById('{plot}').layout.xaxis.range")


def drawn_points(page, plot: str) -> int:
    return int(check(page, "points", plot))


def test_first_screen_draws_the_whole_run_before_play(page, server_url: str) -> None:
    open_scenario(page, server_url, "allocator-off-long-context")
    assert page.js(f"{STORE}.t") == 0 and page.js(f"{STORE}.kernels.length") == 0  # nothing played yet
    for plot in TIME_PLOTS:
        assert drawn_points(page, plot) > 100, plot  # the whole run is drawn from loaded.overview
        lo, hi = x_range(page, plot)
        assert lo == pytest.approx(0) and hi == pytest.approx(page.js(f"{STORE}.axis.toX({STORE}.extent)")), plot
    last_bar = max(x for t in check(page, "bars") for x in t["x"] if x is not None)
    assert last_bar > 0.9 * page.js(f"{STORE}.axis.toX({STORE}.duration)")  # bars to the end of the run
    story = page.page.get_by_test_id("story-line")
    assert story.is_visible() and "allocator" in story.inner_text().lower()
    assert page.page.locator("#cue-play").is_visible() and page.page.get_by_test_id("cue-tour").is_visible()
    tour_box = page.page.get_by_test_id("tour").bounding_box()
    assert tour_box["y"] < 1000 - 100  # the tour is on the first screen, beside the panels
    assert page.problems == []


@pytest.mark.parametrize("name", ["allocator-off-long-context", "article-vs-real", "chunk-size-sweep-numa"])
def test_compare_presets_show_both_runs_in_timeline_and_bank_map(page, server_url: str, name: str) -> None:
    open_scenario(page, server_url, name)
    lanes = page.js("document.getElementById('timeline-plot').layout.yaxis.categoryarray")
    assert any(x.startswith("A ") for x in lanes) and any(x.startswith("B ") for x in lanes), lanes
    runs_with_bars = {y.split(" ")[0] for t in check(page, "bars") for y in t["y"] if y is not None}
    assert runs_with_bars == {"A", "B"}
    assert page.js(f"{L}.views.banks.models.map(m => m.run.role)") == ["main", "compare"]
    colours = page.js(
        "document.getElementById('latency-plot').data.filter(t => (t.name || '').startsWith('step latency'))"
        ".map(t => t.line.color)"
    )
    assert len(colours) == 2 and colours[0] != colours[1]  # two runs, two colours
    heads = "#claims-body [data-testid=claims-table] th"  # the claims that concern the run (the rest fold away)
    assert page.js(f"document.querySelectorAll('{heads}.a, {heads}.b').length") == 2
    delta = page.page.get_by_test_id("delta-line").inner_text()
    assert "%" in delta and " vs " in delta
    if name == "chunk-size-sweep-numa":
        assert "prefill" in delta  # the sweep's story is prefill, not only decode
    if name == "allocator-off-long-context":
        assert "the article claims" in delta and "small" in delta  # physics: the effect is small, said loudly
    assert page.problems == []


def test_reset_zoom_and_double_click_return_to_the_run_extent(page, server_url: str) -> None:
    open_scenario(page, server_url, "chunk-adapt-low-memory")
    full = x_range(page, "timeline-plot")
    quarter = page.js(f"{STORE}.extent / 4")
    page.js(f"Plotly.relayout('memory-plot', {{'xaxis.range': [0, {STORE}.axis.toX({quarter})]}})")
    page.wait(f"{STORE}.axis.range !== null")
    for plot in TIME_PLOTS:
        page.wait(f"Math.abs({plot_end(plot)} - {STORE}.axis.toX({quarter})) < 1e-9")
    page.js("Plotly.relayout('latency-plot', {'xaxis.autorange': true})")  # Plotly's reset / autoscale
    page.wait(f"{STORE}.axis.range === null")
    for plot in TIME_PLOTS:
        page.wait(f"Math.abs({plot_end(plot)} - {full[1]}) < 1e-9")
        assert x_range(page, plot) == pytest.approx(full)
        assert full[1] > 1  # not Plotly's empty 0-1 default
    # a real double-click on the timeline's plot area does the same
    page.js(f"Plotly.relayout('timeline-plot', {{'xaxis.range': [0, {STORE}.axis.toX({quarter})]}})")
    page.wait(f"{STORE}.axis.range !== null")
    box = page.page.locator("#timeline-plot .nsewdrag").first.bounding_box()
    page.page.mouse.dblclick(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait(f"{STORE}.axis.range === null")
    page.wait(f"Math.abs({plot_end('timeline-plot')} - {full[1]}) < 1e-9")
    # and so does the modebar's reset button
    page.js(f"Plotly.relayout('latency-plot', {{'xaxis.range': [0, {STORE}.axis.toX({quarter})]}})")
    page.wait(f"{STORE}.axis.range !== null")
    page.page.locator("#latency-plot").hover()
    page.page.locator("#latency-plot .modebar-btn[data-title='reset: the whole run']").click()
    page.wait(f"{STORE}.axis.range === null")
    for plot in TIME_PLOTS:
        page.wait(f"Math.abs({plot_end(plot)} - {full[1]}) < 1e-9")
    assert page.problems == []


def test_units_switch_sets_every_time_axis(page, server_url: str) -> None:
    open_scenario(page, server_url, "decode-pulses")
    # one layer: the 2.3 ms whole-model switch-over would squeeze 100 decode pulses; the axis is broken instead
    gap = page.js(f"{STORE}.axis.gaps[0]")
    assert page.js(f"{STORE}.axis.gaps.length") == 1 and gap["t1"] - gap["t0"] > 2000
    shown = page.js(f"{STORE}.axis.shown()")
    scale = page.js(f"{STORE}.axis.scale()")  # gap x is in µs of the drawn axis; shown() in its unit
    assert (gap["x1"] - gap["x0"]) / scale < 0.1 * (shown[1] - shown[0])  # the gap takes under a tenth of the width
    notes = page.js("document.getElementById('timeline-plot').layout.annotations.map(a => a.text)")
    assert any(n.startswith("//") for n in notes) and "axis broken" in page.js(
        "document.getElementById('timeline-plot').layout.xaxis.title.text"
    )
    layer = page.js("document.getElementById('latency-plot').data.filter(t => t.name === 'step latency')[0].y")
    layer_max = max(v for v in layer if v is not None)  # nulls break the line at gaps
    page.page.locator("#units-model").click()
    page.wait(f"{STORE}.axis.units === 'model'")
    for plot in TIME_PLOTS:
        page.wait(f"document.getElementById('{plot}').layout.xaxis.title.text.includes('whole model')")
    model_ms = page.js("document.getElementById('latency-plot').data.filter(t => t.name === 'step latency')[0].y")
    # ms of the whole model vs µs of one layer: consistent units
    assert min(v for v in model_ms if v is not None) * 1000 > layer_max
    sla = page.js("document.getElementById('latency-plot').layout.shapes.filter(s => s.type === 'line').map(s => s.y0)")
    assert sla == [page.js(f"{STORE}.scenario.sla_ms")]  # the SLA is drawn where it applies: the whole model
    assert "units=model" in page.page.url
    assert page.js(f"{STORE}.axis.gaps.length") == 0  # at whole-model scale the one-off cost is small: no break
    assert page.problems == []


def test_damage_stays_visible_at_a_paused_tour_step(page, server_url: str) -> None:
    open_scenario(page, server_url, "partial-eviction-spikes")
    page.page.get_by_test_id("speed").select_option("0.25")
    for title in ("Pressure arrives mid-chunk", "A lost update: partial eviction"):
        page.page.get_by_test_id("tour-next").click()
        page.wait(f"document.getElementById('tour-body').textContent.includes({title!r})", timeout_s=40)
    page.wait("!document.body.classList.contains('playing')")
    time.sleep(2.0)  # well past any flash: what is drawn now is state
    tally = page.js(f"{L}.views.banks.models[0].tally()")
    assert tally["evicted"] > 0 and tally["stale"] > 0, tally
    assert check(page, "evictedPixels") > 0  # evicted pages are red on the map, not a flash
    assert page.page.get_by_test_id("tour-check").is_visible()  # the step's moment is reached: its check shows
    # the CRC verdict per bank appears on the map once validation ran
    page.page.get_by_test_id("speed").select_option("64")
    page.page.get_by_test_id("play").click()
    page.wait(f"{STORE}.ended", timeout_s=40)
    crc = page.js(f"{L}.views.banks.models[0].crc")
    assert crc.count(True) > 0 and all(v is not None for v in crc)
    assert page.problems == []


def test_prev_restores_its_steps_moment_and_panels(page, server_url: str) -> None:
    open_scenario(page, server_url, "stale-chunk-metadata")
    page.page.get_by_test_id("speed").select_option("4")
    results = page.js(f"{STORE}.loaded.tour_results.map(r => r.t_us)")
    titles = page.js(f"{STORE}.scenario.tour.map(s => s.title)")
    for i in range(2):
        page.page.get_by_test_id("tour-next").click()
        page.wait(f"document.getElementById('tour-body').textContent.includes({titles[i]!r})", timeout_s=30)
        page.wait(f"Math.abs({STORE}.t - {results[i]}) < 1e-6", timeout_s=30)  # paused exactly at the server's time
    page.page.get_by_test_id("tour-prev").click()
    page.wait(f"Math.abs({STORE}.t - {results[0]}) < 1e-6")
    page.wait(f"document.getElementById('tour-body').textContent.includes({titles[0]!r})")
    highlighted = page.js("[...document.querySelectorAll('.panel.highlight')].map(n => n.id).sort()")
    assert highlighted == sorted(page.js(f"{STORE}.scenario.tour[0].highlight"))
    assert page.js(f"{STORE}.kernels.every(k => k.t_us <= {results[0]} + 1e-6)")  # the state is rewound too
    assert page.problems == []


def test_clicking_a_kernel_pins_its_detail_and_go_to_step(page, server_url: str) -> None:
    open_scenario(page, server_url, "decode-pulses")
    page.js(f"{L}.views.detail.pin({STORE}.main, {STORE}.main.kernel.find(k => k.step === 3))")
    detail = page.page.get_by_test_id("detail")
    assert detail.is_visible()
    text = detail.inner_text()
    for word in ("FLOPs", "bytes moved", "bound", "shapes", "step 3"):
        assert word in text, word
    detail.get_by_test_id("detail-goto").click()
    page.wait(f"{STORE}.axis.range !== null")
    lo, hi = page.js(f"{STORE}.axis.range")
    t3 = page.js(f"{STORE}.main.decode_step.find(e => e.step === 3).t_us")
    assert lo <= t3 <= hi and hi - lo < page.js(f"{STORE}.extent") / 10
    boundaries = page.js("document.getElementById('timeline-plot').data.find(t => t.meta === 'boundaries').x")
    assert any(x is not None for x in boundaries)  # zoomed in, step boundaries are drawn on the timeline
    assert page.problems == []


def test_panel_and_dashboard_export_png_and_svg(page, server_url: str) -> None:
    open_scenario(page, server_url, "decode-pulses")
    with page.page.expect_download() as dl:
        page.page.get_by_test_id("export-timeline-png").click()
    assert dl.value.suggested_filename == "decode-pulses-timeline.png"
    path = dl.value.path()
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with page.page.expect_download() as dl:
        page.page.get_by_test_id("export-banks-svg").click()
    assert dl.value.suggested_filename.endswith("-banks.svg")
    assert b"<svg" in Path(dl.value.path()).read_bytes()[:400]
    page.page.locator("#files-menu summary").click()
    with page.page.expect_download() as dl:
        page.page.get_by_test_id("export-dashboard-png").click()
    data = Path(dl.value.path()).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # every panel composed under one title
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "export-dashboard.png").write_bytes(data)
    assert page.problems == []


def test_both_themes_and_the_url(page, server_url: str) -> None:
    open_scenario(page, server_url, "decode-pulses", "&theme=light")
    assert page.js("document.documentElement.dataset.theme") == "light"
    assert page.js("document.getElementById('memory-plot').layout.paper_bgcolor") == "#ffffff"
    assert page.js("parseFloat(getComputedStyle(document.body).fontSize)") >= 15  # larger fonts for slides
    page.page.get_by_test_id("theme-toggle").click()
    page.wait("document.documentElement.dataset.theme === 'dark'")
    page.wait("document.getElementById('memory-plot').layout.paper_bgcolor !== '#ffffff'")
    assert "theme=light" not in page.page.url
    page.page.get_by_test_id("theme-toggle").click()
    page.wait("location.search.includes('theme=light')")
    assert page.problems == []


@pytest.mark.parametrize("size", [(1920, 1080), (1600, 1000), (1280, 720), (390, 844)])
def test_layout_at_four_viewport_sizes(browser, server_url: str, size: tuple[int, int]) -> None:
    from browser_helpers import Page

    w, h = size
    ctx = browser.new_context(viewport={"width": w, "height": h})
    page = Page(ctx.new_page())
    try:
        open_scenario(page, server_url, "allocator-off-long-context")
        time.sleep(0.5)
        assert page.js("document.documentElement.scrollWidth") <= w  # no sideways scroll
        if w >= 1280:
            assert page.page.get_by_test_id("controls").bounding_box()["height"] < 48  # the header in one row
        for panel in page.js("[...document.querySelectorAll('.panel')].filter(p => p.offsetParent).map(p => p.id)"):
            box = page.page.locator(f"#{panel}").bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= w + 0.5, panel
            assert box["width"] >= min(300, w - 20), panel  # wide enough to read
        ARTIFACTS.mkdir(exist_ok=True)
        page.page.screenshot(path=str(ARTIFACTS / f"viewport-{w}x{h}.png"), full_page=w < 600)
        assert page.problems == []
    finally:
        ctx.close()


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_text_colours_meet_wcag_aa(page, server_url: str, theme: str) -> None:
    open_scenario(page, server_url, "partial-eviction-spikes", f"&theme={theme}")
    page.page.get_by_test_id("speed").select_option("64")
    page.page.get_by_test_id("play").click()
    page.wait(f"{STORE}.ended", timeout_s=40)
    time.sleep(0.5)
    assert check(page, "textContrast") == []
    # bank cell states are told apart by luminance or hue, never by a 1.17:1 difference
    assert check(page, "cellStates") == []
    assert page.problems == []
