"""Partial eviction under memory pressure: damaged map entries, the validation pass that finds them, the repair."""

from typing import Any

import numpy as np
import pytest

from layerscope.events import event_json
from layerscope.model.config import PRESETS
from layerscope.runtime.engine import simulate
from layerscope.runtime.kv.allocator import EVICTED
from layerscope.runtime.kv.manager import SEQ, KVManager
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.request_run import RequestInstance
from layerscope.scenario import ScenarioSpec

ARTICLE = dict(model="article", runtime="article", gpu="h100-sxm", prompt_len=8192, free_hbm_gib=16)
PRESSURE = {"do": "pressure", "at_chunk": 1, "amount_gib": 9.5}  # reaches 4 pages into chunk 1 (16..19)


def _spec(numerics: bool = False, steps: int = 16, actions: list | None = None) -> ScenarioSpec:
    acts = [PRESSURE, {"do": "release", "at_step": 4, "amount_gib": 9.5}, {"do": "validate", "at_step": 10}]
    return ScenarioSpec(**ARTICLE, decode_steps=steps, numerics=numerics, numerics_model="tiny",
                        actions=acts if actions is None else actions)


def _damaged_from_events(events: list) -> tuple[set[int], set[int]]:
    """(pages, banks) evicted while chunk 1 was in flight, from the page_evict and chunk events alone."""
    [chunk1] = [e for e in events if e.kind == "chunk" and e.chunk == 1]
    first = next(e for e in events if e.kind == "page_evict")
    hit = [(p, b) for p, b in zip(first.logical, first.banks, strict=True) if p in chunk1.pages]
    return {p for p, _ in hit}, {b for _, b in hit}


def _prefilled(spec: ScenarioSpec) -> tuple[RequestInstance, list[Any]]:
    """An instance that has run its prompt's chunks and nothing after (the loop would go on to decode)."""
    events: list[Any] = []
    engine = RequestInstance(spec, Recorder(events))
    engine.start()
    while engine.request.num_computed_tokens < spec.prompt_len:
        engine.step(engine.state.t)
    return engine, events


def test_partial_eviction_leaves_stale_entries_that_validation_finds_and_repairs() -> None:
    engine, events = _prefilled(_spec())
    pages, banks = _damaged_from_events(events)
    assert pages and len(pages) < engine.stats.evictions  # some of the eviction was clean, some partial
    alloc = engine.kv.allocator
    assert set(alloc.damaged(SEQ)) == pages
    for p in pages:  # the map still points there; the pool gave the slot to the other tenant
        b, s = alloc.table(SEQ)[p]
        assert b != EVICTED and alloc.pool.owner_name(int(alloc.pool.owner[b, s])) == "pressure"
    with pytest.raises(AssertionError):
        alloc.check()
    got, want = engine.kv.metadata_crc(engine.pages.decode_map())
    assert {b for b, (g, w) in enumerate(zip(got, want, strict=True)) if g != w} == banks
    engine.hooks.validate()
    [crc] = [e for e in events if e.kind == "crc"]
    assert set(crc.bad_banks) == banks
    actions = [(e.action, set(e.banks)) for e in events if e.kind == "fault" and e.fault == "partial_eviction"]
    assert actions == [("injected", banks), ("detected", banks), ("recovered", banks)]
    assert alloc.damaged(SEQ) == []
    alloc.check()
    got, want = engine.kv.metadata_crc(engine.pages.decode_map())
    assert got == want


