"""The dashboard in headless Chromium against the real server and engine."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

PANELS = ["topology", "timeline", "banks", "memory", "latency", "stages", "claims", "controls", "tour", "story", "log"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
STORE = "window.__layerscope.store"


def open_scenario(page, url: str, name: str) -> None:
    page.page.goto(f"{url}/?scenario={name}")
    page.wait(f"window.__layerscope && {STORE}.scenario && {STORE}.scenario.name === '{name}'")


def bank_pixels(page) -> str:
    data = page.js("document.getElementById('banks-canvas').toDataURL()")
    return hashlib.sha256(data.encode()).hexdigest()


def test_page_loads_clean_with_every_panel(page, server_url: str) -> None:
    open_scenario(page, server_url, "prefill-8k-chunked")
    for panel in PANELS:
        assert page.page.get_by_test_id(panel).is_visible(), panel
    # the article's layer is dense and runs without numerics: those panels collapse instead of staying empty
    assert not page.page.get_by_test_id("experts").is_visible()
    assert not page.page.get_by_test_id("numerics").is_visible()
    for control in ["scenario-select", "play", "pause", "step", "speed", "scrubber"]:
        assert page.page.get_by_test_id(control).is_visible(), control
    options = page.js("[...document.querySelectorAll('[data-testid=scenario-select] option')].map(o => o.value)")
    assert "decode-pulses" in options and "prefill-8k-chunked" in options
    page.wait("window.__layerscope.stats.raf > 10")
    assert page.problems == []


# Every Plotly figure drawn, in order, and whether a run was loaded then (Plotly.react wrapped as the bundle loads).
DRAWS = """
window.__draws = [];
let plotly;
Object.defineProperty(window, "Plotly", { configurable: true, get: () => plotly, set: (v) => {
  plotly = v;
  const react = v.react;
  v.react = function (el, ...rest) {
    window.__draws.push([el.id, Boolean(window.__layerscope && window.__layerscope.store.main)]);
    return react.call(this, el, ...rest);
  };
} });
"""


def test_the_first_screen_draws_the_runs_timeline_before_any_other_figure(page, server_url: str) -> None:
    page.page.add_init_script(DRAWS)
    open_scenario(page, server_url, "serving-long-prompt-itl")
    page.wait("window.__draws.length >= 4", timeout_s=60)
    draws = page.js("window.__draws")
    assert all(loaded for _, loaded in draws), draws  # nothing drawn empty before the run arrived
    assert draws[0][0] == "timeline-plot", draws  # then the timeline first, the other panels after it
    assert page.problems == []


# The sketch's canvas, read while it is on screen: its lanes' bars are the stage kinds' colours, not background.
SKETCH_PIXELS = """() => {
  const c = document.querySelector('#timeline-plot canvas.timeline-sketch');
  if (!c) return null;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const colours = new Set();
  for (let i = 0; i < d.length; i += 4 * 7) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
  return colours.size;
}"""


def test_the_first_screen_sketches_the_timeline_before_plotly_and_the_figure_replaces_it(page, server_url: str) -> None:
    """Plotly held back: the run's timeline is on screen anyway (a canvas with every lane of both runs and bars in the
    stage kinds' colours); once Plotly arrives the interactive figure takes its place."""
    release = []
    page.page.route("**/vendor/plotly.min.js", lambda route: release.append(route))
    open_scenario(page, server_url, "article-vs-real")
    page.wait("document.getElementById('timeline-plot').dataset.sketch === 'article-vs-real'")
    assert page.js("window.Plotly === undefined && !document.getElementById('timeline-plot').data")
    assert page.page.evaluate(SKETCH_PIXELS) > 4  # background, panel, text and at least two stage kinds' colours
    lanes = page.js("window.__layerscope.views.timeline.lanes().map((l) => l.name)")
    assert any(n.startswith("A ") for n in lanes) and any(n.startswith("B ") for n in lanes), lanes
    assert page.js("window.__layerscope.sketch.labels") == lanes  # every lane named, in the figure's order
    assert page.js("window.__layerscope.views.timeline.el.querySelector('canvas.timeline-sketch') !== null")
    page.wait("document.getElementById('story-line').textContent.includes('article')")  # the rest set up meanwhile
    page.wait("window.__layerscope.stats.raf > 10")
    for route in release:
        route.continue_()
    page.wait("document.getElementById('timeline-plot').data && !document.querySelector('canvas.timeline-sketch')")
    assert "sketch" not in page.js("Object.keys(document.getElementById('timeline-plot').dataset)")
    bars = page.js("document.getElementById('timeline-plot').data.filter(t => t.mode === 'lines' && !t.meta).length")
    assert bars >= 2
    assert page.problems == []


