"""Paged KV cache of one decoder layer: K/V stored in fixed-size pages spread over memory banks.

Layout (one array each for K and V)::

    k[bank, slot, token_in_page, kv_head, head_dim]      shape (banks, pages_per_bank, page_size, n_kv, head_dim)

    block_table[logical_page] = (bank, slot)             logical page p holds tokens p*page_size .. (p+1)*page_size-1

    logical:   page 0      page 1      page 2      ...
                 |           |           |
    physical: (0, 0)      (1, 0)      (2, 0)             default placement: bank p % banks, next free slot there

API (the simulator drives it; keep it stable):
  PagedKVCache(n_kv, head_dim, page_size=256, banks=32, placer=None, max_pages_per_bank=4096, dtype=np.float32)
  placer(logical_page) -> (bank, slot)      called once per new page; lets an allocator decide placement
  append(k, v)                              k, v: (T, n_kv, head_dim); fills the last page, then opens new ones
  gather() -> (K, V)                        (num_tokens, n_kv, head_dim) each, read through block_table
  num_tokens, num_pages                     counts
  block_table                               list[(bank, slot)]; plain attribute, readable
  set_block_table_entry(page, bank, slot)   fault injection: re-point a logical page (no data moves)
  bank_crc32() -> list[int]                 zlib.crc32 over each bank's stored K then V bytes (validation)
  k, v                                      the storage arrays; fault injection may flip bits in them in place
  copy()                                    an independent copy (storage, block table, placement state)

Storage grows (pages_per_bank doubles) when a placement needs a slot beyond it, up to max_pages_per_bank.
A caller's mistake (bad shapes, a placement outside the banks or onto an occupied slot) raises ValueError.
"""

from __future__ import annotations

import copy
import zlib
from collections.abc import Callable

import numpy as np

Placer = Callable[[int], tuple[int, int]]