def test_the_preset_shape_spikes_then_validation_names_exactly_the_damaged_banks() -> None:
    r = simulate(_spec(numerics=True))
    pages, banks = _damaged_from_events(r.events)
    crc = [e for e in r.events if e.kind == "crc"]
    assert [(e.source, set(e.bad_banks)) for e in crc[:2]] == [("metadata", banks), ("numpy", banks)]
    assert all(not e.bad_banks for e in crc[2:])  # the end-of-run pass: repaired
    s = r.summary
    assert s["partial_evictions"] == s["repaired_pages"] == len(pages) and s["crc_bad_banks"] == len(banks)
    steps = [e for e in r.events if e.kind == "decode_step"]
    assert steps[0].refetched_pages > 0 and steps[5].refetched_pages == 0  # clean evictions: re-fetch until release
    assert steps[10].refetched_pages == len(pages)  # the repair re-fetches the damaged pages: one more spike
    assert steps[10].model_latency_us > 2 * steps[9].model_latency_us
    errors = {e.step: e.rel_error for e in r.events if e.kind == "numerics" and e.step is not None}
    assert errors[9] > 0.01  # wrong reads through the damaged entries, with no other sign
    assert all(errors[i] == 0.0 for i in range(10, 16))  # the recovered map reads the right K/V


def test_numpy_crc_names_the_banks_of_the_overwritten_scaled_slots() -> None:
    engine, _ = _prefilled(_spec(numerics=True))
    shadow = engine.shadow
    assert shadow is not None
    scaled = engine.hooks.scaled_pages(sorted(engine.kv.allocator.damaged(SEQ)))
    faulty, clean = shadow.bank_crcs()
    bad = {b for b, (f, c) in enumerate(zip(faulty, clean, strict=True)) if f != c}
    assert scaled and bad == {shadow.cache_faulty.block_table[p][0] for p in scaled}
    engine.hooks.validate()
    k, v = shadow.cache_faulty.gather()
    k0, v0 = shadow.cache_clean.gather()
    assert np.array_equal(k, k0) and np.array_equal(v, v0)


@pytest.mark.parametrize("actions", [[], [{"do": "pressure", "at_step": 2, "amount_gib": 9.5},
                                          {"do": "release", "at_step": 6, "amount_gib": 9.5}]])
def test_without_in_flight_pressure_no_bank_is_damaged(actions: list) -> None:
    r = simulate(_spec(numerics=True, steps=8, actions=actions + [{"do": "validate", "at_step": 7}]))
    assert r.summary["partial_evictions"] == 0 and r.summary["crc_bad_banks"] == 0
    assert all(not e.bad_banks for e in r.events if e.kind == "crc")
    assert not [e for e in r.events if e.kind == "fault"]
    assert (r.summary["evictions"] > 0) == bool(actions)  # decode-time pressure still evicts, cleanly


def test_metadata_crc_flags_a_slot_the_map_claims_twice() -> None:
    kv = KVManager(PRESETS["article"], 256, 4, "bank_aware", 16 * 1024**3, 0.0)
    kv.allocator.allocate(SEQ, 4, "prefill")
    kv.record_writes(range(4))
    table = kv.allocator.table(SEQ)
    got, want = kv.metadata_crc(table)
    assert got == want
    twice = list(table)
    twice[1] = table[3]  # page 1's entry points at page 3's slot, which really holds page 3
    got, want = kv.metadata_crc(twice)
    assert [b for b in range(4) if got[b] != want[b]] == [table[3][0]]


def test_partial_eviction_runs_are_byte_identical() -> None:
    spec = _spec(numerics=True)
    assert [event_json(e) for e in simulate(spec).events] == [event_json(e) for e in simulate(spec).events]


def test_a_chunk_continuing_a_page_over_a_lost_slot_leaves_a_mismatch() -> None:
    kv = KVManager(PRESETS["article"], 256, 4, "bank_aware", 16 * 1024**3, 0.0)
    kv.allocator.allocate(SEQ, 2, "prefill")
    kv.record_writes(range(2))
    b, s = kv.allocator.table(SEQ)[1]
    kv.foreign([b], [s])  # page 1's slot went to another tenant, the map still points there
    kv.record_writes([1], continues=True)  # the next chunk appends page 1's remaining tokens there
    got, want = kv.metadata_crc(kv.allocator.table(SEQ))
    assert [x for x in range(4) if got[x] != want[x]] == [b]
    kv.record_writes([0], continues=True)  # a page continued in its own slot stays clean
    got, want = kv.metadata_crc(kv.allocator.table(SEQ))
    assert [x for x in range(4) if got[x] != want[x]] == [b]