# What the page sends over its websocket (commands, parsed)
SENT = """
window.__sent = [];
const Sock = window.WebSocket;
window.WebSocket = class extends Sock { send(d) { window.__sent.push(JSON.parse(d)); super.send(d); } };
"""


def test_the_first_run_of_a_preset_as_shipped_comes_preloaded_over_http(page, server_url: str) -> None:
    """Its `loaded` is fetched beside the scripts (index.html's preload); the websocket asks for the playback alone;
    the run then plays as usual. A link with settings asks the websocket for the whole answer."""
    page.page.add_init_script(SENT)
    with page.page.expect_response(lambda r: "/api/loaded/decode-pulses" in r.url) as answer:
        open_scenario(page, server_url, "decode-pulses")
    assert answer.value.status == 200
    loads = page.js("window.__sent.filter((c) => c.type === 'load')")
    assert loads == [{"type": "load", "scenario": "decode-pulses", "set": {}, "loaded": False}], loads
    page.wait("document.getElementById('timeline-plot').data")
    page.page.get_by_test_id("play").click()
    page.wait(f"{STORE}.kernels.length > 10")  # frames of the preloaded run
    page.page.goto(f"{server_url}/?scenario=decode-pulses&decode_steps=12")
    page.wait(f"window.__layerscope && {STORE}.scenario && {STORE}.scenario.decode_steps === 12")
    loads = page.js("window.__sent.filter((c) => c.type === 'load')")
    assert len(loads) == 1 and "loaded" not in loads[0] and loads[0]["set"] == {"decode_steps": 12}, loads
    assert page.problems == []


def test_play_draws_kernels_one_attention_launch_per_chunk(page, server_url: str) -> None:
    open_scenario(page, server_url, "decode-pulses")
    page.page.get_by_test_id("scenario-select").select_option("prefill-8k-chunked")
    page.wait(f"{STORE}.scenario.name === 'prefill-8k-chunked' && {STORE}.t === 0")
    assert "scenario=prefill-8k-chunked" in page.page.url
    page.wait("window.__layerscope.stats.raf > 5")
    before = bank_pixels(page)
    page.page.get_by_test_id("play").click()
    page.wait(f"{STORE}.kernels.length > 10")
    raf0, t0 = page.js("[window.__layerscope.stats.raf, performance.now()]")
    time.sleep(1.5)  # count animation frames while it plays (a run lasts 6 s here)
    raf1, t1, ended = page.js(f"[window.__layerscope.stats.raf, performance.now(), {STORE}.ended]")
    assert not ended, "the fps window must fall inside playback"
    # the page keeps animating while it plays; its frame rate is a benchmark (bench/bench_browser.py), not a test
    assert raf1 > raf0 and t1 > t0, "no animation frame during playback"
    ARTIFACTS.mkdir(exist_ok=True)
    page.page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
    page.wait(f"{STORE}.ended", timeout_s=30)
    time.sleep(0.6)  # the last Plotly redraw is coalesced into a later animation frame
    chunks = page.js(f"{STORE}.chunks.length")
    assert chunks == 2  # 8192 tokens in chunks of 4096
    labels = page.js("document.getElementById('timeline-plot').data.find(t => t.meta === 'chunk-labels').text")
    assert labels == ["c0", "c1"]
    bars = page.js(
        "document.getElementById('timeline-plot').data.filter(t => t.mode === 'lines' && !t.meta)"
        ".reduce((n, t) => n + t.x.filter(x => x !== null).length / 3, 0)"
    )
    assert 0 < bars <= page.js(f"{STORE}.main.kernel.length") == page.js(f"{STORE}.kernels.length")
    assert bank_pixels(page) != before
    # frames carry slim kernels; the topology's tooltip reads the launch's whole record from the overview
    assert page.js(f"Object.keys({STORE}.kernels[0]).sort().join()") == "dur_us,kind,phase,row,stage,t_us"
    stage, bound = page.js(f"[{STORE}.lastKernel.stage, {STORE}.kernelRecord({STORE}.lastKernel).bound]")
    page.page.get_by_test_id("topology").locator(f"[data-stage='{stage}']").first.wait_for(state="attached")
    tip = page.js(f"document.querySelector('#topology-svg [data-stage={stage}] title').textContent")
    assert f"moved, {bound}-bound" in tip and "NaN" not in tip and "undefined" not in tip, tip

    quarter = page.js(f"{STORE}.extent / 4")  # zoom the timeline: the store's axis and every time plot follow
    page.js(f"Plotly.relayout('timeline-plot', {{'xaxis.range': [0, {STORE}.axis.toX({quarter})]}})")
    page.wait(f"{STORE}.axis.range && Math.abs({STORE}.axis.range[1] - {quarter}) < 1e-6 * {quarter}")
    for plot in ("memory-plot", "latency-plot"):
        end = f"document.getElementById('{plot}').layout.xaxis.range[1]"
        page.wait(f"Math.abs({end} - {STORE}.axis.toX({quarter})) < 1e-9")
    assert page.problems == []


