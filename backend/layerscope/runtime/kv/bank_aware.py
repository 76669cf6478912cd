"""Bank-aware placement: prefill interleaves pages over banks, decode stays in one bank and makes room.

    prefill  page i  -> bank i mod banks (lowest free slot there; the next bank if that one is full)
    decode   page    -> the slot after the sequence's last page, same bank
                        occupied by someone else  -> migrate that page out to the nearest bank with room
                        bank ends / own page next -> next bank (the walk's stride), migrating to make room there

Both shapes keep the block-table walk on its two sequential patterns (see walk.py), which is the point.
"""

from __future__ import annotations

import numpy as np

from layerscope.runtime.kv.allocator import EVICTED, KVAllocator, Migration, Phase


class BankAwareAllocator(KVAllocator):
    name = "bank_aware"

    def _place(self, owner: str, logical: int, phase: Phase) -> tuple[int, int, list[Migration]] | None:
        if phase == "prefill":
            return self._place_prefill(logical)
        return self._place_decode(owner, logical)

    def _hint_banks(self, owner: str, first_decode_page: int) -> list[int]:
        # The bank after the last prompt page's bank: entering it is the walk's stride, so free.
        banks = self.pool.banks
        return [(first_decode_page + i) % banks for i in range(banks)]

    def _place_prefill(self, logical: int) -> tuple[int, int, list[Migration]] | None:
        banks = self.pool.banks
        for i in range(banks):
            bank = (logical + i) % banks
            slot = self.pool.first_free(bank)
            if slot is not None:
                return bank, slot, []
        return None

    def _last_resident(self, owner: str) -> tuple[int, int] | None:
        for bank, slot in reversed(self.table(owner)):
            if bank != EVICTED:
                return bank, slot
        return None

    def _place_decode(self, owner: str, logical: int) -> tuple[int, int, list[Migration]] | None:
        pool = self.pool
        last = self._last_resident(owner)
        if last is None:
            return self._place_prefill(logical)
        bank, slot = last
        nxt = slot + 1
        if nxt < pool.pages_per_bank:
            if pool.is_free(bank, nxt):
                return bank, nxt, []
            if pool.owner_name(int(pool.owner[bank, nxt])) != owner:
                moved = self._move_out(bank, nxt)
                if moved is not None:
                    return bank, nxt, [moved]
        # This bank cannot continue the run: step to the next bank (the stride), making room there if needed.
        for i in range(1, pool.banks + 1):
            b = (bank + i) % pool.banks
            free = pool.first_free(b)
            if free is not None:
                return b, free, []
            victim = self._foreign_slot(b, owner)
            if victim is not None:
                moved = self._move_out(b, victim)
                if moved is not None:
                    return b, victim, [moved]
        return None

    def _foreign_slot(self, bank: int, owner: str) -> int | None:
        """Lowest slot of `bank` held by another owner (not a hint: reservations stay put)."""
        row = self.pool.owner[bank]
        keep = [self.pool.owner_id(owner)] + [self.pool.owner_id(n) for n in self.hints_names()]
        foreign = np.flatnonzero((row >= 0) & ~np.isin(row, keep))
        return int(foreign[0]) if foreign.size else None

    def hints_names(self) -> list[str]:
        return [f"hint:{o}" for o in self.hints]

    def _move_out(self, bank: int, slot: int) -> Migration | None:
        """Migrate the page at (bank, slot) to the nearest other bank with a free slot."""
        held = self.pool.owner_name(int(self.pool.owner[bank, slot]))
        if held.startswith("hint:"):
            return None
        banks = self.pool.banks
        for d in range(1, banks):
            for b in ((bank + d) % banks, (bank - d) % banks):
                free = self.pool.first_free(b)
                if free is not None:
                    return self.migrate(bank, slot, b, free, "make_room")
        return None
