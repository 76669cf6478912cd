"""vLLM's placement: no policy at all. Free blocks wait in one queue (vLLM's FreeKVCacheBlockQueue); an
allocation takes from its head and a freed block joins its tail, so placement follows the history of frees.

    start: address order (slot-major, so consecutive blocks round-robin over banks, as naive.py)
    take:  head of the queue; a cached block there is evicted from the prefix cache first
           (BlockPool.get_new_blocks -> _maybe_evict_cached_block)
    free:  tail of the queue, cached blocks no request uses included (BlockPool.free_blocks)
    hit:   an unused cached block leaves the queue wherever it is (BlockPool.touch -> free_block_queue.remove)

The queue is an AddressQueue (address_queue.py: the never-used slots as an address range, the rest an ordered
dict; vLLM's is a doubly linked list: O(1) removal from the middle). Slots taken behind
the queue's back (other tenants) are skipped when they reach the head. An allocation of several blocks (a prefill
chunk's) takes them from the pool in one vectorised call.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import numpy as np

from layerscope.runtime.kv.address_queue import AddressQueue
from layerscope.runtime.kv.allocator import KVAllocator, Migration, PageGrant, Phase
from layerscope.runtime.kv.block_pool import FREE, BlockPool


class FreeQueueAllocator(KVAllocator):
    name = "free_queue"

    def __init__(self, pool: BlockPool) -> None:
        super().__init__(pool)
        self.free_queue = AddressQueue(pool.banks, pool.pages_per_bank)  # address order: addr = slot * banks + bank
        self._reclaim: weakref.WeakMethod[Callable[[int, int], bool]] | None = None

    def queues_cached_blocks(self, reclaim: Callable[[int, int], bool]) -> bool:
        # a bound method, held weakly: the cache manager holds this allocator, and a strong reference back makes them a
        # cycle only the cyclic collector frees (~0.2 s of a 500-request run spent traversing its blocks)
        self._reclaim = weakref.WeakMethod(reclaim)
        return True

    def _pop(self) -> tuple[int, int] | None:
        """The queue's head, made free: a cached block there is evicted; another tenant's slot is skipped."""
        q, owners = self.free_queue, self.pool.owner
        while (where := q.popleft()) is not None:
            if owners.item(where) == FREE:
                return where
            reclaim = self._reclaim() if self._reclaim is not None else None  # only for a slot still held
            if reclaim is not None and reclaim(*where):
                return where
        return None

    def _place(self, owner: str, logical: int, phase: Phase) -> tuple[int, int, list[Migration]] | None:
        where = self._pop()
        return None if where is None else (where[0], where[1], [])

    def allocate(self, owner: str, n: int, phase: Phase) -> PageGrant | None:
        if self.hints.get(owner) or n < 1:
            return super().allocate(owner, n, phase)
        if n == 1:  # a decode's next block, most allocations of a serving run: the base loop without its bookkeeping
            where = self.take_one(owner, phase)
            if where is None:
                return None
            return PageGrant(logical=[len(self.tables[owner]) - 1], banks=[where[0]], slots=[where[1]])
        taken: list[tuple[int, int]] = []
        while len(taken) < n and (where := self._pop()) is not None:
            taken.append(where)
        if len(taken) < n:  # nothing changes: the blocks go back to the head of the queue, in order
            for where in reversed(taken):
                self.free_queue.push_front(where)
            return None
        banks, slots = [b for b, _ in taken], [s for _, s in taken]
        table = self.table(owner)
        first = len(table)
        logical = list(range(first, first + n))
        self.pool.take_many(owner, np.asarray(banks), np.asarray(slots), np.asarray(logical))
        table += taken
        return PageGrant(logical=logical, banks=banks, slots=slots)

    def take_one(self, owner: str, phase: Phase) -> tuple[int, int] | None:
        if self.hints.get(owner):
            return super().take_one(owner, phase)
        table = self.tables.setdefault(owner, [])  # self.table(owner), without the call
        where = self._pop()
        if where is None:
            return None
        self.pool.take_free(owner, where[0], where[1], len(table))
        table.append(where)
        return where

    def released(self, bank: int, slot: int) -> None:
        self.free_queue.push((bank, slot))  # the tail (a slot leaves the queue whenever it is taken)

    def cached_idle(self, bank: int, slot: int) -> None:
        self.free_queue.push((bank, slot))

    def idle_many(self, wheres: list[tuple[int, int]], cached: list[bool]) -> None:
        self.free_queue.push_many(wheres)  # each at the tail, in order, cached or not (vLLM's one queue)

    def touched(self, bank: int, slot: int) -> None:
        self.free_queue.remove((bank, slot))
