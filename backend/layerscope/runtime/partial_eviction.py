"""Partial eviction: pages evicted while the chunk that wrote them is in flight (the one-request loop).

Evicting a page is three steps: copy it to host memory, give its slot back to the pool, invalidate its map
entry. Under pressure the first two happen at once (the other tenant is waiting and writes the slot right away),
but a page of a chunk still in flight has its entry re-written by that chunk's barrier from the older copy: a
lost update. The page is half evicted, in host memory while the map still sends decode to a slot that now holds
the tenant's data. Pages of finished chunks, whose entries were published earlier, are evicted cleanly (entry
invalidated, re-fetched when needed). A validation pass (CRC) finds the damaged entries; `repair` invalidates
them so that they are re-fetched.

    chunk KV written ─▶ in_flight(pages) ─▶ evicted(pages) under pressure ─▶ barrier(): re-published, lost
    validation: damaged(bad banks) ─▶ repair(pages): entries invalidated (re-fetched from host memory)

It emits the fault events and returns plain data; the engine bumps its block-table version, its stats and the
scaled run's pages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from layerscope.events import FaultEvent
from layerscope.runtime.kv.eviction import Page
from layerscope.runtime.kv.manager import SEQ, KVManager

KIND = "partial_eviction"


class PartialEviction:
    def __init__(self, kv: KVManager, emit: Callable[[Any], None]) -> None:
        self.kv = kv
        self.emit = emit
        self._in_flight: set[int] = set()  # pages of the chunk between its KV write and its barrier
        self._lost: list[Page] = []  # evicted while in flight

    def in_flight(self, pages: range | list[int]) -> None:
        """The chunk's KV is written; its barrier has not passed (pressure strikes here)."""
        self._in_flight = set(pages)

    def evicted(self, pages: list[Page]) -> None:
        self._lost += [page for page in pages if page[0] in self._in_flight]

    def barrier(self) -> list[Page]:
        """The chunk's barrier re-publishes its map as taken at launch: entries of pages evicted meanwhile point
        at their old slots again. Returns those pages (empty: nothing happened)."""
        lost, self._lost, self._in_flight = self._lost, [], set()
        for p, b, s in lost:
            self.kv.allocator.republish(SEQ, p, b, s)
        return lost

    def injected(self, lost: list[Page], chunk: int, t: float) -> None:
        banks = sorted({b for _, b, _ in lost})
        self.emit(FaultEvent(t_us=t, fault=KIND, action="injected", banks=banks, chunk=chunk,
                             detail=f"pages {[p for p, _, _ in lost]} evicted while chunk {chunk} was in flight: "
                                    "their slots went to the other tenant, its barrier re-published the old map"))

    def damaged(self, bad: list[int] | None) -> list[int]:
        """Entries in failing banks (every entry after a full map rebuild: bad=None) whose slot the pool records
        as another owner's (or another page's)."""
        return self.kv.allocator.damaged(SEQ, bad) if bad is None or bad else []

    def detected(self, damaged: list[int], t: float) -> list[int]:
        """The validation pass found them: reported; returns their banks."""
        table = self.kv.allocator.table(SEQ)
        banks = sorted({table[p][0] for p in damaged})
        self.emit(FaultEvent(t_us=t, fault=KIND, action="detected", banks=banks,
                             detail=f"CRC32 mismatch in banks {banks}: map entries of pages {damaged} point at "
                                    "slots the pool gave to another tenant"))
        return banks

    def repair(self, damaged: list[int]) -> None:
        self.kv.allocator.invalidate(SEQ, damaged)

    def recovered(self, damaged: list[int], banks: list[int], t: float) -> None:
        self.emit(FaultEvent(t_us=t, fault=KIND, action="recovered", banks=banks,
                             detail=f"entries of pages {damaged} invalidated; the pages are re-fetched from host "
                                    "memory into free slots"))
