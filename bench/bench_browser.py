"""The dashboard in headless Chromium during playback: frames per second and the longest main-thread task.

A real `layerscope serve` subprocess on a free loopback port; Debian's /usr/bin/chromium driven by Playwright
(as in tests/browser). The page opens `--scenario`, plays it at the speed that makes it last `--play-s` wall
seconds, and reports requestAnimationFrame callbacks per second over the playback, websocket frames applied per
second, and the longest main-thread task seen by a PerformanceObserver('longtask') during playback (tasks over
50 ms; 0 if none), and, apart, the longest during page load.
Prints one JSON line (one per preset with --scenario all).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_browser.py
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_streaming import PLAY_SECONDS, free_port, start_server  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
LONGTASKS = """
window.__longtasks = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__longtasks.push(e.duration); })
  .observe({ type: "longtask", buffered: true });
"""
STORE = "window.__layerscope.store"


def wait(page, expr: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if page.evaluate(f"() => ({expr})"):
            return
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {expr}")


def top_self_time(profile: dict, n: int) -> list[list]:
    """The n functions with the most self time in a CDP CPU profile: [name url:line, ms, share of samples]."""
    nodes = {nd["id"]: nd for nd in profile["nodes"]}
    dt = dict.fromkeys(nodes, 0.0)
    for nid, d in zip(profile["samples"], profile["timeDeltas"], strict=True):
        dt[nid] += d / 1000.0
    by: dict[str, float] = {}
    for nid, ms in dt.items():
        f = nodes[nid]["callFrame"]
        key = f"{f['functionName'] or '(anonymous)'} {f['url'].rsplit('/', 1)[-1]}:{f['lineNumber'] + 1}"
        by[key] = by.get(key, 0.0) + ms
    total = sum(by.values()) or 1.0
    return [[k, round(v, 1), round(v / total, 3)] for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:n]]


def trace_sums(raw: bytes, n: int) -> list[list]:
    """The n trace event names with the most time on the renderer's main thread in a Chromium trace:
    [name, ms, count]. Complete events ('X') by their duration, begin/end pairs ('B'/'E') by their span."""
    events = json.loads(raw)
    events = events["traceEvents"] if isinstance(events, dict) else events
    main = {(e["pid"], e["tid"]) for e in events
            if e.get("ph") == "M" and e.get("name") == "thread_name" and e["args"].get("name") == "CrRendererMain"}
    ms: dict[str, float] = {}
    count: dict[str, int] = {}
    open_: dict[tuple, list] = {}
    for e in events:
        key = (e.get("pid"), e.get("tid"))
        if key not in main:
            continue
        ph, name = e.get("ph"), e.get("name", "")
        if ph == "X":
            dur = e.get("dur", 0) / 1000.0
        elif ph == "B":
            open_.setdefault(key, []).append(e)
            continue
        elif ph == "E" and open_.get(key):
            b = open_[key].pop()
            name, dur = b.get("name", ""), (e["ts"] - b["ts"]) / 1000.0
        else:
            continue
        ms[name] = ms.get(name, 0.0) + dur
        count[name] = count.get(name, 0) + 1
    return [[k, round(v, 1), count[k]] for k, v in sorted(ms.items(), key=lambda kv: -kv[1])[:n]]


TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "blink", "cc", "toplevel"]


def measure(browser, port: int, scenario: str, play_s: float, query: str, profile: int = 0,
            trace: int = 0) -> dict:
    """Open one preset, play it over play_s wall seconds, return its figures (and, profile > 0, the functions
    with the most self time during playback, from Chrome's sampling profiler; trace > 0, the trace event names
    with the most main-thread time during playback, from a Chromium performance trace)."""
    page = browser.new_context(viewport={"width": 1600, "height": 1200}).new_page()
    page.add_init_script(LONGTASKS)
    page.goto(f"http://127.0.0.1:{port}/?scenario={scenario}" + (f"&{query}" if query else ""))
    wait(page, f"window.__layerscope && {STORE}.scenario && {STORE}.scenario.name === '{scenario}'")
    # the first draws are done (a panel with nothing to show for the run, e.g. decode latency of a serving run, is
    # collapsed and never drawn)
    wait(page, "!!(document.getElementById('timeline-plot').data && (document.getElementById('latency-plot').data"
               " || document.getElementById('latency').classList.contains('collapsed')))")
    time.sleep(1.0)  # first draws of every view done before measuring
    load_tasks = page.evaluate("() => window.__longtasks.splice(0)")  # page load: Plotly parse, first draws
    page.get_by_test_id("speed").evaluate(
        "(el, v) => { if (![...el.options].some(o => o.value === v)) el.add(new Option(v, v)); "
        "el.value = v; el.dispatchEvent(new Event('change')); }",
        str(PLAY_SECONDS / play_s),
    )
    stats = "window.__layerscope.stats"
    cdp = None
    if profile:
        cdp = page.context.new_cdp_session(page)
        cdp.send("Profiler.enable")
        cdp.send("Profiler.start")
    if trace:
        browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
    raf0, frames0, t0 = page.evaluate(f"() => [{stats}.raf, {stats}.frames, performance.now()]")
    page.get_by_test_id("play").click()
    wait(page, f"{STORE}.ended", timeout_s=play_s * 10 + 30)
    raf1, frames1, t1 = page.evaluate(f"() => [{stats}.raf, {stats}.frames, performance.now()]")
    hot = top_self_time(cdp.send("Profiler.stop")["profile"], profile) if cdp else None
    sums = trace_sums(browser.stop_tracing(), trace) if trace else None
    grid = page.locator("#banks-info").inner_text()
    kernels = page.evaluate(f"() => {STORE}.runs.reduce((n, r) => n + r.kernel.length, 0)")
    # serving runs: requests in the lanes, the most running in one step, and the serving views' redraws
    serving = page.evaluate(
        "() => { const sv = window.__layerscope.serving; const st = window.__layerscope.stats;"
        " return [sv.order.length, Math.max(0, ...sv.steps.map(s => s.seqs)), st.plotDraws,"
        " ['RequestsView', 'StepMixView', 'LatencyDistView', 'KvBlocksView'].filter(k => k in st.renderMs).length,"
        " st.liveDraws || 0]; }"
    )
    longtasks = page.evaluate("() => window.__longtasks")
    page.context.close()
    wall = (t1 - t0) / 1000.0
    return {
        "bench": "browser",
        "scenario": scenario,
        "query": query,
        "kernels_drawn": kernels,
        "requests": serving[0],
        "max_seqs_per_step": serving[1],
        "plotly_draws": serving[2],
        "serving_views_drawn": serving[3],
        "bank_grid": grid,
        "play_s": play_s,
        "wall_s": round(wall, 2),
        "raf_per_s": round((raf1 - raf0) / wall, 1),
        "ws_frames_per_s": round((frames1 - frames0) / wall, 1),
        "longest_task_ms": round(max(longtasks, default=0.0), 1),
        "long_tasks": len(longtasks),
        "longest_task_ms_page_load": round(max(load_tasks, default=0.0), 1),
        "live_draws": serving[4],
        "chromium": CHROMIUM,
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        **({"profile_self_ms": hot} if hot is not None else {}),
        **({"trace_main_thread_ms": sums} if sums is not None else {}),
    }


def main() -> None:
    from playwright.sync_api import sync_playwright

    from layerscope.scenario import preset_names

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="long-context-128k", help="a preset, or 'all' for one line per preset")
    ap.add_argument("--play-s", type=float, default=5.0)
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also list the N functions with the most self time during playback (CPU profile)")
    ap.add_argument("--trace", type=int, default=0, metavar="N",
                    help="also list the N trace event names with the most main-thread time during playback")
    ap.add_argument("--query", default="", help="extra settings for the page URL, e.g. 'gpu=b200&free_hbm_gib=100'")
    args = ap.parse_args()
    names = preset_names() if args.scenario == "all" else [args.scenario]
    port = free_port()
    proc = start_server(port, compression=False)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for name in names:
                try:
                    line = measure(browser, port, name, args.play_s, args.query, args.profile, args.trace)
                except TimeoutError as e:  # one preset that does not load or end is reported, the rest still run
                    line = {"bench": "browser", "scenario": name, "error": str(e)}
                print(json.dumps(line), flush=True)
            browser.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
