"""Prepared runs: frames carry slim kernel records pointing at the overview, while exports stay complete."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from typing import Any

from fakesim import fake_simulate, full_kernels, rows
from fastapi.testclient import TestClient

from layerscope.commands.serve import simulator
from layerscope.events import KernelEvent
from layerscope.export.events import to_jsonl
from layerscope.protocol import StreamedKernel
from layerscope.scenario import ScenarioSpec
from layerscope.schemas import all_schemas
from layerscope.server.runs import STREAMED_KERNEL_FIELDS, RunCache, event_dict, prepare

SPEC = ScenarioSpec(prompt_len=8192, chunk_size=1024, decode_steps=40)


def test_streamed_kernels_are_slim_and_name_their_full_record() -> None:
    result = fake_simulate(SPEC)
    before = to_jsonl(result)
    run = prepare(result)
    full = [e for e in result.events if e.kind == "kernel"]
    slim = [e for e in run.events if e["kind"] == "kernel"]
    assert len(slim) == len(full) > 0
    assert all(StreamedKernel.model_validate(k).model_dump() == k for k in slim)  # the documented shape, no more
    assert "row" in all_schemas()["messages"]["streamed_kernel"]["properties"]
    table = rows(run.overview["runs"][0]["tables"]["kernel"])
    for k in slim:
        whole = full[k["row"]]
        want = whole.model_dump(mode="json", include=STREAMED_KERNEL_FIELDS)
        assert {f: k[f] for f in STREAMED_KERNEL_FIELDS} == want
        assert table[k["row"]]["name"] == whole.name and table[k["row"]]["start_us"] == k["t_us"]
    slim_bytes = sum(len(k.text) for k in slim)
    assert slim_bytes * 2 < sum(len(event_dict(e).text) for e in full)  # the point: far fewer bytes per frame
    assert to_jsonl(result) == before  # preparing for playback leaves the run's own events alone


def test_frames_are_slim_but_the_events_export_is_complete(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": "two-chunks"})
        while (loaded := ws.receive_json())["type"] != "loaded":
            pass
        ws.send_json({"type": "play", "speed": 1e6})
        streamed: list[dict[str, Any]] = []
        while (m := ws.receive_json())["type"] != "end":
            if m["type"] == "frame":
                streamed += [e for e in m["events"] if e["kind"] == "kernel"]
    r = client.post("/api/events", json={"scenario": "two-chunks"})
    assert r.status_code == 200
    exported = [json.loads(line) for line in r.text.splitlines()]
    kernels = [e for e in exported if e["kind"] == "kernel"]
    assert [sorted(e) for e in kernels] == [sorted(KernelEvent.model_fields)] * len(kernels)  # every field
    assert len(streamed) == len(kernels) and all(len(k) == len(STREAMED_KERNEL_FIELDS) + 1 for k in streamed)
    # a streamed kernel with its overview row is the exported kernel (the overview rounds flops, bytes, ... to 6
    # significant digits, so compare the fields it keeps exact and the names)
    for got, want in zip(full_kernels(loaded, streamed), kernels, strict=True):
        assert {f: got[f] for f in ("t_us", "name", "stage", "phase", "start_us", "dur_us", "shapes")} == {
            f: want[f] for f in ("t_us", "name", "stage", "phase", "start_us", "dur_us", "shapes")
        }


def test_cached_runs_stay_out_of_the_collectors_passes_until_dropped() -> None:
    """A full collector pass over a big run stalls every viewer's frames; a dropped run's cycles are still freed."""
    dropped: list[weakref.ref[Any]] = []

    def sim(spec: ScenarioSpec) -> Any:
        result = fake_simulate(spec)
        result.cycle = result  # type: ignore[attr-defined]  # only the cyclic collector can free this one
        dropped.append(weakref.ref(result))
        return result

    async def go() -> Any:
        cache = RunCache(simulator(sim), max_runs=1)
        first = await cache.get(SPEC)
        await first.finished()  # its streamed events are made after the first screen
        tracked = {id(o) for o in gc.get_objects()}  # generations 0-2: what a collector pass traverses
        assert id(first.events[0]) not in tracked and id(first.overview) not in tracked
        del first
        return await cache.get(SPEC.with_overrides({"decode_steps": 3}))  # evicts the first run

    try:
        second = asyncio.run(go())
        assert dropped[0]() is None  # the evicted run's cycle was collected
        assert dropped[1]() is second.result and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # leave the test process as it was


def test_a_viewer_leaving_a_cached_preset_starts_no_full_collection(monkeypatch: Any) -> None:
    """A full collector pass over every cached run held the event loop for 1-3 s with the library cached, so each
    page opened after a viewer left a preset waited behind it: only a run that leaves the cache is collected for."""
    from layerscope.server import runs as runs_mod

    passes: list[bool] = []
    monkeypatch.setattr(runs_mod, "settle_heap", lambda collect: passes.append(collect))
    monkeypatch.setattr(runs_mod, "TRIM_DELAY_S", 0.01)
    monkeypatch.setattr(runs_mod, "release_freed_memory", lambda: None)

    async def leave(cache: RunCache, spec: ScenarioSpec, preset: bool) -> None:
        run = await cache.get(spec, preset=preset)
        await run.finished()
        cache.hold(run)
        passes.clear()
        cache.release(run)
        await asyncio.sleep(0.05)  # past the trim's delay

    async def go() -> list[list[bool]]:
        cache = RunCache(simulator(fake_simulate), max_runs=4)
        await leave(cache, SPEC, preset=True)
        kept = list(passes)
        await leave(cache, SPEC.with_overrides({"decode_steps": 3}), preset=False)
        assert len(cache) == 1  # the custom run left, the preset stayed
        return [kept, list(passes)]

    kept, dropped = asyncio.run(go())
    assert True not in kept  # the preset stays cached: nothing collected
    assert dropped == [True]  # the custom run left the cache: one collection for it


def test_loaded_is_encoded_in_short_pieces_to_the_same_text(monkeypatch: Any) -> None:
    """One json.dumps of a heavy run's `loaded` held the interpreter's lock for up to a second: it is made of
    pieces of at most LIST_PIECE list items (the event loop runs between them), and the text is the same."""
    from layerscope.server import runs as runs_mod

    value = {"a": [[i, f"k{i}", i / 7] for i in range(5003)], "b": [{"x": [1.5] * 3, "y": None}, {"z": "é\n"}],
             "c": {"1": {"deep": list(range(4001))}}, "d": {1: "int key"}, "e": float("nan"), "f": []}
    assert runs_mod.dumps_in_pieces(value) == runs_mod.compact_dumps(value)
    assert json.loads(runs_mod.dumps_in_pieces(value)) == json.loads(json.dumps(value))  # json.dumps' values
    run = prepare(fake_simulate(SPEC))
    assert run.loaded.text == runs_mod.compact_dumps(dict(run.loaded))
    assert json.loads(run.loaded.text) == json.loads(json.dumps(dict(run.loaded)))

    biggest: list[int] = []
    real = runs_mod.compact_dumps
    monkeypatch.setattr(runs_mod, "compact_dumps", lambda v: biggest.append(len(v) if isinstance(v, list) else 0)
                        or real(v))
    runs_mod.dumps_in_pieces(value)
    assert max(biggest) == runs_mod.LIST_PIECE  # never one dumps of a whole 5003-item list
