"""The KV allocator: per-owner block tables over a BlockPool, with one placement policy per subclass.

    engine ──▶ KVAllocator (block tables, hints, eviction, compaction) ──▶ BlockPool (slots, owners)
                    ▲
          bank_aware.py / naive.py decide where the next page of a sequence goes (`_place`)

A block table maps an owner's logical page to (bank, slot); an evicted page is (EVICTED, EVICTED) until it
is restored. A *partially evicted* page (see `republish`) is one whose slot went back to the pool while its
entry still points there: the slot's content is someone else's until a validation pass finds and invalidates it.
Page bytes are those of the whole model (K and V of every layer for page_size tokens): a migration, eviction or
re-fetch moves all layers of a page at once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from layerscope.runtime.kv.block_pool import BlockPool

EVICTED = -1
Phase = Literal["prefill", "decode"]


@dataclass(frozen=True)
class Migration:
    owner: str
    logical: int
    from_bank: int
    from_slot: int
    to_bank: int
    to_slot: int
    reason: Literal["make_room", "compact"]


@dataclass
class PageGrant:
    """Pages handed to an owner by one allocation, with the migrations it needed."""

    logical: list[int] = field(default_factory=list)
    banks: list[int] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    migrations: list[Migration] = field(default_factory=list)
    from_hint: int = 0  # pages taken from the owner's decode_page_hint reservation


class KVAllocator(ABC):
    name: str = "base"

    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self.tables: dict[str, list[tuple[int, int]]] = {}
        self.hints: dict[str, list[tuple[int, int]]] = {}  # reserved, not yet used, in order of use
        self.num_evicted: dict[str, int] = {}

    # -- policy -----------------------------------------------------------------------------
    @abstractmethod
    def _place(self, owner: str, logical: int, phase: Phase) -> tuple[int, int, list[Migration]] | None:
        """Where logical page `logical` of `owner` goes (slot must be free after the migrations); None if full."""

    def _hint_banks(self, owner: str, first_decode_page: int) -> list[int]:
        """Banks to try, in order, for a decode_page_hint reservation."""
        return list(range(self.pool.banks))

    def released(self, bank: int, slot: int) -> None:
        """A slot went back to the pool outside the allocator (a serving run's freed block); policies that keep
        their own free list hear of it here."""
        return None

    def queues_cached_blocks(self, reclaim: Callable[[int, int], bool]) -> bool:
        """Whether this policy's free list also holds the prefix cache's unused blocks (vLLM's one free queue),
        evicting one through `reclaim(bank, slot)` when it reaches the head. The article's policies do not: the
        cache manager evicts for them."""
        del reclaim
        return False

    def cached_idle(self, bank: int, slot: int) -> None:
        """A cached block no request uses any more (a one-queue policy appends it to its queue)."""
        return None

    def idle_many(self, wheres: list[tuple[int, int]], cached: list[bool]) -> None:
        """released() or cached_idle() of each slot, in order (cached[i]: the slot's block stays cached)."""
        for (bank, slot), c in zip(wheres, cached, strict=True):
            (self.cached_idle if c else self.released)(bank, slot)

    def touched(self, bank: int, slot: int) -> None:
        """An unused cached block was hit again (a one-queue policy takes it out of its queue)."""
        return None

    # -- allocation ---------------------------------------------------------------------------
    def table(self, owner: str) -> list[tuple[int, int]]:
        return self.tables.setdefault(owner, [])

    def allocate(self, owner: str, n: int, phase: Phase) -> PageGrant | None:
        """Append `n` pages to `owner`'s block table; None (and nothing changed) when the pool cannot serve them."""
        if n < 0:
            raise ValueError(f"cannot allocate {n} pages")
        table = self.table(owner)
        grant = PageGrant()
        for _ in range(n):
            logical = len(table)
            hint = self.hints.get(owner)
            if phase == "decode" and hint:
                bank, slot = hint.pop(0)
                self.pool.retag(bank, slot, owner, logical)
                grant.from_hint += 1
            else:
                placed = self._place(owner, logical, phase)
                if placed is None:
                    self._rollback(owner, grant)
                    return None
                bank, slot, migrations = placed
                grant.migrations.extend(migrations)
                self.pool.take(owner, bank, slot, logical)
            table.append((bank, slot))
            grant.logical.append(logical)
            grant.banks.append(bank)
            grant.slots.append(slot)
        return grant

    def take_one(self, owner: str, phase: Phase) -> tuple[int, int] | None:
        """allocate(owner, 1, phase)'s page as (bank, slot), None if full: for a policy that never migrates."""
        return None if (grant := self.allocate(owner, 1, phase)) is None else (grant.banks[0], grant.slots[0])

    def _rollback(self, owner: str, grant: PageGrant) -> None:
        # Migrations already done stay done (data was moved, ownership is consistent); pages are returned, and a
        # policy with its own free list hears of them (else they would never be handed out again).
        table = self.table(owner)
        for bank, slot in zip(reversed(grant.banks), reversed(grant.slots), strict=True):
            self.pool.release(bank, slot)
            self.released(bank, slot)
            table.pop()

    def reserve_hint(self, owner: str, n: int, first_decode_page: int) -> tuple[int, int] | None:
        """Reserve a run of `n` adjacent slots in one bank for `owner`'s decode pages; None if no bank has one."""
        if n < 1:
            raise ValueError(f"a hint reserves >= 1 page (got {n})")
        for bank in self._hint_banks(owner, first_decode_page):
            start = self.pool.find_run(n, bank)
            if start is not None:
                slots = np.arange(start, start + n)
                self.pool.take_many(f"hint:{owner}", np.full(n, bank), slots, np.arange(n))
                self.hints[owner] = [(bank, int(s)) for s in slots]
                return bank, start
        return None

    # -- moving, evicting, compacting -----------------------------------------------------------
    def migrate(self, bank: int, slot: int, to_bank: int, to_slot: int, reason: str) -> Migration:
        name = self.pool.owner_name(int(self.pool.owner[bank, slot]))
        logical = int(self.pool.logical[bank, slot])
        self.pool.move(bank, slot, to_bank, to_slot)
        if name in self.tables:
            assert self.tables[name][logical] == (bank, slot), f"{name} page {logical} is not at ({bank}, {slot})"
            self.tables[name][logical] = (to_bank, to_slot)
        elif name.startswith("hint:"):
            hint = self.hints[name[5:]]
            hint[hint.index((bank, slot))] = (to_bank, to_slot)
        return Migration(name, logical, bank, slot, to_bank, to_slot, reason)  # type: ignore[arg-type]

    def evict(self, owner: str, n: int) -> list[tuple[int, int, int]]:
        """Evict up to `n` of `owner`'s resident pages, oldest first; returns (logical, bank, slot) of each."""
        table = self.table(owner)
        out: list[tuple[int, int, int]] = []
        oid = self.pool.owner_id(owner)
        for logical, (bank, slot) in enumerate(table):
            if len(out) == n:
                break
            if bank == EVICTED or not self.holds(oid, logical, bank, slot):
                continue  # evicted already, or a partially evicted entry: the slot is not ours to free
            self.pool.release(bank, slot)
            table[logical] = (EVICTED, EVICTED)
            out.append((logical, bank, slot))
        self.num_evicted[owner] = self.num_evicted.get(owner, 0) + len(out)
        return out

    def holds(self, oid: int, logical: int, bank: int, slot: int) -> bool:
        """The pool's record agrees that (bank, slot) holds the owner's page `logical`."""
        return bool(self.pool.owner[bank, slot] == oid and self.pool.logical[bank, slot] == logical)

    def republish(self, owner: str, logical: int, bank: int, slot: int) -> None:
        """A lost update: an evicted page's entry is written back to its old slot (which the pool already gave
        away) by a writer holding an older copy of the map. The page stays in host memory; the map lies."""
        table = self.table(owner)
        if table[logical][0] != EVICTED:
            raise ValueError(f"{owner} page {logical} is not evicted")
        table[logical] = (bank, slot)
        self.num_evicted[owner] -= 1

    def invalidate(self, owner: str, logicals: list[int]) -> None:
        """Mark entries evicted (their data lives in host memory), repairing a map that points at lost slots."""
        table = self.table(owner)
        for p in logicals:
            if table[p][0] != EVICTED:
                table[p] = (EVICTED, EVICTED)
                self.num_evicted[owner] = self.num_evicted.get(owner, 0) + 1

    def damaged(self, owner: str, banks: list[int] | None = None) -> list[int]:
        """Entries (in `banks`, or anywhere) whose slot the pool records as someone else's or another page's."""
        oid = self.pool.owner_id(owner)
        want = None if banks is None else set(banks)
        return [p for p, (b, s) in enumerate(self.table(owner))
                if b != EVICTED and (want is None or b in want) and not self.holds(oid, p, b, s)]

    def spill(self, owner: str, n: int) -> list[int]:
        """Append `n` pages that have no slot (they live in host memory, evicted from the start)."""
        table = self.table(owner)
        first = len(table)
        table.extend([(EVICTED, EVICTED)] * n)
        self.num_evicted[owner] = self.num_evicted.get(owner, 0) + n
        return list(range(first, first + n))

    def restore(self, owner: str, logical: int) -> tuple[int, int] | None:
        """Bring an evicted page back into the first free slot anywhere; None while the pool is full."""
        table = self.table(owner)
        if table[logical][0] != EVICTED:
            raise ValueError(f"{owner} page {logical} is not evicted")
        where = self.pool.first_free_any()
        if where is None:
            return None
        self.pool.take(owner, where[0], where[1], logical)
        table[logical] = where
        self.num_evicted[owner] -= 1
        return where

    def evicted(self, owner: str) -> list[int]:
        if not self.num_evicted.get(owner):
            return []
        return [i for i, (b, _) in enumerate(self.table(owner)) if b == EVICTED]

    def compact(self, bank: int, need: int = 0) -> list[Migration]:
        """Make the bank's free slots one run at its top (compact_bank)."""
        return compact_bank(self, bank, need)

    def check(self) -> None:
        """Every table entry is owned by its owner at that logical index; no slot appears twice."""
        self.pool.check()
        seen: set[tuple[int, int]] = set()
        for name, table in list(self.tables.items()) + [(f"hint:{o}", h) for o, h in self.hints.items()]:
            for i, (bank, slot) in enumerate(table):
                if bank == EVICTED:
                    continue
                assert (bank, slot) not in seen, f"({bank}, {slot}) is held twice"
                seen.add((bank, slot))
                assert self.pool.owner_name(int(self.pool.owner[bank, slot])) == name, f"{name}[{i}] not owned"
                if not name.startswith("hint:"):
                    assert self.pool.logical[bank, slot] == i, f"{name}[{i}] records another logical page"


def compact_bank(alloc: KVAllocator, bank: int, need: int = 0) -> list[Migration]:
    """Make the bank's free slots one run at its top: first, while the bank has fewer than `need` free
    slots, move its highest pages out to the lowest free slots of the other banks (most free first);
    then slide the pages left down to its lowest slots, in slot order. Every move is a Migration."""
    moves: list[Migration] = []
    if need > alloc.pool.pages_per_bank:
        raise ValueError(f"a run of {need} pages cannot fit in a bank of {alloc.pool.pages_per_bank}")
    others = sorted((b for b in range(alloc.pool.banks) if b != bank),
                    key=lambda b: (-int(alloc.pool.num_free_per_bank[b]), b))
    for slot in np.flatnonzero(alloc.pool.owner[bank] != -1)[::-1]:
        if alloc.pool.num_free_per_bank[bank] >= need:
            break
        dest = next((b for b in others if alloc.pool.num_free_per_bank[b] > 0), None)
        if dest is None:
            break  # the pool as a whole has no room: compaction cannot make the run
        to_slot = alloc.pool.first_free(dest)
        assert to_slot is not None, f"bank {dest} counts free slots but has none"
        moves.append(alloc.migrate(bank, int(slot), dest, to_slot, "compact"))
    used = np.flatnonzero(alloc.pool.owner[bank] != -1)
    for target, slot in enumerate(int(s) for s in used):
        if slot != target:
            moves.append(alloc.migrate(bank, slot, bank, target, "compact"))
    return moves
