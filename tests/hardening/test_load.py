"""Load on a real server subprocess: fifty viewers, a viewer that never reads, and 200 connect/disconnect cycles."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from hardening_util import SHORT, Msg, RawClient, ServerProcess, Viewer, connect, play_once, recv_until, run_all

pytestmark = pytest.mark.slow
MIB = 1024  # VmRSS is in KiB


def fifty_viewers(server: ServerProcess) -> list[Viewer]:
    return run_all([lambda: _viewer(server.ws_url) for _ in range(50)], timeout_s=90)


async def _viewer(url: str) -> Viewer:
    v = Viewer()
    async with connect(url) as ws:
        await play_once(ws, v)
    return v


def test_fifty_viewers_at_full_speed_all_reach_end_with_bounded_memory(server: ServerProcess) -> None:
    warm = fifty_viewers(server)  # first rounds: imports, the simulation, allocator arenas settling
    warm += fifty_viewers(server)
    assert server.wait_idle()["sessions"] == 0
    rss0 = server.rss_kib()
    sent = 0
    for _ in range(3):
        viewers = fifty_viewers(server)
        sent += sum(v.bytes for v in viewers)
        assert all(v.ended and not v.errors for v in viewers)
        # every viewer got every kernel (none is ever dropped), the same as the first round's viewers
        assert {v.kinds.get("kernel") for v in viewers} == {warm[0].kinds["kernel"]}
        assert {v.kinds.get("chunk") for v in viewers} == {warm[0].kinds["chunk"]}
        assert server.wait_idle()["sessions"] == 0
    growth_kib = server.rss_kib() - rss0
    # 150 more plays moved ~30 MB of JSON (~40 MB before kernels travelled slim); memory that scaled with it would
    # show here, against the 8 MiB bound
    assert sent > 20 * 2**20
    assert growth_kib < 8 * MIB, f"RSS grew {growth_kib} KiB over {sent} bytes sent"
    live = server.debug()
    assert live["simulations"] == 1 and live["tasks"] == 0


SLOW_SCN = "allocator-off-long-context"  # 7k events, ~2.7 MB of frames per play


async def _reader(url: str, plays: int) -> Viewer:
    v = Viewer()
    async with connect(url) as ws:
        for _ in range(plays):
            await play_once(ws, v, SLOW_SCN, speed=50)
    return v


def test_viewer_that_never_reads_gets_a_bounded_queue_and_slows_nobody(server: ServerProcess) -> None:
    run_all([lambda: _reader(server.ws_url, plays=1)])  # warm: the run is simulated and cached
    rss0 = server.rss_kib()
    slow = RawClient(server.port)  # no client-side buffering: only the kernel's socket buffers
    try:
        _stalled_client(server, slow, rss0)
    finally:
        slow.close()
    assert server.wait_idle()["sessions"] == 0


def _stalled_client(server: ServerProcess, slow: RawClient, rss0: int) -> None:
    settings_queue_frames, settings_queue_control = 32, 64  # Settings defaults of `layerscope serve`
    slow.send_json({"type": "load", "scenario": SLOW_SCN})
    assert slow.recv_json()["type"] == "loaded"

    async def stall_and_watch() -> tuple[list[Viewer], list[dict[str, int]]]:
        watch: list[dict[str, int]] = []
        others = asyncio.gather(*(_reader(server.ws_url, plays=3) for _ in range(5)))
        for _ in range(16):  # replay the run (play at its end restarts it) without reading anything
            slow.send_json({"type": "play", "speed": 50})
            await asyncio.sleep(0.5)
            watch.append(await asyncio.to_thread(server.debug))
        async with asyncio.timeout(60):
            return await others, watch

    others, watch = asyncio.run(stall_and_watch())
    peak = max(w["max_queue"] for w in watch)
    assert peak >= settings_queue_frames, f"the stalled client's queue never filled (peak {peak})"
    assert peak <= settings_queue_frames + settings_queue_control
    assert max(w["dropped_snapshots"] for w in watch) > 0
    # the readers were served in full while the stalled client sat there
    assert all(v.ended and not v.errors and v.dropped == 0 for v in others)
    assert {v.kinds["kernel"] for v in others} == {others[0].kinds["kernel"]}
    assert server.rss_kib() - rss0 < 64 * MIB

    # The stalled client now reads: it is still connected, its frames have no gaps, snapshots were dropped,
    # and from its last restart on it lost no kernel.
    seqs, dropped, kernels, ends = [], 0, 0, 0
    for m in _drain(slow, quiet_s=1.0, limit_s=60.0):
        if m["type"] == "frame":
            seqs.append(m["seq"])
            dropped = m["dropped_snapshots"]
            kernels = 0 if m["reset"] else kernels
            kernels += sum(1 for e in m["events"] if e["kind"] == "kernel")
        ends += m["type"] == "end"
    assert ends >= 1
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert dropped > 0
    assert kernels == others[0].kinds["kernel"] // 3


def _drain(client: RawClient, quiet_s: float, limit_s: float) -> list[Msg]:
    """Every message until the server has been silent for `quiet_s` (at most `limit_s` in all)."""
    out: list[Msg] = []
    deadline = time.monotonic() + limit_s
    client.sock.settimeout(quiet_s)
    try:
        while time.monotonic() < deadline:
            out.append(client.recv_json())
    except TimeoutError:
        pass
    finally:
        client.sock.settimeout(30)
    return out


async def _cycle(url: str, port: int, i: int) -> str:
    """One connect/load/play/disconnect, ending in one of five ways."""
    mode = ("after-end", "mid-frame-abort", "before-loaded", "during-play", "half-frame")[i % 5]
    if mode == "half-frame":  # a raw socket that stops in the middle of a frame it is sending
        raw = await asyncio.to_thread(RawClient, port)
        frame = json.dumps({"type": "load", "scenario": SHORT}).encode()
        raw.sock.sendall(bytes([0x81, 0x80 | len(frame)]) + b"\0\0\0\0" + frame[:10])
        raw.close()
        return mode
    v = Viewer()
    async with connect(url) as ws:
        await ws.send(json.dumps({"type": "load", "scenario": SHORT}))
        if mode == "before-loaded":
            return mode
        await recv_until(ws, v, "loaded")
        await ws.send(json.dumps({"type": "play", "speed": 1e6 if mode != "during-play" else 20}))
        if mode == "mid-frame-abort":
            ws.transport.abort()  # TCP reset while the server is writing the frame
            return mode
        if mode == "during-play":
            await recv_until(ws, v, "frame")
            return mode
        await recv_until(ws, v, "end")
        assert not v.errors
    return mode


def test_two_hundred_connect_play_disconnect_cycles_leak_nothing(server: ServerProcess) -> None:
    run_all([lambda: _cycle(server.ws_url, server.port, 0)])  # warm: the simulation is cached from here on
    base = server.wait_idle()
    rss0 = server.rss_kib()
    modes: list[Any] = []
    for batch in range(20):  # 20 batches of 10 concurrent cycles
        modes += run_all([lambda k=batch * 10 + i: _cycle(server.ws_url, server.port, k) for i in range(10)])
    assert len(modes) == 200 and len(set(modes)) == 5
    live = server.wait_idle(baseline_tasks=base["asyncio_tasks"])
    assert live["sessions"] == 0 and live["tasks"] == 0
    assert live["asyncio_tasks"] <= base["asyncio_tasks"]
    assert live["simulations"] == 1
    assert server.alive
    assert server.rss_kib() - rss0 < 16 * MIB
