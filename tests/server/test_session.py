"""Playback and the per-client queue without sockets: merging, stepping, slow readers, isolation."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fakesim import fake_simulate

from layerscope.commands.serve import simulator
from layerscope.scenario import ScenarioSpec
from layerscope.server.playback import Playback, decimate_snapshots, merge_range, merge_snapshots
from layerscope.server.runs import RunCache, prepare
from layerscope.server.session import ClientTooSlow, OutQueue, Session
from layerscope.server.settings import Settings

SPEC = ScenarioSpec(prompt_len=8192, chunk_size=1024, decode_steps=40)


def ev(kind: str, t: float, **kw: Any) -> dict[str, Any]:
    return {"kind": kind, "t_us": t, **kw}


def test_merge_keeps_latest_snapshot_of_each_kind_in_place() -> None:
    events = [ev("banks", 1, n=1), ev("kernel", 2), ev("memory", 3, n=1), ev("banks", 4, n=2), ev("memory", 5, n=2)]
    kept, dropped = merge_snapshots(events)
    assert kept == [ev("kernel", 2), ev("banks", 4, n=2), ev("memory", 5, n=2)]
    assert dropped == 2


def test_merge_range_is_merge_snapshots_of_the_slice() -> None:
    run = prepare(fake_simulate(SPEC))
    n = len(run.events)
    assert len(run.snapshot_index) > 10  # enough snapshots that ranges hold several of each kind
    for start in range(0, n, 7):
        for end in range(start, n + 1, 5):
            assert merge_range(run, start, end) == merge_snapshots(run.events[start:end])[0], (start, end)


def test_decimate_keeps_the_last_snapshot_and_all_others() -> None:
    events = [ev("memory", float(i), i=i) for i in range(100)] + [ev("kernel", 100.0)]
    thin = decimate_snapshots(events, 10)
    mem = [e["i"] for e in thin if e["kind"] == "memory"]
    assert len(mem) == 10 and mem[-1] == 99
    assert thin[-1] == ev("kernel", 100.0)


def test_step_is_up_to_the_next_kernel() -> None:
    run = prepare(fake_simulate(SPEC))
    pb = Playback(run, play_seconds=1.0, max_frame_events=10_000)
    seen: list[dict[str, Any]] = []
    while batch := pb.step():
        assert sum(e["kind"] == "kernel" for e in batch) <= 1
        assert batch[-1]["kind"] == "kernel" or all(e["kind"] != "kernel" for e in batch)
        seen += batch
    kernels = [e for e in run.events if e["kind"] == "kernel"]
    assert [e for e in seen if e["kind"] == "kernel"] == kernels
    assert pb.t_us == run.duration_us


def test_advance_caps_frame_size_without_skipping() -> None:
    run = prepare(fake_simulate(SPEC))
    pb = Playback(run, play_seconds=1.0, max_frame_events=5)
    pb.play(0.0)
    got: list[dict[str, Any]] = []
    for i in range(10_000):
        batch = pb.advance(100.0 + i * 0.01)  # long after the run should have ended: still capped per call
        assert len(batch) <= 5
        got += batch
        if pb.at_end:
            break
    assert [e for e in got if e["kind"] == "kernel"] == [e for e in run.events if e["kind"] == "kernel"]


def test_playback_runs_to_the_end_of_the_longer_compare_run() -> None:
    longer = {"label": "longer", "set": {"decode_steps": 120}}
    spec = ScenarioSpec(prompt_len=8192, chunk_size=1024, decode_steps=40, compare=longer)
    run = prepare(fake_simulate(spec))
    other = run.result.compare
    b_end = max(e.t_us + getattr(e, "dur_us", 0.0) for e in other.events)
    assert b_end > run.duration_us * 1.5  # B is the longer run
    pb = Playback(run, play_seconds=1.0, max_frame_events=10_000)
    assert pb.end_us == b_end
    pb.play(0.0)
    pb.advance(0.5)
    assert pb.t_us == pytest.approx(b_end / 2)  # the clock counts the longer run: half the wall time, half of B
    pb.advance(5.0)
    assert pb.at_end and pb.t_us == b_end  # past A's end, on to B's
    while pb.step():
        pass
    assert pb.t_us == b_end


def frame(events: list[dict[str, Any]]) -> tuple[float, list[dict[str, Any]]]:
    return events[-1]["t_us"], events


def test_queue_coalesces_frames_and_counts_dropped_snapshots() -> None:
    async def go() -> None:
        q = OutQueue(max_frames=2, max_control=4)
        for i in range(6):
            q.push_frame(*frame([ev("kernel", float(i)), ev("banks", float(i), i=i)]))
        assert len(q) == 2
        assert q.dropped_snapshots == 4  # frames 2..5 merged into frame 1: banks 1..4 superseded
        first, second = await q.get(), await q.get()
        assert [e["t_us"] for e in first["events"]] == [0.0, 0.0]
        assert [e["kind"] for e in second["events"]] == ["kernel"] * 5 + ["banks"]
        assert second["events"][-1]["i"] == 5 and second["seq"] == 2 and second["dropped_snapshots"] == 4

    asyncio.run(go())


def test_queue_reset_discards_pending_frames_but_not_control() -> None:
    async def go() -> None:
        q = OutQueue(max_frames=8, max_control=4)
        q.push_frame(*frame([ev("memory", 1.0)]))
        q.push_control({"type": "state"})
        q.push_frame(0.0, [ev("kernel", 0.0)], reset=True)
        assert [(await q.get())["type"] for _ in range(2)] == ["state", "frame"]
        assert q.dropped_snapshots == 1

    asyncio.run(go())


def test_queue_refuses_piles_of_unread_control_messages() -> None:
    q = OutQueue(max_frames=2, max_control=3)
    for _ in range(3):
        q.push_control({"type": "error"})
    with pytest.raises(ClientTooSlow):
        q.push_control({"type": "error"})


async def _play(session: Session, delay_s: float, out: list[dict[str, Any]]) -> None:
    async def send(text: str) -> None:
        out.append(json.loads(text))
        await asyncio.sleep(delay_s)

    tasks = [asyncio.create_task(session.sender(send)), asyncio.create_task(session.ticker())]
    await session.handle_text(json.dumps({"type": "load", "spec": SPEC.model_dump(mode="json")}))
    await session.handle_text('{"type": "play", "speed": 1}')
    while not any(m["type"] == "end" for m in out):
        await asyncio.sleep(0.005)
    for t in tasks:
        t.cancel()


def test_slow_reader_loses_only_snapshots_and_does_not_slow_others() -> None:
    settings = Settings(play_seconds=0.3, tick_s=0.002, queue_frames=2)

    async def go() -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
        cache = RunCache(simulator(fake_simulate))
        slow_out: list[dict[str, Any]] = []
        fast_out: list[dict[str, Any]] = []
        slow = asyncio.create_task(_play(Session(cache, settings), 0.03, slow_out))
        await _play(Session(cache, settings), 0.0, fast_out)
        slow_done_when_fast_ended = slow.done()
        await slow
        return slow_out, fast_out, slow_done_when_fast_ended

    slow_out, fast_out, slow_done_early = asyncio.run(go())
    run = prepare(fake_simulate(SPEC))
    kernels = [e for e in run.events if e["kind"] == "kernel"]
    for out in (slow_out, fast_out):
        frames = [m for m in out if m["type"] == "frame"]
        assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
        assert [e for f in frames for e in f["events"] if e["kind"] == "kernel"] == kernels
    slow_frames = [m for m in slow_out if m["type"] == "frame"]
    assert slow_frames[-1]["dropped_snapshots"] > 0  # it lost intermediate bank/memory snapshots ...
    received = sum(e["kind"] in ("banks", "memory") for f in slow_frames for e in f["events"])
    assert received + slow_frames[-1]["dropped_snapshots"] <= sum(e["kind"] in ("banks", "memory") for e in run.events)
    last_banks = [e for f in slow_frames for e in f["events"] if e["kind"] == "banks"][-1]
    assert last_banks == [e for e in run.events if e["kind"] == "banks"][-1]  # ... never the final state
    assert [m for m in fast_out if m["type"] == "frame"][-1]["dropped_snapshots"] == 0
    assert not slow_done_early  # the fast viewer finished while the slow one was still being fed


def test_cache_shares_one_simulation_and_is_bounded() -> None:
    calls: list[int] = []

    def sim(spec: ScenarioSpec) -> Any:
        calls.append(spec.decode_steps)
        return fake_simulate(spec)

    async def go() -> RunCache:
        cache = RunCache(simulator(sim), max_runs=2)
        same = [cache.get(SPEC) for _ in range(5)]
        runs = await asyncio.gather(*same)
        assert all(r is runs[0] for r in runs)
        for n in (1, 2, 3):
            await cache.get(SPEC.with_overrides({"decode_steps": n}))
        return cache

    cache = asyncio.run(go())
    assert calls == [40, 1, 2, 3] and len(cache) == 2 and cache.simulations == 4


def test_cache_is_bounded_by_events_too() -> None:
    async def go() -> RunCache:
        cache = RunCache(simulator(fake_simulate), max_runs=8, max_events=1)
        for n in (1, 2):
            await cache.get(SPEC.with_overrides({"decode_steps": n}))
        return cache

    cache = asyncio.run(go())
    assert len(cache) == 1 and cache.num_events > 1  # only the newest run stays, however large
