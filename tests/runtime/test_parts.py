"""The one-request loop's parts, each alone: eviction and re-fetch, partial eviction, pool actions, the page hint."""

from typing import Any

import pytest

from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import gpu
from layerscope.model.config import PRESETS
from layerscope.runtime import actions
from layerscope.runtime.actions import PoolActions
from layerscope.runtime.chunks import GIB
from layerscope.runtime.kv.allocator import EVICTED
from layerscope.runtime.kv.eviction import Eviction
from layerscope.runtime.kv.hint import PageHint
from layerscope.runtime.kv.manager import FOREIGN, NEVER_WRITTEN, SEQ, KVManager
from layerscope.runtime.partial_eviction import PartialEviction
from layerscope.runtime.timing import COPY, Timing
from layerscope.scenario import ActionSpec

MODEL = PRESETS["article"]


def _kv(pages_gib: float = 2.0, banks: int = 4) -> KVManager:
    return KVManager(MODEL, 256, banks, "bank_aware", pages_gib * GIB, 0.0)


def _eviction(kv: KVManager, events: list[Any]) -> Eviction:
    return Eviction(kv, Timing(CostModel(gpu("h100-sxm")), events.append), events.append, 0.01, 1)


def test_evict_takes_the_oldest_pages_and_refetch_restores_them_over_the_host_link() -> None:
    kv, events = _kv(), []
    kv.allocator.allocate(SEQ, 6, "prefill")
    kv.record_writes(range(6))
    ev = _eviction(kv, events)
    out = ev.evict(2, t=5.0)
    assert [p for p, _, _ in out] == [0, 1]
    assert all(kv.allocator.table(SEQ)[p][0] == EVICTED for p in (0, 1))
    assert all(kv.content[b, s] == NEVER_WRITTEN for _, b, s in out)
    assert [e.kind for e in events] == ["page_evict"] and events[0].logical == [0, 1]
    r = ev.refetch(t=10.0, step=3)
    assert r.pages == 2 and r.time_us > 0 and [p for p, _, _ in r.restored] == [0, 1]
    kernel = next(e for e in events if e.kind == "kernel")
    assert kernel.stream == COPY and kernel.step == 3 and kernel.bytes == 2 * kv.page_bytes
    assert [kv.content[b, s] for _, b, s in r.restored] == [0, 1]
    assert ev.refetch(t=20.0, step=4).pages == 0, "nothing left in host memory"


def test_a_slower_host_link_makes_the_refetch_slower() -> None:
    times = []
    for scale in (0.02, 0.01):
        kv, events = _kv(), []
        kv.allocator.allocate(SEQ, 4, "prefill")
        ev = Eviction(kv, Timing(CostModel(gpu("h100-sxm")), events.append), events.append, scale, 1)
        ev.evict(4, 0.0)
        times.append(ev.refetch(0.0, 0).time_us)
    assert times[1] > times[0]


def test_only_pages_of_the_chunk_in_flight_are_lost_and_the_barrier_republishes_them() -> None:
    kv, events = _kv(), []
    kv.allocator.allocate(SEQ, 8, "prefill")
    slots = list(kv.allocator.table(SEQ))
    partial = PartialEviction(kv, events.append)
    partial.in_flight(range(4, 8))
    evicted = _eviction(kv, []).evict(6, 0.0)  # pages 0..5: 4 and 5 are in flight
    partial.evicted(evicted)
    lost = partial.barrier()
    assert [p for p, _, _ in lost] == [4, 5]
    assert kv.allocator.table(SEQ)[4] == slots[4], "the barrier wrote the old entry back"
    assert kv.allocator.table(SEQ)[0][0] == EVICTED, "a finished chunk's page is evicted cleanly"
    assert partial.barrier() == [], "a barrier with nothing in flight loses nothing"


def test_damaged_entries_are_found_reported_and_invalidated() -> None:
    kv, events = _kv(), []
    kv.allocator.allocate(SEQ, 4, "prefill")
    partial = PartialEviction(kv, events.append)
    partial.in_flight(range(4))
    partial.evicted(_eviction(kv, []).evict(1, 0.0))
    [(p, b, s)] = partial.barrier()
    kv.pool.take("pressure", b, s, 0)  # the other tenant writes the slot
    assert partial.damaged([]) == [], "no failing bank: nothing to look at"
    assert partial.damaged(None) == [p] == partial.damaged([b])
    banks = partial.detected([p], t=1.0)
    partial.repair([p])
    partial.recovered([p], banks, t=2.0)
    assert kv.allocator.table(SEQ)[p][0] == EVICTED
    assert [(e.action, e.banks) for e in events] == [("detected", [b]), ("recovered", [b])]


def test_actions_due_at_a_chunk_split_pressure_from_the_rest() -> None:
    acts = [ActionSpec(do="pressure", at_chunk=1, amount_gib=1.0), ActionSpec(do="compact", at_chunk=1),
            ActionSpec(do="release", at_step=2, amount_gib=1.0)]
    assert [a.do for a in actions.due(acts, chunk=1, pressure=True)] == ["pressure"]
    assert [a.do for a in actions.due(acts, chunk=1, pressure=False)] == ["compact"]
    assert [a.do for a in actions.due(acts, step=2)] == ["release"]
    assert actions.due(acts, chunk=0) == [] == actions.due(acts, step=1)


def test_pressure_takes_free_pages_for_the_tenant_and_release_gives_them_back() -> None:
    kv, events = _kv(), []
    pa = PoolActions(kv, events.append)
    free = kv.pool.num_free
    gib = 3 * kv.page_bytes / GIB
    assert pa.shortfall(gib) == 0 and pa.shortfall(free * kv.page_bytes / GIB + gib) == 3
    b, s = pa.pressure(gib, t=1.0, in_decode=False)
    assert len(b) == 3 and kv.pool.num_free == free - 3
    assert all(kv.content[bb, ss] == FOREIGN for bb, ss in zip(b, s, strict=True))
    fb, _ = pa.release(gib, t=2.0)
    assert len(fb) == 3 and kv.pool.num_free == free
    assert [e.kind for e in events] == ["page_alloc", "page_free"] and events[0].owner == "pressure"


def test_compact_moves_pages_of_the_bank_with_most_free_slots() -> None:
    kv = _kv(banks=2)
    kv.allocator.allocate(SEQ, 6, "prefill")
    kv.allocator.evict(SEQ, 2)  # holes low in the banks
    most = max(range(2), key=lambda b: (int(kv.pool.num_free_per_bank[b]), -b))
    migrations = PoolActions(kv, lambda e: None).compact(0)
    assert migrations and all(m.from_bank == most == m.to_bank for m in migrations)
    assert kv.pool.largest_free_run(most) == int(kv.pool.num_free_per_bank[most])


@pytest.mark.parametrize(("prompt", "steps", "size"), [(1024, 512, 2), (1000, 24, 0), (1000, 40, 1), (1024, 0, 0)])
def test_the_hint_reserves_the_pages_decode_will_append(prompt: int, steps: int, size: int) -> None:
    kv = _kv()
    hint = PageHint(kv, prompt, steps, 256)
    assert hint.size == size
    got = hint.reserve()
    assert got is not None and len(got) == size and not hint.pending
    assert len({b for b, _ in got}) <= 1, "one bank"


def test_a_hint_without_room_waits_for_a_compaction() -> None:
    kv = _kv()
    hint = PageHint(kv, 256, 256 * (kv.pool.pages_per_bank + 1), 256)
    assert hint.reserve() is None and hint.pending
    assert hint.room() == kv.pool.pages_per_bank
