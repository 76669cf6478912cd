import numpy as np

from layerscope.runtime.kv.walk import cross_bank_reads, walk_penalty


def _breaks(pages: list[tuple[int, int]], banks: int = 4) -> int:
    arr = np.array(pages)
    return cross_bank_reads(arr[:, 0], arr[:, 1], banks)


def test_sequential_patterns_are_free() -> None:
    assert _breaks([(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1)]) == 0  # the interleave stride, wrapping
    assert _breaks([(2, 3), (2, 4), (2, 5), (3, 0)]) == 0  # a run in one bank, then the next bank


def test_jumps_break_the_walk() -> None:
    assert _breaks([(0, 0), (2, 0), (2, 2), (1, 7)]) == 3  # skip a bank, a hole in a bank, a step back
    assert _breaks([(0, 0), (-1, -1), (1, 0)]) == 0  # evicted pages are not walked
    extra_bytes, extra_us = walk_penalty(10)
    assert extra_bytes > 0 and extra_us > 0 and walk_penalty(0) == (0.0, 0.0)
