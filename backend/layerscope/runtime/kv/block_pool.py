"""The physical KV page pool: `banks` banks of `pages_per_bank` slots, page ownership, free slots per bank.

Layout (one page = `page_size` tokens of K and V for every layer of the model)::

    bank 0: [slot 0][slot 1][slot 2] ... [slot P-1]
    bank 1: [slot 0][slot 1][slot 2] ... [slot P-1]
    ...
    address order (what "first free page anywhere" scans): slot-major, so consecutive
    addresses round-robin over banks like a hardware address interleave:
        addr = slot * banks + bank

The pool knows who owns each slot and which logical page of its owner it holds; policies
(bank_aware.py, naive.py) decide where pages go. Failure kinds, as in vLLM's block pool:
an expected shortage returns None, a caller's mistake raises ValueError, a broken invariant asserts.
"""

from __future__ import annotations

import numpy as np

FREE = -1


class BlockPool:
    def __init__(self, banks: int, pages_per_bank: int) -> None:
        if banks < 1 or pages_per_bank < 1:
            raise ValueError(f"a pool needs >= 1 bank and >= 1 page per bank (got {banks}, {pages_per_bank})")
        self.banks = banks
        self.pages_per_bank = pages_per_bank
        self.owner = np.full((banks, pages_per_bank), FREE, dtype=np.int32)  # owner id per slot
        self.logical = np.full((banks, pages_per_bank), FREE, dtype=np.int32)  # owner's logical page per slot
        self.num_free_per_bank = np.full(banks, pages_per_bank, dtype=np.int64)
        self._num_free = banks * pages_per_bank  # = num_free_per_bank.sum(), kept as an int (asked every step)
        self._owner_ids: dict[str, int] = {}
        self._owner_names: list[str] = []
        self._addr_cursor = 0  # no free address below this one (speeds up first_free_any)

    # -- owners -----------------------------------------------------------------------------
    def owner_id(self, name: str) -> int:
        if name not in self._owner_ids:
            self._owner_ids[name] = len(self._owner_names)
            self._owner_names.append(name)
        return self._owner_ids[name]

    def known_owner_id(self, name: str) -> int | None:
        """The owner's id if it ever took a slot, else None (no id is made for it)."""
        return self._owner_ids.get(name)

    def owner_name(self, oid: int) -> str:
        return self._owner_names[oid]

    # -- queries ----------------------------------------------------------------------------
    @property
    def num_pages(self) -> int:
        return self.banks * self.pages_per_bank

    @property
    def num_free(self) -> int:
        return self._num_free

    def used_per_bank(self) -> list[int]:
        return [int(self.pages_per_bank - n) for n in self.num_free_per_bank]

    def is_free(self, bank: int, slot: int) -> bool:
        self._check_slot(bank, slot)
        return bool(self.owner[bank, slot] == FREE)

    def free_slots(self, bank: int) -> list[int]:
        """The bank's free list, lowest slot first (the order allocations take them)."""
        return [int(s) for s in np.flatnonzero(self.owner[bank] == FREE)]

    def first_free(self, bank: int, start: int = 0) -> int | None:
        """Lowest free slot >= start in `bank`; None when there is none."""
        if start >= self.pages_per_bank or self.num_free_per_bank[bank] == 0:
            return None
        free = np.flatnonzero(self.owner[bank, start:] == FREE)
        return int(free[0]) + start if free.size else None

    def first_free_any(self) -> tuple[int, int] | None:
        """Lowest free address (slot-major): "first free page anywhere"."""
        flat = self.owner.T.ravel()  # address order: addr = slot * banks + bank
        free = np.flatnonzero(flat[self._addr_cursor :] == FREE)
        if not free.size:
            return None
        addr = int(free[0]) + self._addr_cursor
        self._addr_cursor = addr
        return addr % self.banks, addr // self.banks

    def largest_free_run(self, bank: int | None = None) -> int:
        """Longest run of adjacent free slots within one bank (all banks when bank is None)."""
        if bank is None:
            return _longest_free_run(self.owner, self._num_free)
        return _longest_free_run(self.owner[bank : bank + 1], int(self.num_free_per_bank[bank]))

    def find_run(self, n: int, bank: int) -> int | None:
        """First slot of the lowest run of `n` adjacent free slots in `bank`; None when there is none."""
        if n < 1:
            raise ValueError(f"a run needs n >= 1 (got {n})")
        if self.num_free_per_bank[bank] < n:
            return None
        free = np.concatenate(([0], (self.owner[bank] == FREE).astype(np.int64)))
        sums = np.cumsum(free)  # sums[i] = free slots in [0, i)
        window = sums[n:] - sums[:-n]  # free slots in [i, i + n)
        hits = np.flatnonzero(window == n)
        return int(hits[0]) if hits.size else None

    # -- mutations --------------------------------------------------------------------------
    def take(self, name: str, bank: int, slot: int, logical: int) -> None:
        self._check_slot(bank, slot)
        owner = self.owner
        held = owner.item(bank, slot)  # a Python int: cheaper to compare than a numpy scalar
        if held != FREE:
            raise ValueError(f"(bank {bank}, slot {slot}) is already owned by {self.owner_name(held)!r}")
        owner[bank, slot] = self.owner_id(name)
        self.logical[bank, slot] = logical
        free = self.num_free_per_bank
        free[bank] -= 1
        self._num_free -= 1
        assert free[bank] >= 0, f"bank {bank} free count went negative"

    def take_free(self, name: str, bank: int, slot: int, logical: int) -> None:
        """take() of a slot the caller has just seen free (a free queue's head): no checks, Python ints only."""
        oid = self._owner_ids.get(name)
        self.owner[bank, slot] = self.owner_id(name) if oid is None else oid
        self.logical[bank, slot] = logical
        self.num_free_per_bank[bank] -= 1
        self._num_free -= 1

    def take_many(self, name: str, banks: np.ndarray, slots: np.ndarray, logical: np.ndarray) -> None:
        """Vectorized take for slots known to be free (tenant fill, hint reservation)."""
        if np.any(self.owner[banks, slots] != FREE):
            raise ValueError(f"take_many for {name!r}: some slots are already owned")
        self.owner[banks, slots] = self.owner_id(name)
        self.logical[banks, slots] = logical
        np.subtract.at(self.num_free_per_bank, banks, 1)
        self._num_free -= len(banks)

    def release(self, bank: int, slot: int) -> None:
        self._check_slot(bank, slot)
        if self.owner[bank, slot] == FREE:
            raise ValueError(f"(bank {bank}, slot {slot}) is already free")
        self.owner[bank, slot] = FREE
        self.logical[bank, slot] = FREE
        self.num_free_per_bank[bank] += 1
        self._num_free += 1
        self._addr_cursor = min(self._addr_cursor, slot * self.banks + bank)

    def release_many(self, banks: list[int], slots: list[int]) -> None:
        """Vectorized release (a finished request's blocks)."""
        b, s = np.asarray(banks, dtype=np.int64), np.asarray(slots, dtype=np.int64)
        if b.size == 0:
            return
        if b.min() < 0 or b.max() >= self.banks or s.min() < 0 or s.max() >= self.pages_per_bank:
            raise ValueError(f"release_many: a slot is outside the pool ({self.banks} x {self.pages_per_bank})")
        if np.any(self.owner[b, s] == FREE):
            raise ValueError("release_many: some slots are already free")
        self.owner[b, s] = FREE
        self.logical[b, s] = FREE
        np.add.at(self.num_free_per_bank, b, 1)
        self._num_free += len(b)
        self._addr_cursor = min(self._addr_cursor, int((s * self.banks + b).min()))

    def move(self, bank: int, slot: int, to_bank: int, to_slot: int) -> None:
        """Move a page's ownership (its data is copied by the caller's migration)."""
        oid, logical = int(self.owner[bank, slot]), int(self.logical[bank, slot])
        if oid == FREE:
            raise ValueError(f"move from free (bank {bank}, slot {slot})")
        self.release(bank, slot)
        self.take(self.owner_name(oid), to_bank, to_slot, logical)

    def retag(self, bank: int, slot: int, name: str, logical: int) -> None:
        """Hand an owned slot to another owner in place (a hint-reserved page becoming a decode page)."""
        self._check_slot(bank, slot)
        assert self.owner[bank, slot] != FREE, f"retag of free (bank {bank}, slot {slot})"
        self.owner[bank, slot] = self.owner_id(name)
        self.logical[bank, slot] = logical

    def retag_many(self, banks: np.ndarray, slots: np.ndarray, name: str, logical: int) -> None:
        """Vectorized retag (a finished request's blocks the prefix cache keeps)."""
        assert not np.any(self.owner[banks, slots] == FREE), "retag of a free slot"
        self.owner[banks, slots] = self.owner_id(name)
        self.logical[banks, slots] = logical

    def check(self) -> None:
        """Invariants: free counts match ownership; free slots carry no logical page."""
        free = self.owner == FREE
        assert np.array_equal(free.sum(axis=1), self.num_free_per_bank), "free counts disagree with ownership"
        assert self._num_free == int(free.sum()), "the free total disagrees with ownership"
        assert np.all(self.logical[free] == FREE), "a free slot still records a logical page"

    def _check_slot(self, bank: int, slot: int) -> None:
        if not (0 <= bank < self.banks and 0 <= slot < self.pages_per_bank):
            raise ValueError(f"(bank {bank}, slot {slot}) is outside the pool ({self.banks} x {self.pages_per_bank})")


def _longest_free_run(owner: np.ndarray, num_free: int) -> int:
    """Longest run of free slots within any one row of `owner` (`num_free` of its slots free), from the positions of
    whichever is fewer, the used slots (a run is the gap between two) or the free ones (a run is consecutive
    positions): a serving run's pool is mostly one or the other, so this reads a few thousand positions where a
    mask of every slot's run edges (the way before) made and scanned ~6 copies of the whole pool (~90k slots)."""
    if num_free == 0:
        return 0
    banks, pages = owner.shape
    mostly_free = 2 * num_free > owner.size
    marks = np.full((banks, pages + 1), mostly_free)  # a column after each row's last slot: runs stay in their row
    (np.not_equal if mostly_free else np.equal)(owner, FREE, out=marks[:, :pages])
    pos = np.flatnonzero(marks)
    if mostly_free:  # the used slots and the columns
        return max(int(pos[0]), int((np.diff(pos) - 1).max()) if pos.size > 1 else 0)
    ends = np.flatnonzero(np.diff(pos) != 1)  # the free slots: the last position of each run but the last
    return int(np.diff(np.concatenate(([-1], ends, [pos.size - 1]))).max())
