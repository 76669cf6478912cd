"""Time to the first screen of every preset in headless Chromium: from navigation start to the first animation
frame after the timeline was drawn with the run's data (its kernels on the plot, the run's scenario in the store).

Two passes over the presets, each page in a new browser context (no HTTP cache):
- cold: a fresh `layerscope serve` per preset, the page opened as soon as /healthz answers (the server has
  simulated nothing it was not warming up on its own), twice: `cold_empty` with an empty on-disk cache of prepared
  presets (server/diskcache.py; a folder of its own per preset under .cache/bench-first-screen/), then
  `cold_filled` with a folder holding what the first servers wrote (`--disk-cache empty|filled` for one of them);
- warm: one server, every preset opened once to warm it, then each opened again and timed.
Prints one JSON line per preset and pass, then a summary line (median and worst per pass).

`--paired DIR` instead: two warm servers, this checkout's and one whose package is DIR/backend (another checkout,
e.g. `git archive main | tar -x -C DIR`), each preset opened on both in turn, `--runs` times; per preset the medians
and their ratio (this / other), so a change is measured against its base at the same load.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_first_screen.py [--scenario X] [--runs N]
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_first_screen.py --paired DIR --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_browser import ARGS, CHROMIUM  # noqa: E402
from bench_streaming import free_port, start_server  # noqa: E402

# true (ms since navigation start) once the timeline shows the run's kernels, on the first screen's canvas
# (views/sketch.js: el.dataset.sketch names the preset once it drew bars) or in the Plotly figure: checked on every
# animation frame
DRAWN = """(name) => {
  const ls = window.__layerscope, el = document.getElementById('timeline-plot'), f = window.__sketchFrame;
  if (f && f.name === name) return f.at;
  if (el && el.dataset.sketch === name) return performance.now();
  if (!ls || !ls.store.scenario || ls.store.scenario.name !== name || !el) return false;
  return el.data && el.data.some((t) => t.x && t.x.length > 0) ? performance.now() : false;
}"""


# the first animation frame after the sketch was drawn (its paint precedes it), seen from inside the page: a poll
# from here can start later than a fast page draws it
SKETCH_FRAME = """document.addEventListener('DOMContentLoaded', () => {
  const el = document.getElementById('timeline-plot');
  if (!el) return;
  new MutationObserver(() => {
    const name = el.dataset.sketch;
    if (name && !window.__sketchFrame)
      requestAnimationFrame(() => { window.__sketchFrame = { name, at: performance.now() }; });
  }).observe(el, { attributes: true, attributeFilter: ['data-sketch'] });
});"""


def first_screen_ms(browser, port: int, name: str) -> dict:
    context = browser.new_context(viewport={"width": 1600, "height": 1200})
    page = context.new_page()
    page.add_init_script(SKETCH_FRAME)
    page.goto(f"http://127.0.0.1:{port}/?scenario={name}", wait_until="commit")
    ms = page.wait_for_function(DRAWN, arg=name, polling="raf", timeout=60_000).json_value()
    nav = page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0];"
                        " return [n.responseEnd, n.domContentLoadedEventEnd]; }")
    context.close()
    return {"first_screen_ms": round(float(ms), 1), "html_ms": round(nav[0], 1), "dom_ready_ms": round(nav[1], 1)}


def server_state(port: int, pid: int) -> dict:
    """Simulations run and runs cached (/api/debug/sessions), and the server's resident and peak memory."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/debug/sessions", timeout=10) as r:
        debug = json.loads(r.read())
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    mem = {ln.split(":")[0]: int(ln.split()[1]) // 1024 for ln in status if ln.startswith(("VmRSS", "VmHWM"))}
    return {"simulations": debug["simulations"], "cached_runs": debug["cached_runs"],
            "rss_mib": mem.get("VmRSS"), "peak_rss_mib": mem.get("VmHWM")}


def stop(proc) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)


def start_other(port: int, root: Path):
    """A warm server of another checkout: its package first on the path (start_server passes the environment on)."""
    was = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(root / "backend")
    try:
        return start_server(port, compression=False, prewarm=True)
    finally:
        if was is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = was


