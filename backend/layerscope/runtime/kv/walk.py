"""The decode attention kernel's walk over a block table, and what placement costs it.

The kernel keeps one prefetch stream per bank. Reading logical page i+1 after page i is sequential when
    (b, s) -> (b, s + 1)          the same bank's stream continues, or
    (b, *) -> (b + 1 mod B, *)    the interleave stride: the next bank's own stream picks up;
anything else is a cross-bank read: the stream breaks, the kernel pays a page-table lookup and a DRAM
row miss, and over-fetches a partial burst. Evicted pages are not walked here (they are re-fetched).
"""

from __future__ import annotations

import numpy as np

# Assumptions (no public measurement): an HBM row miss plus a TLB walk is ~0.6 us of latency; the
# kernel overlaps it across ~32 concurrent page walkers, so ~0.02 us is exposed per break, and each
# break over-fetches one 4 KiB burst-aligned chunk it does not use.
BREAK_LATENCY_US = 0.6
CONCURRENT_WALKERS = 32
BREAK_OVERFETCH_BYTES = 4096.0


def cross_bank_reads(banks: np.ndarray, slots: np.ndarray, num_banks: int) -> int:
    """Breaks of the sequential patterns along the resident block table (arrays in logical order)."""
    keep = banks >= 0
    b, s = banks[keep], slots[keep]
    if b.size < 2:
        return 0
    same_run = (b[1:] == b[:-1]) & (s[1:] == s[:-1] + 1)
    stride = b[1:] == (b[:-1] + 1) % num_banks
    return int(np.count_nonzero(~(same_run | stride)))


def walk_penalty(breaks: int) -> tuple[float, float]:
    """(extra bytes, extra microseconds) one layer's decode attention pays for `breaks` cross-bank reads."""
    return breaks * BREAK_OVERFETCH_BYTES, breaks * BREAK_LATENCY_US / CONCURRENT_WALKERS
