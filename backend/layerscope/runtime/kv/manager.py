"""KV cache manager: sizes the page pool from free HBM, owns the allocator, and keeps the write record.

    free HBM at start ─▶ minus the largest activation workspace ─▶ pool of whole-model pages
                         (page = page_size tokens x K and V x every layer)  ─▶ banks x pages_per_bank

Bytes are the whole model's (all `num_hidden_layers` layers): one page holds its tokens' K/V for every
layer, so migrating, evicting or re-fetching a page moves all layers at once.

The write record (`content[bank, slot]` = which logical page's data the slot really holds) is what the
validation pass checks the address map against when numerics are off (the "metadata" checksum). Another
tenant's data in a slot is recorded as FOREIGN; a slot the map claims for two pages is a CONFLICT (it can
hold at most one of them), so both show up as mismatches in the slot's bank.
"""

from __future__ import annotations

import zlib

import numpy as np

from layerscope.model.config import ModelConfig
from layerscope.runtime.kv.allocator import EVICTED, KVAllocator
from layerscope.runtime.kv.bank_aware import BankAwareAllocator
from layerscope.runtime.kv.block_pool import BlockPool
from layerscope.runtime.kv.naive import NaiveAllocator

GIB = 1024**3
NEVER_WRITTEN = -2
FOREIGN = -3  # another tenant wrote this slot
CONFLICT = -4  # the map claims this slot for more than one page
MIXED = -5  # part of a page written over a slot that did not hold the page's earlier tokens
POLICIES: dict[str, type[KVAllocator]] = {"bank_aware": BankAwareAllocator, "naive": NaiveAllocator}
SEQ = "seq0"


class KVManager:
    def __init__(
        self,
        model: ModelConfig,
        page_size: int,
        banks: int,
        policy: str,
        free_hbm_bytes: float,
        workspace_bytes: float,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown allocator {policy!r}; choose one of {', '.join(POLICIES)}")
        self.model = model
        self.page_size = page_size
        self.page_bytes = page_size * model.kv_bytes_per_token()  # whole model, all layers
        self.page_bytes_layer = page_size * model.kv_bytes_per_token_per_layer()
        pool_pages = int(max(0.0, free_hbm_bytes - workspace_bytes) // self.page_bytes)
        if pool_pages < banks:
            raise ValueError(
                f"free_hbm_gib={free_hbm_bytes / GIB:g} leaves room for {pool_pages} KV pages of "
                f"{self.page_bytes / 2**20:.0f} MiB, fewer than one per bank ({banks} banks): "
                "raise free_hbm_gib, or lower page_size or banks"
            )
        self.pool = BlockPool(banks, pool_pages // banks)
        self.allocator = POLICIES[policy](self.pool)
        self.content = np.full((banks, self.pool.pages_per_bank), NEVER_WRITTEN, dtype=np.int64)

    # -- sizes ----------------------------------------------------------------------------------
    @property
    def used_pages(self) -> int:
        return self.pool.num_pages - self.pool.num_free

    def owned_pages(self, owner: str) -> int:
        return int(np.count_nonzero(self.pool.owner == self.pool.owner_id(owner)))

    # -- other tenants ----------------------------------------------------------------------------
    def fill_tenants(self, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Hold `fraction` of the pool's pages for other tenants, scattered at random (seeded)."""
        n = int(round(fraction * self.pool.num_pages))
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        picks = np.sort(rng.choice(self.pool.num_pages, size=n, replace=False))
        banks, slots = picks % self.pool.banks, picks // self.pool.banks
        self.pool.take_many("tenant", banks, slots, np.arange(n))
        return banks, slots

    # -- the write record -------------------------------------------------------------------------
    def record_writes(
        self,
        logical: list[int] | range,
        owner: str = SEQ,
        remapped: bool = True,
        chunk_first_page: int = 0,
        continues: bool = False,
    ) -> None:
        """KV data for these logical pages is written. Without the address remap, page p lands on the slot
        of chunk-relative page p - chunk_first_page instead (over an earlier chunk's data). With `continues`
        the first page already holds earlier tokens: if its slot does not hold that page, the slot ends up
        with a mix (this write's tokens over whatever was there), which matches no page."""
        table = self.allocator.table(owner)
        for i, p in enumerate(logical):
            target = p if remapped else p - chunk_first_page
            bank, slot = table[target]
            if bank != EVICTED:
                mixed = continues and i == 0 and self.content[bank, slot] != p
                self.content[bank, slot] = MIXED if mixed else p

    def foreign(self, banks: list[int], slots: list[int]) -> None:
        """Another tenant took these slots and wrote its own data there."""
        self.content[banks, slots] = FOREIGN

    def moved(self, from_bank: int, from_slot: int, to_bank: int, to_slot: int) -> None:
        self.content[to_bank, to_slot] = self.content[from_bank, from_slot]
        self.content[from_bank, from_slot] = NEVER_WRITTEN

    def metadata_crc(self, table: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
        """Per bank: CRC32 of what the address map says each slot holds vs of what was written there."""
        banks = self.pool.banks
        expected = np.full_like(self.content, NEVER_WRITTEN)
        for p, (b, s) in enumerate(table):
            if b != EVICTED:
                expected[b, s] = p if expected[b, s] == NEVER_WRITTEN else CONFLICT
        held = self.content.copy()
        held[expected == NEVER_WRITTEN] = NEVER_WRITTEN  # only slots the map claims are compared
        got = [zlib.crc32(held[b].tobytes()) for b in range(banks)]
        want = [zlib.crc32(expected[b].tobytes()) for b in range(banks)]
        return got, want
