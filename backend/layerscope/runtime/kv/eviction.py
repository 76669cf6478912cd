"""Eviction to host memory and re-fetch of the one-request loop's sequence pages (kv/manager.py's SEQ table).

    evict(n)   the sequence's oldest resident pages go to host memory: their entries become EVICTED, their
               slots go back to the pool (the write record forgets them)
    refetch()  a decode step reads every evicted page over the host link (PCIe, one copy-stream kernel of the
               whole model's pages), and puts back into free slots as many as the pool has room for

Both emit their events and return plain data; the engine bumps its block-table version and its stats.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from layerscope.events import PageAllocEvent, PageEvictEvent
from layerscope.hardware.kernel import CostEnv, Kernel
from layerscope.runtime.kv.manager import NEVER_WRITTEN, SEQ, KVManager
from layerscope.runtime.timing import COPY, Timing

# Host link for re-fetching evicted pages: PCIe Gen5 x16 moves ~50 GB/s in practice (64 GB/s raw).
HOST_LINK_BW = 50e9

Page = tuple[int, int, int]  # (logical, bank, slot)


@dataclass
class Refetch:
    pages: int = 0  # evicted pages this step read from host memory
    time_us: float = 0.0  # the copy, paid once per model step
    restored: list[Page] = field(default_factory=list)  # of those, back in a slot of the pool


class Eviction:
    def __init__(self, kv: KVManager, timing: Timing, emit: Callable[[Any], None], host_bw_scale: float,
                 layers: int) -> None:
        self.kv = kv
        self.timing = timing
        self.emit = emit
        self.host_env = CostEnv(hbm_bw_scale=host_bw_scale)  # host link bandwidth / HBM bandwidth
        self.layers = layers

    def evict(self, n: int, t: float) -> list[Page]:
        out = self.kv.allocator.evict(SEQ, n)
        if not out:
            return out
        for _, b, s in out:
            self.kv.content[b, s] = NEVER_WRITTEN
        self.emit(PageEvictEvent(t_us=t, owner=SEQ, logical=[p for p, _, _ in out], banks=[b for _, b, _ in out],
                                 slots=[s for _, _, s in out], bytes=len(out) * self.kv.page_bytes))
        return out

    def refetch(self, t: float, step: int | None) -> Refetch:
        """Evicted pages this step must read come over the host link; restored when the pool has room."""
        evicted = self.kv.allocator.evicted(SEQ)
        if not evicted:
            return Refetch()
        k = Kernel("kv_page_refetch", "kv_refetch", "memory", 0.0, len(evicted) * self.kv.page_bytes, stream=COPY,
                   shapes=f"{len(evicted)} evicted pages x {self.layers} layers from host memory", scope="model")
        c = self.timing.cost(k, self.host_env)
        start = self.timing.copy(c, t, "decode", step)
        restored: list[Page] = []
        for p in evicted:
            where = self.kv.allocator.restore(SEQ, p)
            if where is None:
                break
            self.kv.content[where] = p
            restored.append((p, *where))
        if restored:
            self.emit(PageAllocEvent(t_us=start, owner=SEQ, phase="decode", logical=[p for p, _, _ in restored],
                                     banks=[b for _, b, _ in restored], slots=[s for _, _, s in restored]))
        return Refetch(len(evicted), c.time_us, restored)
