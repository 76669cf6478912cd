"""The free queue's storage: an ordered set of (bank, slot) that starts as every slot in address order, without
building that whole order up front (a 500-request run's pool holds ~90k slots; most of them are never handed out).

    [front (slots put back at the head, last in first)] [fresh: addresses not yet handed out] [tail (insertion order)]

The fresh part is the address range [fresh, banks * pages_per_bank) (addr = slot * banks + bank), less the few
slots taken out of its middle (`gone`). Every operation means what it means on one OrderedDict holding the whole
queue (FreeQueueAllocator's before this: tests/runtime/kv/test_address_queue.py compares them): putting a slot
already queued keeps its place; removing one not queued does nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator

Slot = tuple[int, int]


class AddressQueue:
    def __init__(self, banks: int, pages_per_bank: int) -> None:
        self.banks = banks
        self.total = banks * pages_per_bank
        self.fresh = 0  # addresses below this one have left the fresh part
        self.front: list[Slot] = []  # put back at the head; the last one is the head
        self.gone: set[Slot] = set()  # fresh addresses taken out of the middle
        self.tail: OrderedDict[Slot, None] = OrderedDict()

    def _in_fresh(self, where: Slot) -> bool:
        """At its place in the fresh part (a slot in `gone` is not, though it may be queued in front or tail)."""
        return where[1] * self.banks + where[0] >= self.fresh and where not in self.gone

    def __contains__(self, where: object) -> bool:
        if not isinstance(where, tuple):
            return False
        return where in self.tail or where in self.front or self._in_fresh(where)

    def __len__(self) -> int:
        return len(self.front) + self.total - self.fresh - len(self.gone) + len(self.tail)

    def __iter__(self) -> Iterator[Slot]:
        yield from reversed(self.front)
        banks = self.banks
        for a in range(self.fresh, self.total):
            where = (a % banks, a // banks)
            if where not in self.gone:
                yield where
        yield from self.tail

    def popleft(self) -> Slot | None:
        """The head, taken out; None when the queue is empty."""
        if self.front:
            return self.front.pop()
        while self.fresh < self.total:
            a = self.fresh
            self.fresh = a + 1
            where = (a % self.banks, a // self.banks)
            if not self.gone or where not in self.gone:
                return where
            self.gone.discard(where)
        if self.tail:
            return self.tail.popitem(last=False)[0]
        return None

    def push(self, where: Slot) -> None:
        """At the tail, unless it is queued already (then it keeps its place)."""
        if where not in self:
            self.tail[where] = None

    def push_many(self, wheres: Iterable[Slot]) -> None:
        """push() of each, in order: a finished request's blocks (one call for ~60 of them)."""
        tail, front, gone, fresh, banks = self.tail, self.front, self.gone, self.fresh, self.banks
        if front or gone:
            for where in wheres:
                self.push(where)
            return
        for where in wheres:  # nothing put back at the head, nothing taken out of the fresh part's middle
            if where[1] * banks + where[0] < fresh and where not in tail:
                tail[where] = None

    def push_front(self, where: Slot) -> None:
        """At the head (an allocation that could not be served hands its slots back)."""
        self.remove(where)
        self.front.append(where)

    def remove(self, where: Slot) -> None:
        """Out of the queue wherever it is (a cached block hit again); nothing if it is not queued."""
        if where in self.tail:
            del self.tail[where]
        elif where in self.front:
            self.front.remove(where)
        elif where[1] * self.banks + where[0] >= self.fresh:
            self.gone.add(where)  # the fresh part skips it (it may be queued again later, at the tail or front)
