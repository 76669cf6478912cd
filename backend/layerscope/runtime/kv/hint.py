"""decode_page_hint: a run of adjacent free slots in one bank reserved before prefill for the pages decode will
append (the one-request loop), so decode's page walk stays in one bank. If no bank has such a run the
reservation waits (`pending`) until a compaction makes room.
"""

from __future__ import annotations

from layerscope.runtime.kv.manager import SEQ, KVManager


class PageHint:
    def __init__(self, kv: KVManager, prompt_len: int, decode_steps: int, page_size: int) -> None:
        self.kv = kv
        self.prompt_pages = -(-prompt_len // page_size)
        self.size = -(-(prompt_len + decode_steps) // page_size) - self.prompt_pages  # pages decode appends
        self.pending = False  # the reservation found no run and waits for a compaction

    def room(self) -> int:
        """Pages a compaction should free in one bank for a waiting reservation (0: none waits)."""
        return min(self.size, self.kv.pool.pages_per_bank) if self.pending else 0

    def reserve(self) -> list[tuple[int, int]] | None:
        """The reserved (bank, slot) run; None when no bank has one (then `pending`), [] when decode appends none."""
        if self.size < 1:
            return []
        got = self.kv.allocator.reserve_hint(SEQ, self.size, self.prompt_pages)
        self.pending = got is None
        return None if got is None else self.kv.allocator.hints[SEQ]
