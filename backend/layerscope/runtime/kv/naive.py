"""Naive placement: the first free page anywhere, in address order, for prefill and decode alike.

In an empty pool address order interleaves banks, so this matches bank-aware prefill; in a shared,
fragmented pool pages land in whatever holes come first and the block-table walk breaks its stride.
"""

from __future__ import annotations

from layerscope.runtime.kv.allocator import KVAllocator, Migration, Phase


class NaiveAllocator(KVAllocator):
    name = "naive"

    def _place(self, owner: str, logical: int, phase: Phase) -> tuple[int, int, list[Migration]] | None:
        where = self.pool.first_free_any()
        return None if where is None else (where[0], where[1], [])
