"""KVCacheManager: block tables over the pool, the free-block queue, prefix-cache hits and LRU eviction,
with exact slots."""

from __future__ import annotations

import numpy as np
import pytest

from layerscope.runtime.kv.block_pool import BlockPool
from layerscope.runtime.kv.cache_manager import CACHE_OWNER, KVCacheManager, block_hash
from layerscope.runtime.kv.free_queue import FreeQueueAllocator
from layerscope.runtime.request import Request

BS = 4  # tokens per block


def _mgr(banks: int = 2, per_bank: int = 4, caching: bool = True) -> KVCacheManager:
    return KVCacheManager(FreeQueueAllocator(BlockPool(banks, per_bank)), BS, caching)


def _req(rid: int, ids: list[int], out: int = 4) -> Request:
    tokens = np.array(ids + list(range(1000, 1000 + out)), dtype=np.int32)
    return Request(rid, 0.0, len(ids), out, tokens)


def test_blocks_come_from_the_free_queue_in_address_order_and_return_to_its_tail() -> None:
    m = _mgr(caching=False)
    a = _req(0, list(range(10)))
    assert m.allocate_slots(a, 10) is not None
    assert m.block_table(0) == [(0, 0), (1, 0), (0, 1)]  # addr = slot * banks + bank
    b = _req(1, list(range(50, 55)))
    m.allocate_slots(b, 5)
    assert m.block_table(1) == [(1, 1), (0, 2)]
    assert m.free(a) == [(0, 1), (1, 0), (0, 0)]  # tail first
    c = _req(2, list(range(90, 110)))
    m.allocate_slots(c, 16)
    # the rest of the address order first, then the freed blocks in the order they were freed
    assert m.block_table(2) == [(1, 2), (0, 3), (1, 3), (0, 1)]
    m.pool.check()


def test_allocate_slots_returns_none_when_the_pool_is_short_and_changes_nothing() -> None:
    m = _mgr(banks=1, per_bank=3, caching=False)
    a = _req(0, list(range(8)))
    m.allocate_slots(a, 8)
    b = _req(1, list(range(5)))
    version = m.version
    assert m.allocate_slots(b, 5) is None
    assert m.block_table(1) == [] and m.pool.num_free == 1 and m.version == version
    with pytest.raises(ValueError, match="needs >= 1 token"):
        m.allocate_slots(b, 0)


def test_prefix_hits_share_blocks_and_unused_cached_blocks_are_evicted_lru() -> None:
    m = _mgr(banks=1, per_bank=6)
    prefix = list(range(8))  # two full blocks
    a = _req(0, prefix + [70, 71])
    m.allocate_slots(a, 10)
    a.num_computed_tokens = 10
    m.cache_blocks(a)
    assert len(m.cached) == 2 and a.block_hashes[1] == block_hash(a.block_hashes[0], a.token_ids[4:8].tobytes())
    b = _req(1, prefix + [80, 81, 82])
    hits = m.get_computed_blocks(b)
    assert [(h.bank, h.slot) for h in hits] == [(0, 0), (0, 1)]
    m.allocate_slots(b, 3, hits)
    assert m.block_table(1)[:2] == m.block_table(0)[:2] and hits[0].ref_cnt == 2
    assert m.hit_rate == pytest.approx(8 / 11)  # b asked for its 11 tokens (a was never looked up)
    m.free(a)
    assert m.pool.owner_name(int(m.pool.owner[0, 0])) == CACHE_OWNER  # b still uses it; the cache owns it now
    m.free(b)
    assert list(m.evictable) == [(0, 1), (0, 0)]  # freed tail first: the tail is evicted first
    assert m.pool.num_free == 4  # the two unhashed tail blocks went back to the pool
    c = _req(2, list(range(200, 220)))
    m.allocate_slots(c, 20)  # 5 blocks: the 4 free slots, then the least recently freed cached block
    assert m.drain_log()[-1] == ("evict", None, [(0, 1)])
    assert list(m.cached.values())[0].slot == 0 and m.pool.num_free == 0


def test_a_request_is_never_served_its_whole_prompt_from_the_cache() -> None:
    m = _mgr(banks=1, per_bank=6)
    a = _req(0, list(range(8)))
    m.allocate_slots(a, 8)
    a.num_computed_tokens = 8
    m.cache_blocks(a)
    b = _req(1, list(range(8)))  # the same 8-token prompt: one block hit, the last token computed again
    assert len(m.get_computed_blocks(b)) == 1


def test_a_multi_block_grant_takes_the_queue_head_in_order_and_a_short_one_changes_nothing() -> None:
    pool = BlockPool(2, 3)
    alloc = FreeQueueAllocator(pool)
    pool.take("tenant", 1, 0, 0)  # taken behind the queue's back: skipped
    g = alloc.allocate("req0", 3, "prefill")
    assert g is not None and list(zip(g.banks, g.slots, strict=True)) == [(0, 0), (0, 1), (1, 1)]
    assert g.logical == [0, 1, 2] and alloc.table("req0") == [(0, 0), (0, 1), (1, 1)]
    assert [int(pool.logical[b, s]) for b, s in alloc.table("req0")] == [0, 1, 2]
    queue = list(alloc.free_queue)
    assert alloc.allocate("req1", 3, "prefill") is None, "two free blocks left"
    assert list(alloc.free_queue) == queue and pool.num_free == 2 and "req1" not in pool._owner_ids
    pool.check()