def test_pause_stops_time_and_step_is_one_batch(page, server_url: str) -> None:
    open_scenario(page, server_url, "decode-pulses")
    page.page.get_by_test_id("speed").select_option("0.25")
    page.page.keyboard.press("Space")
    page.wait(f"{STORE}.kernels.length > 3")
    page.page.get_by_test_id("pause").click()
    page.wait("!document.body.classList.contains('playing')")
    t_paused = page.js(f"{STORE}.t")
    time.sleep(0.5)
    assert page.js(f"{STORE}.t") == t_paused

    frames, kernels = page.js(f"[{STORE}.frames, {STORE}.kernels.length]")
    page.page.get_by_test_id("step").click()
    page.wait(f"{STORE}.frames > {frames}")
    time.sleep(0.3)  # nothing else may follow
    assert page.js(f"[{STORE}.frames, {STORE}.kernels.length]") == [frames + 1, kernels + 1]
    page.page.keyboard.press("ArrowRight")
    page.wait(f"{STORE}.frames > {frames + 1}")
    assert page.js(f"{STORE}.kernels.length") == kernels + 2
    assert page.js(f"{STORE}.t") > t_paused

    # the scrubber seeks forward (never before the stepped time: pause may land past half the run on a slow
    # machine): state rebuilt from every event up to there
    half = page.js(f"Math.max({STORE}.duration / 2, {STORE}.t)")
    page.js(
        f"(() => {{ const s = document.querySelector('[data-testid=scrubber]'); s.value = {half};"
        " s.dispatchEvent(new Event('change')); })()"
    )
    page.wait(f"Math.abs({STORE}.t - {half}) < 1e-6")
    assert page.js(f"{STORE}.kernels.every(k => k.t_us <= {half})")
    assert page.js(f"{STORE}.kernels.length") >= kernels + 2  # forward from the stepped time
    assert page.problems == []


def test_settings_form_reloads_the_run_and_lives_in_the_url(page, server_url: str) -> None:
    open_scenario(page, server_url, "prefill-8k-chunked")
    page.page.get_by_role("button", name="settings").click()
    page.page.locator("#settings input[name=chunk_size]").fill("2048")
    page.page.get_by_test_id("apply").click()
    page.wait(f"{STORE}.scenario.chunk_size === 2048")
    assert "chunk_size=2048" in page.page.url and "scenario=prefill-8k-chunked" in page.page.url
    page.page.get_by_test_id("speed").select_option("64")
    page.page.get_by_test_id("play").click()
    page.wait(f"{STORE}.ended")
    assert page.js(f"{STORE}.chunks.length") == 4  # 8192 / 2048

    page.page.reload()  # a shared URL rebuilds the same run
    page.wait(f"window.__layerscope && {STORE}.scenario && {STORE}.scenario.chunk_size === 2048")
    assert page.js("document.querySelector('#settings input[name=chunk_size]').value") == "2048"

    page.page.locator("#settings input[name=chunk_size]").fill("3")  # below the schema's minimum
    page.page.get_by_test_id("apply").click()
    page.wait("document.getElementById('form-error').textContent.includes('chunk_size')")
    assert page.problems == []
    assert "chunk_size=2048" in page.page.url  # a refused setting does not enter the URL


def test_tour_plays_to_each_step_and_highlights(page, server_url: str) -> None:
    open_scenario(page, server_url, "prefill-8k-chunked")
    tour = page.js(f"{STORE}.scenario.tour.map(s => s.title)")
    assert len(tour) >= 2
    page.page.get_by_test_id("tour-next").click()
    page.wait(f"document.getElementById('tour-body').textContent.includes({tour[0]!r})")
    assert page.js("document.getElementById('topology').classList.contains('highlight')")
    page.page.get_by_test_id("tour-next").click()
    page.wait(f"document.getElementById('tour-body').textContent.includes({tour[1]!r})")
    page.wait("!document.body.classList.contains('playing')")
    assert page.js("document.getElementById('timeline').classList.contains('highlight')")
    # the step lands once the seek's reset frame and the frames after it have arrived
    page.wait(f"{STORE}.kernels.some(k => k.stage === 'attention')")
    page.page.get_by_test_id("tour-skip").click()
    assert page.js("document.querySelectorAll('.highlight').length") == 0
    speed = page.js("document.querySelector('[data-testid=speed]').value")
    page.page.keyboard.press("+")
    page.wait(f"document.querySelector('[data-testid=speed]').value !== {speed!r}")
    assert float(page.js("document.querySelector('[data-testid=speed]').value")) == 2 * float(speed)
    assert page.problems == []