class PagedKVCache:
    def __init__(
        self,
        n_kv: int,
        head_dim: int,
        page_size: int = 256,
        banks: int = 32,
        placer: Placer | None = None,
        max_pages_per_bank: int = 4096,
        dtype: np.dtype | type = np.float32,
    ) -> None:
        if page_size < 1 or banks < 1 or max_pages_per_bank < 1:
            raise ValueError(
                f"page_size, banks and max_pages_per_bank must be >= 1 (got {page_size}, {banks}, {max_pages_per_bank})"
            )
        self.n_kv = n_kv
        self.head_dim = head_dim
        self.page_size = page_size
        self.banks = banks
        self.placer = placer
        self.max_pages_per_bank = max_pages_per_bank
        self.block_table: list[tuple[int, int]] = []
        self.num_tokens = 0
        self._occupied: set[tuple[int, int]] = set()
        self._next_slot = [0] * banks  # default placement: next free slot per bank
        shape = (banks, 0, page_size, n_kv, head_dim)
        self.k = np.zeros(shape, dtype=dtype)  # (banks, pages_per_bank, page_size, n_kv, hd)
        self.v = np.zeros(shape, dtype=dtype)  # (banks, pages_per_bank, page_size, n_kv, hd)

    # -- sizes ------------------------------------------------------------------------------
    @property
    def num_pages(self) -> int:
        return len(self.block_table)

    @property
    def pages_per_bank(self) -> int:
        return self.k.shape[1]

    # -- placement --------------------------------------------------------------------------
    def _default_place(self, page: int) -> tuple[int, int]:
        bank = page % self.banks
        slot = self._next_slot[bank]
        while (bank, slot) in self._occupied:
            slot += 1
        self._next_slot[bank] = slot + 1
        return bank, slot

    def _grow(self, slots: int) -> None:
        if slots > self.max_pages_per_bank:
            raise ValueError(
                f"KV cache needs {slots} pages per bank, more than max_pages_per_bank={self.max_pages_per_bank}"
            )
        new = max(slots, min(2 * self.pages_per_bank, self.max_pages_per_bank))
        pad = ((0, 0), (0, new - self.pages_per_bank), (0, 0), (0, 0), (0, 0))
        self.k = np.pad(self.k, pad)  # (banks, new, page_size, n_kv, hd)
        self.v = np.pad(self.v, pad)

    def _open_page(self) -> None:
        page = len(self.block_table)
        bank, slot = self.placer(page) if self.placer else self._default_place(page)
        bank, slot = int(bank), int(slot)
        if not (0 <= bank < self.banks) or slot < 0:
            raise ValueError(f"placement of page {page} at (bank {bank}, slot {slot}) is outside {self.banks} banks")
        if (bank, slot) in self._occupied:
            raise ValueError(f"placement of page {page} at (bank {bank}, slot {slot}) is already occupied")
        if slot >= self.pages_per_bank:
            self._grow(slot + 1)
        self._occupied.add((bank, slot))
        self.block_table.append((bank, slot))

    # -- data -------------------------------------------------------------------------------
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        """Store K and V of T new tokens, (T, n_kv, head_dim) each, after those already cached."""
        want = (self.n_kv, self.head_dim)
        if k.ndim != 3 or k.shape[1:] != want or v.shape != k.shape:
            raise ValueError(
                f"append needs k and v of shape (T, {self.n_kv}, {self.head_dim}); got {k.shape}, {v.shape}"
            )
        done = 0
        while done < len(k):
            offset = self.num_tokens % self.page_size
            if offset == 0:
                self._open_page()
            bank, slot = self.block_table[self.num_tokens // self.page_size]
            n = min(self.page_size - offset, len(k) - done)
            self.k[bank, slot, offset : offset + n] = k[done : done + n]  # (n, n_kv, hd)
            self.v[bank, slot, offset : offset + n] = v[done : done + n]  # (n, n_kv, hd)
            done += n
            self.num_tokens += n

    def gather(self) -> tuple[np.ndarray, np.ndarray]:
        """All cached K and V in logical order, read through the block table: (num_tokens, n_kv, hd) each."""
        if not self.block_table:
            empty = np.zeros((0, self.n_kv, self.head_dim), dtype=self.k.dtype)
            return empty, empty.copy()
        banks, slots = (np.array(col) for col in zip(*self.block_table, strict=True))
        shape = (-1, self.n_kv, self.head_dim)
        k = self.k[banks, slots].reshape(shape)[: self.num_tokens]  # (num_tokens, n_kv, hd)
        v = self.v[banks, slots].reshape(shape)[: self.num_tokens]  # (num_tokens, n_kv, hd)
        return k, v

    def copy(self) -> PagedKVCache:
        """An independent copy: storage, block table and placement state (the placer is shared)."""
        other = copy.copy(self)
        other.k, other.v = self.k.copy(), self.v.copy()
        other.block_table = list(self.block_table)
        other._occupied = set(self._occupied)
        other._next_slot = list(self._next_slot)
        return other

    # -- validation and fault injection -----------------------------------------------------
    def bank_crc32(self) -> list[int]:
        """zlib.crc32 of each bank's K bytes followed by its V bytes (all slots, used or not)."""
        return [zlib.crc32(self.v[b].tobytes(), zlib.crc32(self.k[b].tobytes())) for b in range(self.banks)]

    def set_block_table_entry(self, page: int, bank: int, slot: int) -> None:
        """Re-point logical `page` at (bank, slot) without moving data: how a corrupted block table reads.

        The target must lie inside the storage (it may be another page's slot or an unused one)."""
        if not 0 <= page < len(self.block_table):
            raise ValueError(f"page {page} is not in the block table (it has {len(self.block_table)} pages)")
        if not (0 <= bank < self.banks and 0 <= slot < self.pages_per_bank):
            raise ValueError(f"(bank {bank}, slot {slot}) is outside storage ({self.banks} x {self.pages_per_bank})")
        self.block_table[page] = (bank, slot)
