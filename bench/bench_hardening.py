"""Load cases of the hardening round (issue 22): heavy clients, a viewer opening an uncached preset, playing viewers,
memory while they are there and after they leave, SIGTERM during a simulation.

A real `layerscope serve` subprocess on a free loopback port; asyncio `websockets` clients in this process; every
loop bounded in count and time.
- heavy clients: `--heavy` clients each load a distinct custom serving run of ~81k events (retrying every 2 s when
  told "busy"), then play it at speed 1; the case lasts until each has its run or was told busy, then `--hold-s`;
- playing viewers: `--viewers` clients play a preset at speed 1 meanwhile; the delay of each frame from its
  creation (frame.created_ms, the server's clock) to its receipt here, p50 and p99;
- first screen: once the heavy clients are loading, a new viewer loads a preset nobody loaded yet: seconds from its
  `load` to its `loaded`;
- memory: the server's RSS sampled every 0.1 s throughout (peak), then the seconds until it is under 300 MiB after
  every client left (at most 20 s), its RSS then, and its RSS 10 s after they left;
- SIGTERM: a new heavy load, SIGTERM 1 s into its simulation, seconds until the process exited.
Prints one JSON line (and writes it atomically to --out).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_hardening.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_streaming import free_port, is_loaded, scan_frame, start_server  # noqa: E402

from layerscope.atomic import write_text_atomic  # noqa: E402

MiB = 2**20
IDLE_RSS_MIB = 300  # the bound on an idle server's memory after clients leave
SETTLED_S = 10.0  # ... within this many seconds (issue 22): the RSS then is reported too
PLAY_SPEED = 1.0


def heavy_set(i: int) -> dict[str, Any]:
    """A custom serving run of ~80k events (~250 MB once prepared), under the default work limit, distinct per client
    (its seed): 128 requests, 8 at a time."""
    return {"workload.num_requests": 128, "workload.max_concurrency": 8, "workload.seed": 100 + i}


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_kib, self.stop = pid, 0, threading.Event()

    def rss_kib(self) -> int:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak_kib = max(self.peak_kib, self.rss_kib())
            time.sleep(0.1)


async def answer(ws: Any) -> tuple[str, str]:
    """The answer to a `load`: ("loaded", "") or ("error", its message)."""
    while True:
        text = await ws.recv()
        if is_loaded(text, scan=True):
            return "loaded", ""
        if text.startswith('{"type":"error"'):
            return "error", json.loads(text)["message"]


async def heavy_client(url: str, i: int, stop: asyncio.Event, stats: dict[str, Any]) -> None:
    async with websockets.connect(url, proxy=None, max_size=64 * MiB) as ws:
        for _ in range(60):  # retries while the server says busy, 2 s apart (at most 2 min)
            await ws.send(json.dumps({"type": "load", "scenario": "serving-64-h200-tp8", "set": heavy_set(i)}))
            kind, message = await answer(ws)
            if kind == "loaded":
                stats["loaded"] += 1
                break
            stats["busy" if "busy" in message else "refused"] += 1
            stats.setdefault("told_busy", set()).add(i)  # type: ignore[union-attr]
            if "busy" not in message or stop.is_set():
                return
            await asyncio.sleep(2.0)
        else:
            return
        await ws.send(json.dumps({"type": "play", "speed": PLAY_SPEED}))
        while not stop.is_set():
            try:
                async with asyncio.timeout(0.5):
                    await ws.recv()
            except TimeoutError:
                continue


async def playing_viewer(url: str, scenario: str, stop: asyncio.Event, delays: list[float]) -> None:
    async with websockets.connect(url, proxy=None, max_size=64 * MiB) as ws:
        await ws.send(json.dumps({"type": "load", "scenario": scenario}))
        while not is_loaded(await ws.recv(), scan=True):
            pass
        await ws.send(json.dumps({"type": "play", "speed": PLAY_SPEED}))
        while not stop.is_set():
            try:
                async with asyncio.timeout(0.5):
                    text = await ws.recv()
            except TimeoutError:
                continue
            if (got := scan_frame(text)) is not None:
                delays.append(time.time() * 1000.0 - got[0])
            elif text.startswith('{"type":"end"'):
                await ws.send(json.dumps({"type": "play"}))  # from the start again


async def first_screen(url: str, scenario: str) -> float:
    t0 = time.perf_counter()
    async with websockets.connect(url, proxy=None, max_size=64 * MiB) as ws:
        await ws.send(json.dumps({"type": "load", "scenario": scenario}))
        async with asyncio.timeout(120):
            while not is_loaded(await ws.recv(), scan=True):
                pass
    return time.perf_counter() - t0


async def held_events(url: str, stop: asyncio.Event, peak: list[int]) -> None:
    """The most events of runs the server held at once (/api/debug/sessions, polled every 0.5 s)."""
    debug = url.replace("ws://", "http://").replace("/ws", "/api/debug/sessions")
    while not stop.is_set():
        with urllib.request.urlopen(debug, timeout=10) as r:  # noqa: ASYNC210 -- loopback, answered in ms
            peak[0] = max(peak[0], json.loads(r.read())["memory_events"])
        await asyncio.sleep(0.5)


async def load_case(url: str, heavy: int, viewers: int, hold_s: float, fresh: str, played: str) -> dict[str, Any]:
    stop = asyncio.Event()
    stats: dict[str, Any] = {"loaded": 0, "busy": 0, "refused": 0}
    delays: list[float] = []
    peak = [0]
    poller = asyncio.create_task(held_events(url, stop, peak))
    watchers = [asyncio.create_task(playing_viewer(url, played, stop, delays)) for _ in range(viewers)]
    await asyncio.sleep(2.0)  # the viewers are playing before the heavy clients arrive
    heavies = [asyncio.create_task(heavy_client(url, i, stop, stats)) for i in range(heavy)]
    await asyncio.sleep(1.0)  # every slot is busy with heavy runs now
    screen_s = await first_screen(url, fresh)
    settled = time.monotonic() + 180  # every heavy client loaded its run or was told "busy" (bounded)
    while stats["loaded"] + len(stats.get("told_busy", ())) < heavy and time.monotonic() < settled:
        await asyncio.sleep(0.5)
    await asyncio.sleep(hold_s)
    stop.set()
    ended = await asyncio.gather(poller, *watchers, *heavies, return_exceptions=True)
    stats["failed"] = sum(isinstance(e, BaseException) for e in ended)
    stats["told_busy"] = len(stats.get("told_busy", ()))
    if stats["failed"]:
        print("client errors:", {repr(e)[:120] for e in ended if isinstance(e, BaseException)}, file=sys.stderr)
    return {"first_screen_s": round(screen_s, 2), "heavy": stats, "peak_events_held": peak[0], "frames": len(delays),
            "delay_ms_p50": round(statistics.median(delays), 1) if delays else None,
            "delay_ms_p99": round(statistics.quantiles(delays, n=100)[98], 1) if len(delays) > 2 else None}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used (/proc/PID/stat fields 14 and 15, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 1)


def seconds_until_idle(sampler: RssSampler, limit_s: float = 20.0) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if sampler.rss_kib() < IDLE_RSS_MIB * 1024:
            return round(time.monotonic() - t0, 2)
        time.sleep(0.1)
    return None


def sigterm_case(port: int) -> float:
    proc = start_server(port, False)
    url = f"ws://127.0.0.1:{port}/ws"

    async def send_heavy() -> Any:
        ws = await websockets.connect(url, proxy=None, max_size=64 * MiB)
        await ws.send(json.dumps({"type": "load", "scenario": "serving-64-h200-tp8", "set": heavy_set(999)}))
        return ws

    loop = asyncio.new_event_loop()
    ws = loop.run_until_complete(send_heavy())
    time.sleep(1.0)  # inside the simulation
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    finally:
        took = time.perf_counter() - t0
        loop.run_until_complete(ws.close())
        loop.close()
        if proc.poll() is None:
            proc.kill()
    return round(took, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heavy", type=int, default=8, help="heavy clients")
    ap.add_argument("--viewers", type=int, default=4, help="viewers playing a preset meanwhile")
    ap.add_argument("--hold-s", type=float, default=10.0,
                    help="seconds the clients stay once every heavy one has its run (or was told busy)")
    ap.add_argument("--fresh", default="serving-long-prompt-itl", help="the uncached preset the new viewer opens")
    ap.add_argument("--played", default="decode-pulses", help="the preset the playing viewers play")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON line here (atomically)")
    args = ap.parse_args()
    port = free_port()
    proc = start_server(port, False)
    sampler = RssSampler(proc.pid)
    sampler.start()
    try:
        out: dict[str, Any] = {"bench": "hardening", "heavy_clients": args.heavy, "playing_viewers": args.viewers}
        out.update(asyncio.run(load_case(f"ws://127.0.0.1:{port}/ws", args.heavy, args.viewers, args.hold_s,
                                         args.fresh, args.played)))
        left = time.monotonic()
        out["server_cpu_s"] = cpu_seconds(proc.pid)  # start-up and the load case: what the allocator costs shows here
        out["rss_peak_mib"] = round(sampler.peak_kib / 1024)
        out["seconds_to_idle_rss"] = seconds_until_idle(sampler)
        out["rss_idle_mib"] = round(sampler.rss_kib() / 1024)  # when it first got under IDLE_RSS_MIB (or at 20 s)
        time.sleep(max(0.0, left + SETTLED_S - time.monotonic()))
        out["rss_10s_after_mib"] = round(sampler.rss_kib() / 1024)
    finally:
        sampler.stop.set()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    out["sigterm_exit_s"] = sigterm_case(free_port())
    out["cpus"] = os.cpu_count()
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    line = json.dumps(out)
    print(line)
    if args.out is not None:
        write_text_atomic(args.out, line + "\n")


if __name__ == "__main__":
    main()
