"""vLLM's placement: no policy at all. Free blocks wait in one queue (vLLM's FreeKVCacheBlockQueue); an
allocation takes from its head and a freed block joins its tail, so placement follows the history of frees.

    start: address order (slot-major, so consecutive blocks round-robin over banks, as naive.py)
    take:  head of the queue           free: tail of the queue

Slots taken behind the queue's back (other tenants) are skipped when they reach the head. An allocation of
several blocks (a prefill chunk's) takes them from the pool in one vectorised call.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from layerscope.runtime.kv.allocator import KVAllocator, Migration, PageGrant, Phase
from layerscope.runtime.kv.block_pool import BlockPool


class FreeQueueAllocator(KVAllocator):
    name = "free_queue"

    def __init__(self, pool: BlockPool) -> None:
        super().__init__(pool)
        self.free_queue: deque[tuple[int, int]] = deque(
            (a % pool.banks, a // pool.banks) for a in range(pool.num_pages)
        )

    def _place(self, owner: str, logical: int, phase: Phase) -> tuple[int, int, list[Migration]] | None:
        q, owners = self.free_queue, self.pool.owner
        while q:
            bank, slot = q.popleft()
            if owners[bank, slot] == -1:
                return bank, slot, []
        return None

    def allocate(self, owner: str, n: int, phase: Phase) -> PageGrant | None:
        if self.hints.get(owner) or n < 1:
            return super().allocate(owner, n, phase)
        q, owners = self.free_queue, self.pool.owner
        if n == 1:  # a decode's next block, most allocations of a serving run: the base loop without its bookkeeping
            table = self.table(owner)
            placed = self._place(owner, len(table), phase)
            if placed is None:
                return None
            bank, slot, _ = placed
            self.pool.take(owner, bank, slot, len(table))
            table.append((bank, slot))
            return PageGrant(logical=[len(table) - 1], banks=[bank], slots=[slot])
        banks: list[int] = []
        slots: list[int] = []
        while q and len(banks) < n:
            bank, slot = q.popleft()
            if owners[bank, slot] == -1:
                banks.append(bank)
                slots.append(slot)
        if len(banks) < n:  # nothing changes: the blocks go back to the head of the queue, in order
            q.extendleft(reversed(list(zip(banks, slots, strict=True))))
            return None
        table = self.table(owner)
        first = len(table)
        logical = list(range(first, first + n))
        self.pool.take_many(owner, np.asarray(banks), np.asarray(slots), np.asarray(logical))
        table += zip(banks, slots, strict=True)
        return PageGrant(logical=logical, banks=banks, slots=slots)

    def released(self, bank: int, slot: int) -> None:
        self.free_queue.append((bank, slot))