def paired(browser, names: list[str], runs: int, other: Path) -> None:
    """Each preset on this checkout's server and the other's in turn: medians and their ratio per preset."""
    ports = [free_port(), free_port()]
    procs = [start_server(ports[0], compression=False, prewarm=True), start_other(ports[1], other)]
    ratios: list[float] = []
    try:
        for name in names:  # both servers simulate and cache it
            for port in ports:
                first_screen_ms(browser, port, name)
        for name in names:
            ms: list[list[float]] = [[], []]
            for _ in range(runs):
                for i, port in enumerate(ports):
                    ms[i].append(first_screen_ms(browser, port, name)["first_screen_ms"])
            this, base = statistics.median(ms[0]), statistics.median(ms[1])
            ratios.append(this / base)
            print(json.dumps({"bench": "first_screen_paired", "scenario": name, "this_ms": this, "other_ms": base,
                              "ratio": round(this / base, 3), "runs": runs,
                              "load_avg_1m": round(os.getloadavg()[0], 2)}), flush=True)
    finally:
        for proc in procs:
            stop(proc)
    print(json.dumps({"bench": "first_screen_paired", "presets": len(names), "other": str(other),
                      "ratio_median": round(statistics.median(ratios), 3), "ratio_worst": round(max(ratios), 3),
                      "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)}))


DISK = Path(__file__).resolve().parent.parent / ".cache" / "bench-first-screen"  # gitignored, inside the checkout


def cold_passes(browser, names: list[str], which: str, results: dict[str, list[float]]) -> None:
    """A fresh server per preset: with an empty on-disk cache (a folder of its own, whose files then join the
    filled folder), then with the filled folder; each line says whether the first screen came from disk."""
    filled = DISK / "filled"
    if which != "filled":
        shutil.rmtree(DISK, ignore_errors=True)
    filled.mkdir(parents=True, exist_ok=True)
    for label in ("empty", "filled"):
        if which not in ("both", label):
            continue
        for name in names:
            folder = DISK / f"empty-{name}" if label == "empty" else filled
            folder.mkdir(parents=True, exist_ok=True)
            os.environ["LAYERSCOPE_PREPARED_CACHE_DIR"] = str(folder)
            port = free_port()
            proc = start_server(port, compression=False, prewarm=True)
            try:
                r = first_screen_ms(browser, port, name)
                if label == "empty":  # the visited preset's file written before the server stops
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/loaded/{name}", timeout=60).read()
                    time.sleep(1.0)
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/debug/sessions", timeout=10) as resp:
                    r["from_disk"] = json.loads(resp.read())["prepared_disk_hits"] > 0
            finally:
                stop(proc)
            if label == "empty":
                for f in folder.glob("*.json.gz"):
                    f.replace(filled / f.name)
                shutil.rmtree(folder, ignore_errors=True)
            results[f"cold_{label}"].append(r["first_screen_ms"])
            print(json.dumps({"bench": "first_screen", "pass": f"cold_{label}", "scenario": name, **r,
                              "load_avg_1m": round(os.getloadavg()[0], 2)}), flush=True)


def main() -> None:
    from playwright.sync_api import sync_playwright

    from layerscope.scenario import preset_names

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="all", help="a preset, presets separated by commas, or 'all'")
    ap.add_argument("--runs", type=int, default=1, help="warm visits per preset (the median is reported)")
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--skip-warm", action="store_true")
    ap.add_argument("--disk-cache", choices=["both", "empty", "filled"], default="both",
                    help="cold passes: with an empty on-disk cache of prepared presets, a filled one, or both")
    ap.add_argument("--paired", type=Path, help="another checkout's root: warm visits paired with its server")
    args = ap.parse_args()
    names = preset_names() if args.scenario == "all" else args.scenario.split(",")
    results: dict[str, list[float]] = {"cold_empty": [], "cold_filled": [], "warm": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        if args.paired:
            paired(browser, names, args.runs, args.paired.resolve())
            browser.close()
            return
        if not args.skip_cold:
            cold_passes(browser, names, args.disk_cache, results)
        if args.skip_warm:
            browser.close()
            print(json.dumps({"bench": "first_screen", "presets": len(names),
                              **{f"{k}_median_ms": round(statistics.median(v), 1) for k, v in results.items() if v},
                              **{f"{k}_worst_ms": max(v) for k, v in results.items() if v},
                              "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)}))
            return
        os.environ.pop("LAYERSCOPE_PREPARED_CACHE_DIR", None)  # warm: the checkout's folder; each preset is
        # visited once before it is timed, so the timed visit finds its run in memory
        port = free_port()
        proc = start_server(port, compression=False, prewarm=True)
        try:
            for name in names:
                first_screen_ms(browser, port, name)  # the server simulates and caches it
            for name in names:
                runs = [first_screen_ms(browser, port, name) for _ in range(args.runs)]
                r = sorted(runs, key=lambda x: x["first_screen_ms"])[len(runs) // 2]
                results["warm"].append(r["first_screen_ms"])
                print(json.dumps({"bench": "first_screen", "pass": "warm", "scenario": name, **r,
                                  "runs": args.runs, "load_avg_1m": round(os.getloadavg()[0], 2)}), flush=True)
            server = server_state(port, proc.pid)
        finally:
            stop(proc)
        browser.close()
    print(json.dumps({"bench": "first_screen", "presets": len(names), "warm_server": server,
                      **{f"{k}_median_ms": round(statistics.median(v), 1) for k, v in results.items() if v},
                      **{f"{k}_worst_ms": max(v) for k, v in results.items() if v},
                      "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
