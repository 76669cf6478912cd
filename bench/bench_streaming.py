"""Websocket streaming to 1 and to 50 viewers: frames and events per second, delay from frame creation to receipt.

A real `layerscope serve` subprocess on a free loopback port; asyncio `websockets` clients in this process. Two
measures per viewer count:
- throughput: every viewer plays the run at the maximum speed (1e6); events/s = events received / wall time
  from `play` to `end`, summed over viewers;
- playback: every viewer plays at a speed that makes the run last `--play-s` wall seconds; frames/s per viewer
  (the server sends at most one frame per 30 ms tick) and the delay of each frame from its server-side creation
  (`frame.created_ms`, the server's wall clock) to its receipt here (same machine, same clock), p50 and p99.
Prints one JSON line.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_streaming.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import websockets

ROOT = Path(__file__).resolve().parents[1]
COMPRESSION: str | None = None  # "deflate": what browsers offer; the server accepts it with --ws-compression
PLAY_SECONDS = 20.0  # Settings.play_seconds of `layerscope serve`: a run lasts this long at speed 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, compression: bool, prewarm: bool = False) -> subprocess.Popen[bytes]:
    """`prewarm` off by default: a steady-state measurement (frames, fps) should not share the CPU with the
    server warming every preset in the background (bench_first_screen.py turns it on)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    cmd = [sys.executable, "-m", "layerscope", "serve", "--port", str(port), "--prewarm" if prewarm else "--no-prewarm"]
    if compression:  # without it the clients do not offer deflate, so the server's setting does not matter
        cmd.append("--ws-compression")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):  # at most 30 s
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start")


CREATED = re.compile(r'"created_ms":([-0-9.eE+]+)')


def scan_frame(text: str) -> tuple[float, int] | None:
    """(created_ms, events) of a frame without parsing it; None for other messages. Counts `"kind":` keys:
    one per event for the bench's scenario (main() checks it against a full parse)."""
    if not text.startswith('{"type":"frame"'):
        return None
    m = CREATED.search(text)
    assert m is not None, "a frame without created_ms"
    return float(m.group(1)), text.count('"kind":')


def is_loaded(text: str, scan: bool) -> bool:
    """Whether a message is `loaded`. `scan`: by its first key (the server writes `type` first), not by parsing its
    overview (3.3 MB for serving-64-h200-tp8: 50 clients parsing theirs at once in this one process held up the
    frames of those already playing by seconds, a delay of the bench's own, not the server's)."""
    return text.startswith('{"type":"loaded"') if scan else json.loads(text)["type"] == "loaded"


async def viewer(url: str, scenario: str, speed: float, scan: bool = False) -> dict[str, Any]:
    """One viewer's frames, events and delays. `scan`: read frames with scan_frame instead of json.loads, so
    that 50 clients sharing the server's 2 cores measure the server rather than their own JSON parsing."""
    frames = events = 0
    delays: list[float] = []
    async with websockets.connect(url, proxy=None, max_size=64 * 2**20, compression=COMPRESSION) as ws:
        await ws.send(json.dumps({"type": "load", "scenario": scenario}))
        while not is_loaded(await ws.recv(), scan):
            pass
        t0 = time.perf_counter()
        await ws.send(json.dumps({"type": "play", "speed": speed}))
        async with asyncio.timeout(300):
            while True:
                text = await ws.recv()
                if scan and (got := scan_frame(text)) is not None:
                    delays.append(time.time() * 1000.0 - got[0])
                    frames += 1
                    events += got[1]
                    continue
                m = json.loads(text)
                if m["type"] == "frame":
                    delays.append(time.time() * 1000.0 - m["created_ms"])
                    frames += 1
                    events += len(m["events"])
                elif m["type"] == "end":
                    break
        wall = time.perf_counter() - t0
    return {"frames": frames, "events": events, "wall_s": wall, "delays_ms": delays}


async def scan_agrees(url: str, scenario: str) -> bool:
    """Whether scan_frame reads every frame of one max-speed playback as json.loads does."""
    async with websockets.connect(url, proxy=None, max_size=64 * 2**20, compression=COMPRESSION) as ws:
        await ws.send(json.dumps({"type": "load", "scenario": scenario}))
        await ws.send(json.dumps({"type": "play", "speed": 1e6}))
        async with asyncio.timeout(300):
            while (m := json.loads(text := await ws.recv()))["type"] != "end":
                if m["type"] == "frame" and scan_frame(text) != (m["created_ms"], len(m["events"])):
                    return False
    return True


async def crowd(url: str, scenario: str, speed: float, n: int, scan: bool = False) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(viewer(url, scenario, speed, scan) for _ in range(n))))


def pct(values: list[float], q: float) -> float:
    return round(statistics.quantiles(values, n=100)[q - 1], 2) if len(values) >= 2 else round(values[0], 2)


def measure(url: str, scenario: str, n: int, play_s: float, scan: bool) -> dict[str, Any]:
    fast = asyncio.run(crowd(url, scenario, 1e6, n, scan))
    wall = max(v["wall_s"] for v in fast)
    played = asyncio.run(crowd(url, scenario, PLAY_SECONDS / play_s, n, scan))
    delays = [d for v in played for d in v["delays_ms"]]
    return {
        "max_speed_events_per_s": round(sum(v["events"] for v in fast) / wall),
        "max_speed_wall_s": round(wall, 3),
        "playback_frames_per_s_per_viewer": round(statistics.median(v["frames"] / v["wall_s"] for v in played), 1),
        "playback_events_per_s_total": round(sum(v["events"] for v in played) / max(v["wall_s"] for v in played)),
        "delay_ms_p50": pct(delays, 50),
        "delay_ms_p99": pct(delays, 99),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="long-context-128k")
    ap.add_argument("--play-s", type=float, default=4.0, help="wall seconds of the playback measure")
    ap.add_argument("--viewers", type=int, nargs="+", default=[1, 50])
    ap.add_argument(
        "--compression",
        choices=["deflate", "none"],
        default="none",
        help="permessage-deflate offered by the clients and enabled on the server (`serve --ws-compression`), or not "
        "(the server's default)",
    )
    ap.add_argument(
        "--client-parse",
        choices=["json", "scan"],
        default="json",
        help="how the bench's clients read frames: json.loads (as a page does) or a scan for created_ms and the "
        "event count (cheap: the clients, on the server's cores, then cost the server less)",
    )
    args = ap.parse_args()
    global COMPRESSION
    COMPRESSION = None if args.compression == "none" else args.compression
    port = free_port()
    proc = start_server(port, COMPRESSION is not None)
    try:
        url = f"ws://127.0.0.1:{port}/ws"
        scan = args.client_parse == "scan"
        asyncio.run(crowd(url, args.scenario, 1e6, 1))  # warm: the run is simulated once and cached
        if scan and not asyncio.run(scan_agrees(url, args.scenario)):
            raise SystemExit("--client-parse scan miscounts events for this scenario; use json")
        out: dict[str, Any] = {"bench": "streaming", "scenario": args.scenario, "play_s": args.play_s}
        out["compression"], out["client_parse"] = args.compression, args.client_parse
        for n in args.viewers:
            out[f"viewers_{n}"] = measure(url, args.scenario, n, args.play_s, scan)
        out["cpus"] = os.cpu_count()
        out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
