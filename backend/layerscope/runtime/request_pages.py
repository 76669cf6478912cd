"""A one-request run's pages: allocation (evicting, then spilling to host memory, when the pool is full), page
migrations, eviction and re-fetch, the address map decode reads through and its walk, and memory snapshots."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from layerscope.events import AllocFailEvent, BanksEvent, PageAllocEvent, PageMigrateEvent
from layerscope.hardware.kernel import KernelCost
from layerscope.runtime.kv.allocator import EVICTED, Migration
from layerscope.runtime.kv.eviction import Eviction, Page
from layerscope.runtime.kv.manager import SEQ, KVManager
from layerscope.runtime.kv.walk import cross_bank_reads
from layerscope.runtime.partial_eviction import PartialEviction
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.request_state import RequestState
from layerscope.runtime.timing import Timing

Hbm = Callable[[float], tuple[float, float]]  # Instance.hbm: (total, used) with this much workspace


class RequestPages:
    def __init__(self, state: RequestState, kv: KVManager, timing: Timing, recorder: Recorder, eviction: Eviction,
                 partial: PartialEviction, migration_cost: Callable[[], KernelCost], hbm: Hbm, banks: int) -> None:
        self.state, self.kv, self.timing, self.recorder = state, kv, timing, recorder
        self.emit: Callable[[Any], None] = recorder.emit
        self.eviction, self.partial = eviction, partial
        self.migration_cost, self.hbm, self.num_banks = migration_cost, hbm, banks
        self._walk_cache: tuple[int, int, list[tuple[int, int]]] | None = None  # (version, breaks, table walked)
        self._run_cache: tuple[int, int] = (-1, 0)  # (version, largest free run)

    def allocate(self, n: int, phase: str) -> list[Migration]:
        if n <= 0:
            return []
        alloc = self.kv.allocator
        grant = alloc.allocate(SEQ, n, phase)  # type: ignore[arg-type]
        if grant is None:
            self.alloc_fail(SEQ, n, False, "the pool has no free page: evicting the oldest pages")
            self.evict(n - self.kv.pool.num_free)
            grant = alloc.allocate(SEQ, n, phase)  # type: ignore[arg-type]
            if grant is None and n > self.kv.pool.num_pages:
                raise ValueError(f"the KV pool ({self.kv.pool.num_pages} pages) cannot hold {n} more pages "
                                 f"even when empty: raise free_hbm_gib or page_size, or lower chunk_size")
            if grant is None:  # others hold the pool: the new pages live in host memory, re-fetched every step
                logical = alloc.spill(SEQ, n)
                self.alloc_fail(SEQ, n, False, f"nothing left to evict: pages {logical} spill to host memory")
                return []
        self.state.version += 1
        for m in grant.migrations:
            self.migrate(m)
        self.emit(PageAllocEvent(t_us=self.state.t, owner=SEQ, phase=phase, logical=grant.logical,
                                 banks=grant.banks, slots=grant.slots))
        return grant.migrations

    def alloc_fail(self, owner: str, n: int, contiguous: bool, reason: str) -> None:
        self.state.stats.alloc_failures += 1
        pool = self.kv.pool
        self.emit(AllocFailEvent(t_us=self.state.t, owner=owner, pages_wanted=n, contiguous=contiguous,
                                 free_pages=pool.num_free, largest_free_run=pool.largest_free_run(),
                                 reason=f"{reason} ({pool.num_free} pages free)"))

    def migrate(self, m: Migration) -> None:
        c = self.migration_cost()
        start = self.timing.copy(c, self.state.t, "decode" if m.reason == "make_room" else "idle")
        self.kv.moved(m.from_bank, m.from_slot, m.to_bank, m.to_slot)
        stats = self.state.stats
        stats.migrations += 1
        stats.migrated_bytes += 2 * self.kv.page_bytes
        self.emit(PageMigrateEvent(t_us=start, owner=m.owner, logical=m.logical, from_bank=m.from_bank,
                                   from_slot=m.from_slot, to_bank=m.to_bank, to_slot=m.to_slot,
                                   bytes=2 * self.kv.page_bytes, dur_us=c.time_us, reason=m.reason))

    def evict(self, n: int) -> list[Page]:
        out = self.eviction.evict(n, self.state.t)
        if out:
            self.partial.evicted(out)
            self.state.version += 1
            self.state.stats.evictions += len(out)
        return out

    def refetch(self, step: int | None) -> tuple[int, float]:
        r = self.eviction.refetch(self.state.t, step)
        if r.restored:
            self.state.version += 1
        self.state.stats.refetched_pages += r.pages
        return r.pages, r.time_us

    def decode_map(self) -> list[tuple[int, int]]:
        """The address map decode reads through: the block table, with stale entries if that fault struck."""
        table = list(self.kv.allocator.table(SEQ))
        for p, src in self.state.stale.items():
            if p < len(table) and src < len(table) and table[src][0] != EVICTED:
                table[p] = table[src]
        return table

    def breaks(self) -> int:
        """Cross-bank reads along the address map (the walk so far is reused while the table only grows)."""
        cached, stale = self._walk_cache, self.state.stale
        if cached is not None and cached[0] == self.state.version:
            return cached[1]
        table = self.decode_map() if stale else self.kv.allocator.table(SEQ)
        walked = cached[2] if cached is not None and not stale else None
        if walked is not None and len(table) > len(walked) and table[: len(walked)] == walked:
            # the table only grew at its end (a decode's new page): the walk so far, then on through the new pages
            last = next((p for p in reversed(walked) if p[0] >= 0), None)
            tail = ([last] if last is not None else []) + table[len(walked) :]
            breaks = cached[1] + walk_breaks(tail, self.num_banks)  # type: ignore[index]
        else:
            breaks = walk_breaks(table, self.num_banks)
        self._walk_cache = (self.state.version, breaks, list(table))
        return breaks

    def snapshot(self, activation: float, banks: bool, at: float | None = None) -> None:
        t = self.state.t if at is None else at
        kv, pool = self.kv, self.kv.pool
        total, used = self.hbm(activation)
        if banks or self._run_cache[0] != self.state.version:
            self._run_cache = (self.state.version, pool.largest_free_run())
        self.recorder.memory(t, total, used, kv.owned_pages(SEQ) * kv.page_bytes, self._run_cache[1] * kv.page_bytes,
                             activation)
        if banks:
            hints = kv.allocator.hints.get(SEQ, [])
            reserved = np.bincount(np.array([b for b, _ in hints], dtype=np.int64), minlength=pool.banks)
            self.emit(BanksEvent(t_us=t, used=pool.used_per_bank(), capacity=pool.pages_per_bank,
                                 reserved=reserved.tolist() if hints else []))


def walk_breaks(table: list[tuple[int, int]], num_banks: int) -> int:
    """cross_bank_reads along a block table of (bank, slot) pairs."""
    flat = np.fromiter(itertools.chain.from_iterable(table), dtype=np.int64, count=2 * len(table))
    return cross_bank_reads(flat[0::2], flat[1::2], num_banks)
