"""The scenario's actions on the pool of the one-request loop: another tenant's pressure and its release,
compaction. (The `validate` action is the engine's validation pass.)

    due(actions, chunk | step)   which actions strike now: at a chunk, `pressure` strikes while the chunk is in
                                 flight (after its KV write, before its barrier), the others at its start
    pressure(gib)                another tenant takes gib of HBM: the free pages (shortfall() tells the engine
                                 how many of the sequence's pages to evict first)
    release(gib)                 the tenants' pages (pressure first, then the fragmentation tenant) go back
    compact(room)                the bank with the most free pages is compacted (room: pages a waiting
                                 decode_page_hint reservation needs there)

Each emits its page events and returns plain data; the engine evicts, snapshots and bumps its version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from layerscope.events import PageAllocEvent, PageFreeEvent
from layerscope.runtime.chunks import GIB
from layerscope.runtime.kv.allocator import Migration
from layerscope.runtime.kv.manager import KVManager
from layerscope.scenario import ActionSpec

PRESSURE = "pressure"


def due(actions: list[ActionSpec], chunk: int | None = None, step: int | None = None,
        pressure: bool | None = None) -> list[ActionSpec]:
    return [a for a in actions
            if (chunk is not None and a.at_chunk == chunk and a.at_step is None
                and (pressure is None or (a.do == PRESSURE) == pressure))
            or (step is not None and a.at_step == step)]


class PoolActions:
    def __init__(self, kv: KVManager, emit: Callable[[Any], None]) -> None:
        self.kv = kv
        self.emit = emit

    def pages(self, gib: float) -> int:
        return int(-(-gib * GIB // self.kv.page_bytes))

    def shortfall(self, gib: float) -> int:
        """Pages the tenant wants beyond the free ones: the sequence's pages to evict first."""
        return max(0, self.pages(gib) - self.kv.pool.num_free)

    def pressure(self, gib: float, t: float, in_decode: bool) -> tuple[list[int], list[int]]:
        pool = self.kv.pool
        taken_b: list[int] = []
        taken_s: list[int] = []
        for _ in range(min(self.pages(gib), pool.num_free)):
            where = pool.first_free_any()
            assert where is not None, "free count and free slots disagree"
            pool.take(PRESSURE, where[0], where[1], len(taken_b))
            taken_b.append(where[0])
            taken_s.append(where[1])
        self.kv.foreign(taken_b, taken_s)
        self.emit(PageAllocEvent(t_us=t, owner=PRESSURE, phase="decode" if in_decode else "prefill",
                                 logical=list(range(len(taken_b))), banks=taken_b, slots=taken_s))
        return taken_b, taken_s

    def release(self, gib: float, t: float) -> tuple[list[int], list[int]]:
        pool = self.kv.pool
        want = self.pages(gib)
        freed_b: list[int] = []
        freed_s: list[int] = []
        for owner in (PRESSURE, "tenant"):
            oid = pool.owner_id(owner)
            for b, s in zip(*np.nonzero(pool.owner == oid), strict=True):
                if len(freed_b) == want:
                    break
                pool.release(int(b), int(s))
                freed_b.append(int(b))
                freed_s.append(int(s))
        self.emit(PageFreeEvent(t_us=t, owner=PRESSURE, banks=freed_b, slots=freed_s))
        return freed_b, freed_s

    def compact(self, room: int) -> list[Migration]:
        """Compacts the bank with the most free pages (lowest index on ties); the migrations, not yet emitted."""
        pool = self.kv.pool
        order = sorted(range(pool.banks), key=lambda b: (-int(pool.num_free_per_bank[b]), b))
        return self.kv.allocator.compact(order[0], room)
