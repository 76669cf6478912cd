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
COMPRESSION: str | None = "deflate"  # what browsers negotiate
PLAY_SECONDS = 20.0  # Settings.play_seconds of `layerscope serve`: a run lasts this long at speed 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    cmd = [sys.executable, "-m", "layerscope", "serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):  # at most 30 s
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start")


async def viewer(url: str, scenario: str, speed: float) -> dict[str, Any]:
    frames = events = 0
    delays: list[float] = []
    async with websockets.connect(url, proxy=None, max_size=64 * 2**20, compression=COMPRESSION) as ws:
        await ws.send(json.dumps({"type": "load", "scenario": scenario}))
        while json.loads(await ws.recv())["type"] != "loaded":
            pass
        t0 = time.perf_counter()
        await ws.send(json.dumps({"type": "play", "speed": speed}))
        async with asyncio.timeout(300):
            while True:
                m = json.loads(await ws.recv())
                if m["type"] == "frame":
                    delays.append(time.time() * 1000.0 - m["created_ms"])
                    frames += 1
                    events += len(m["events"])
                elif m["type"] == "end":
                    break
        wall = time.perf_counter() - t0
    return {"frames": frames, "events": events, "wall_s": wall, "delays_ms": delays}


async def crowd(url: str, scenario: str, speed: float, n: int) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(viewer(url, scenario, speed) for _ in range(n))))


def pct(values: list[float], q: float) -> float:
    return round(statistics.quantiles(values, n=100)[q - 1], 2) if len(values) >= 2 else round(values[0], 2)


def measure(url: str, scenario: str, n: int, play_s: float) -> dict[str, Any]:
    fast = asyncio.run(crowd(url, scenario, 1e6, n))
    wall = max(v["wall_s"] for v in fast)
    played = asyncio.run(crowd(url, scenario, PLAY_SECONDS / play_s, n))
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
    ap.add_argument("--compression", choices=["deflate", "none"], default="deflate", help="permessage-deflate or not")
    args = ap.parse_args()
    global COMPRESSION
    COMPRESSION = None if args.compression == "none" else args.compression
    port = free_port()
    proc = start_server(port)
    try:
        url = f"ws://127.0.0.1:{port}/ws"
        asyncio.run(crowd(url, args.scenario, 1e6, 1))  # warm: the run is simulated once and cached
        out: dict[str, Any] = {"bench": "streaming", "scenario": args.scenario, "play_s": args.play_s}
        out["compression"] = args.compression
        for n in args.viewers:
            out[f"viewers_{n}"] = measure(url, args.scenario, n, args.play_s)
        out["cpus"] = os.cpu_count()
        out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