def test_replay_a_recorded_run(page, server_url: str, tmp_path: Path) -> None:
    from layerscope.events import event_json
    from layerscope.runtime.engine import simulate
    from layerscope.scenario import load_preset

    # an older recording (no `run` line) made with 4 chunks: refused under the 2-chunk preset, naming both ...
    events = simulate(load_preset("prefill-8k-chunked").with_overrides({"chunk_size": 2048})).events
    recorded = tmp_path / "run.jsonl"
    recorded.write_text("".join(event_json(e) + "\n" for e in events))
    open_scenario(page, server_url, "prefill-8k-chunked")
    page.page.get_by_test_id("replay-file").set_input_files(str(recorded))
    page.wait("document.getElementById('toast').textContent.includes('recorded chunk_size=2048')")
    # ... and replayed once the page shows the settings it was recorded with
    page.page.get_by_role("button", name="settings").click()
    page.page.locator("#settings input[name=chunk_size]").fill("2048")
    page.page.get_by_test_id("apply").click()
    page.wait(f"{STORE}.scenario.chunk_size === 2048")
    page.page.get_by_test_id("replay-file").set_input_files(str(recorded))
    page.wait(
        f"{STORE}.loaded && {STORE}.loaded.num_events === {len(events)} && window.__layerscope.stats.messages > 3"
    )
    page.page.get_by_test_id("speed").select_option("64")
    page.page.get_by_test_id("play").click()
    page.wait(f"{STORE}.ended")
    assert page.js(f"{STORE}.kernels.length") == sum(e.kind == "kernel" for e in events)
    assert page.js(f"{STORE}.chunks.length") == 4

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"kind": "kernel", "t_us": 1.0}\n')
    page.page.get_by_test_id("replay-file").set_input_files(str(broken))
    page.wait("document.getElementById('form-error').textContent.includes('events.0')")
    assert page.problems == []


def _download(page, link: str, tmp_path: Path) -> tuple[str, Path]:
    page.js("document.getElementById('files-menu').open = true")  # the download links sit in the files menu
    with page.page.expect_download() as info:
        page.page.get_by_test_id(link).click()
    download = info.value
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    return download.suggested_filename, path


def test_downloads_are_the_run_on_screen(page, server_url: str, tmp_path: Path) -> None:
    import json

    page.page.goto(f"{server_url}/?scenario=prefill-8k-chunked&chunk_size=2048&gpu=h200")  # the settings applied
    page.wait(f"window.__layerscope && {STORE}.scenario && {STORE}.scenario.chunk_size === 2048")
    name, trace = _download(page, "trace-link", tmp_path)
    assert name == "prefill-8k-chunked_gpu=h200_chunk_size=2048.trace.json"
    slices = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    assert sum(e["name"] == "qwen3_prefill_flash_attn_chunked" for e in slices) == 4  # 8192 / 2048, as on screen
    name, report = _download(page, "report-link", tmp_path)
    assert name == "prefill-8k-chunked_gpu=h200_chunk_size=2048.report.html" and "h200" in report.read_text()
    name, events = _download(page, "events-link", tmp_path)
    assert name == "prefill-8k-chunked_gpu=h200_chunk_size=2048.events.jsonl"

    # the events file replays as its own run, whatever the page showed; its downloads are that recording
    open_scenario(page, server_url, "decode-pulses")
    page.page.get_by_test_id("replay-file").set_input_files(str(events))
    page.wait(f"{STORE}.scenario.name === 'prefill-8k-chunked' && {STORE}.scenario.gpu === 'h200'")
    page.wait("document.getElementById('toast').textContent.includes('with its own settings')")
    name, again = _download(page, "events-link", tmp_path / "again")
    assert name == "prefill-8k-chunked_gpu=h200_chunk_size=2048.events.jsonl"
    # the same lines; only a whole-number float among the summary figures (2300.0) may come back as 2300, since the
    # page's JavaScript numbers do not keep that difference (the API test checks the bytes without a browser)
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert [json.loads(line) for line in again.read_text().splitlines()] == lines
    assert page.problems == []
