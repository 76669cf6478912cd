"""PagedKVCache: placement, growth, gather order, CRCs, block-table corruption, errors."""

from __future__ import annotations

import numpy as np
import pytest

from layerscope.model import PagedKVCache


def kv(n: int, start: int = 0, n_kv: int = 2, hd: int = 4) -> tuple[np.ndarray, np.ndarray]:
    k = np.arange(start, start + n, dtype=np.float32)[:, None, None] * np.ones((1, n_kv, hd), np.float32)
    return k, -k


def test_default_placement_round_robins_banks_then_slots() -> None:
    cache = PagedKVCache(2, 4, page_size=3, banks=2)
    cache.append(*kv(7))  # pages 0, 1, 2
    cache.append(*kv(6, start=7))  # fills page 2, then pages 3, 4
    assert cache.block_table == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]
    assert cache.num_tokens == 13 and cache.num_pages == 5
    assert cache.pages_per_bank >= 3
    k, v = cache.gather()
    np.testing.assert_array_equal(k[:, 0, 0], np.arange(13))
    np.testing.assert_array_equal(v, -k)
    np.testing.assert_array_equal(cache.k[1, 1, :, 0, 0], [9, 10, 11])  # page 3 = tokens 9..11 in bank 1 slot 1


def test_placer_decides_placement() -> None:
    spots = {0: (3, 5), 1: (0, 0), 2: (3, 0)}
    asked: list[int] = []

    def placer(page: int) -> tuple[int, int]:
        asked.append(page)
        return spots[page]

    cache = PagedKVCache(2, 4, page_size=2, banks=4, placer=placer)
    for i in range(5):
        cache.append(*kv(1, start=i))  # one-token decode steps
    assert asked == [0, 1, 2] and cache.block_table == [(3, 5), (0, 0), (3, 0)]
    assert cache.pages_per_bank >= 6
    np.testing.assert_array_equal(cache.gather()[0][:, 1, 2], np.arange(5))


def test_bad_placements_and_shapes_raise() -> None:
    with pytest.raises(ValueError, match="outside 2 banks"):
        PagedKVCache(2, 4, page_size=2, banks=2, placer=lambda p: (2, 0)).append(*kv(1))
    with pytest.raises(ValueError, match="already occupied"):
        PagedKVCache(2, 4, page_size=1, banks=2, placer=lambda p: (1, 0)).append(*kv(2))
    with pytest.raises(ValueError, match="max_pages_per_bank"):
        PagedKVCache(2, 4, page_size=1, banks=1, max_pages_per_bank=2).append(*kv(3))
    with pytest.raises(ValueError, match=r"shape \(T, 2, 4\)"):
        PagedKVCache(2, 4).append(np.zeros((3, 2, 5), np.float32), np.zeros((3, 2, 5), np.float32))


def test_empty_gather() -> None:
    k, v = PagedKVCache(2, 4).gather()
    assert k.shape == (0, 2, 4) and v.shape == (0, 2, 4)


def test_bank_crc32_sees_data_changes_in_its_bank_only() -> None:
    cache = PagedKVCache(2, 4, page_size=2, banks=3)
    cache.append(*kv(6))
    before = cache.bank_crc32()
    assert len(before) == 3 and len(set(before)) == 3
    cache.v[1, 0, 1, 0, 3] = 123.0  # a fault in bank 1
    after = cache.bank_crc32()
    assert after[1] != before[1] and after[0] == before[0] and after[2] == before[2]


def test_corrupted_block_table_reads_other_data_without_moving_it() -> None:
    cache = PagedKVCache(2, 4, page_size=2, banks=2)
    cache.append(*kv(8))
    crcs = cache.bank_crc32()
    copy = cache.copy()
    cache.set_block_table_entry(1, 0, 0)  # page 1 now reads page 0's slot
    k, _ = cache.gather()
    np.testing.assert_array_equal(k[:4, 0, 0], [0, 1, 0, 1])
    assert cache.bank_crc32() == crcs  # storage untouched: only a reference is wrong
    np.testing.assert_array_equal(copy.gather()[0][:, 0, 0], np.arange(8))  # the copy is independent
    with pytest.raises(ValueError, match="not in the block table"):
        cache.set_block_table_entry(9, 0, 0)
    with pytest.raises(ValueError, match="outside storage"):
        cache.set_block_table_entry(0, 5, 0)
