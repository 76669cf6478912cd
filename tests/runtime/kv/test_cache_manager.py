"""KVCacheManager: block tables over the pool, the free-block queue, prefix-cache hits and LRU eviction,
with exact slots."""

from __future__ import annotations

import numpy as np
import pytest

from layerscope.runtime.kv.block_pool import BlockPool
from layerscope.runtime.kv.cache_manager import CACHE_OWNER, KVCacheManager, block_hash, cache_filled_block
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
    m.allocate_slots(a, 10)  # the blocks its 10 tokens fill are cached at allocation, before they are computed
    assert len(m.cached) == 2 and a.block_hashes[1] == block_hash(a.block_hashes[0], a.token_ids[4:8].tobytes())
    a.num_computed_tokens = 10
    b = _req(1, prefix + [80, 81, 82])
    hits = m.get_computed_blocks(b)
    assert [(h.bank, h.slot) for h in hits] == [(0, 0), (0, 1)]
    m.allocate_slots(b, 3, hits)
    m.record_admission(b, 8)
    assert m.block_table(1)[:2] == m.block_table(0)[:2] and hits[0].ref_cnt == 2
    assert m.hit_rate == pytest.approx(8 / 11)  # b asked for its 11 tokens (a was never looked up)
    m.free(a)
    assert m.pool.owner_name(int(m.pool.owner[0, 0])) == CACHE_OWNER  # b still uses it; the cache owns it now
    m.free(b)
    assert list(m.evictable) == [(0, 1), (0, 0)]  # freed tail first: the tail is evicted first
    assert m.pool.num_free == 4  # the two unhashed tail blocks went back to the pool
    c = _req(2, list(range(200, 220)))
    m.drain_log()
    m.allocate_slots(c, 20)  # 5 blocks: the queue's head, up to the least recently freed cached block
    assert m.drain_log() == [("evict", None, [(0, 1)])]
    assert [blk.slot for same in m.cached.values() for blk in same if blk.ref_cnt == 0] == [0]
    assert m.pool.num_free == 0
    m.pool.check()


def test_a_request_is_never_served_its_whole_prompt_from_the_cache() -> None:
    m = _mgr(banks=1, per_bank=6)
    a = _req(0, list(range(8)))
    m.allocate_slots(a, 8)
    b = _req(1, list(range(8)))  # the same 8-token prompt: one block hit, the last token computed again
    assert len(m.get_computed_blocks(b)) == 1


def test_blocks_a_step_fills_are_hit_by_a_request_admitted_after_it_in_the_same_step() -> None:
    m = _mgr(banks=2, per_bank=8)
    prefix = list(range(12))  # three full blocks
    a = _req(0, prefix + [50])
    m.allocate_slots(a, 13)  # scheduled, not yet computed
    b = _req(1, prefix + [60, 61])
    assert len(m.get_computed_blocks(b)) == 3  # vLLM caches at allocate_slots, not when the step ends


def test_duplicate_cached_blocks_are_kept_and_the_first_is_served() -> None:
    m = _mgr(banks=1, per_bank=8)
    a = _req(0, list(range(8)))
    b = _req(1, list(range(8)))
    m.allocate_slots(a, 8)
    m.allocate_slots(b, 8)  # computed again without the cache (a prompt's last block is never a hit)
    h = a.block_hashes[1]
    assert [(x.bank, x.slot) for x in m.cached[h]] == [(0, 1), (0, 3)]  # both cached, vLLM does not de-duplicate
    c = _req(2, list(range(8)) + [9, 9, 9, 9, 9])
    assert [(x.bank, x.slot) for x in m.get_computed_blocks(c)] == [(0, 0), (0, 1)]  # the first of each
    m.free(a)
    m.free(b)
    assert list(m.evictable) == [(0, 1), (0, 0), (0, 3), (0, 2)]  # every copy stays until evicted
    assert m.drain_log()[1] == ("keep", 0, [(0, 1), (0, 0)])  # a's blocks now belong to the prefix cache
    m.pool.check()


def test_one_free_queue_evicts_a_cached_block_freed_before_a_plain_one() -> None:
    m = _mgr(banks=1, per_bank=4)
    a = _req(0, [1, 2, 3, 4])  # one full block: cached
    b = _req(1, [7, 8, 9])  # a partial block: never cached
    m.allocate_slots(a, 4)
    m.allocate_slots(b, 3)
    m.free(a)
    m.free(b)
    assert list(m.allocator.free_queue) == [(0, 2), (0, 3), (0, 0), (0, 1)]
    m.drain_log()
    c = _req(2, list(range(100, 112)))
    m.allocate_slots(c, 12)  # three blocks from the head: the cached one goes although (0, 1) is free
    assert m.block_table(2) == [(0, 2), (0, 3), (0, 0)]
    assert m.drain_log() == [("evict", None, [(0, 0)])] and a.block_hashes[0] not in m.cached
    m.pool.check()


def test_a_hit_takes_an_unused_cached_block_out_of_the_free_queue() -> None:
    m = _mgr(banks=1, per_bank=4)
    a = _req(0, [1, 2, 3, 4, 5])
    m.allocate_slots(a, 5)
    m.free(a)
    assert (0, 0) in m.allocator.free_queue
    b = _req(1, [1, 2, 3, 4, 6, 7])
    hits = m.get_computed_blocks(b)
    m.allocate_slots(b, 2, hits)
    assert (0, 0) not in m.allocator.free_queue and not m.evictable and hits[0].ref_cnt == 1


def test_prefix_stats_count_admissions_and_keep_preempted_requests_apart() -> None:
    m = _mgr()
    a = _req(0, list(range(10)))
    m.record_admission(a, 8)
    a.num_preemptions = 1
    m.record_admission(a, 4)  # re-admitted after a preemption: its own counters
    s = m.stats
    assert (s.requests, s.queries, s.hits) == (1, 10, 8)
    assert (s.preempted_requests, s.preempted_queries, s.preempted_hits) == (1, 10, 4)
    assert m.hit_rate == pytest.approx(0.8)
    off = _mgr(caching=False)
    off.record_admission(a, 0)
    assert off.stats.requests == 0 and off.hit_rate == 0.0


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


def test_a_finished_request_hands_only_its_own_kept_slots_to_the_cache() -> None:
    m = _mgr(banks=1, per_bank=8)
    prefix = list(range(8))  # two full blocks, cached when allocated
    a = _req(0, prefix + [70])
    m.allocate_slots(a, 9)
    a.num_computed_tokens = 9
    b = _req(1, prefix + [80])
    hits = m.get_computed_blocks(b)
    m.allocate_slots(b, 1, hits)  # shares a's two cached blocks, adds its own third
    released = m.free(a)  # a's third block is unhashed: released; its two cached blocks stay (b holds them)
    assert released == [(0, 2)]
    assert [m.pool.owner_name(int(m.pool.owner[0, s])) for s in (0, 1)] == [CACHE_OWNER, CACHE_OWNER]
    assert m.drain_log()[-1] == ("keep", 0, [(0, 1), (0, 0)])  # tail first
    b.num_computed_tokens = 9
    m.free(b)  # b never owned the shared slots: nothing of theirs is kept again under its name
    assert m.drain_log() == [("free", 1, [(0, 3)])]
    assert [m.pool.owner_name(int(m.pool.owner[0, s])) for s in (0, 1)] == [CACHE_OWNER, CACHE_OWNER]
    m.pool.check()


def test_the_manager_and_its_free_queue_are_freed_without_the_cyclic_collector() -> None:
    import gc
    import weakref

    m = _mgr()
    m.allocate_slots(_req(0, list(range(10))), 10)
    gone = weakref.ref(m)
    was = gc.isenabled()
    gc.disable()
    try:
        del m
        assert gone() is None  # no reference cycle through the queue's reclaim hook: reference counting frees it
    finally:
        if was:
            gc.enable()


def _decode_to_end(m: KVCacheManager, r: Request, fill: str) -> None:
    """Prefill r's prompt, then decode its outputs one token a step as the scheduler does: a block-boundary token
    through allocate_slots, any other through `fill` ("cache_blocks" or "cache_filled_block") once it fills a block."""
    m.allocate_slots(r, r.input_len)
    r.num_computed_tokens = r.input_len
    r.num_output_tokens = 1
    while r.num_output_tokens < r.output_len:
        c = r.num_computed_tokens
        if c % BS == 0:
            assert m.allocate_slots(r, 1) is not None
        elif (c + 1) % BS == 0:
            if fill == "cache_blocks":
                m.cache_blocks(r, c + 1)
            else:
                cache_filled_block(m, r, c + 1)
        r.num_computed_tokens += 1
        r.num_output_tokens += 1


@pytest.mark.parametrize("prompt", [2, 4, 6, 9])
def test_a_decode_filling_its_block_caches_what_the_general_walk_caches(prompt: int) -> None:
    walked, direct = _mgr(banks=2, per_bank=8), _mgr(banks=2, per_bank=8)
    a, b = _req(0, list(range(prompt)), out=13), _req(0, list(range(prompt)), out=13)
    _decode_to_end(walked, a, "cache_blocks")
    _decode_to_end(direct, b, "cache_filled_block")
    assert b.block_hashes == a.block_hashes and len(a.block_hashes) == (prompt + 12) // BS
    assert {h: [(x.bank, x.slot) for x in bs] for h, bs in direct.cached.items()} == \
        {h: [(x.bank, x.slot) for x in bs] for h, bs in walked.cached.items()}
    assert direct.num_cached_blocks == walked.num_cached_blocks
    assert direct.block_table(0) == walked.block_table(0)


def test_a_filled_block_is_not_cached_without_prefix_caching() -> None:
    m = _mgr(caching=False)
    r = _req(0, [1, 2, 3], out=4)
    m.allocate_slots(r, 3)
    r.num_computed_tokens, r.num_output_tokens = 3, 1
    cache_filled_block(m, r, 4)
    assert not m.cached and not r.block_hashes


def _at_boundary(m: KVCacheManager, rid: int, prompt: list[int]) -> Request:
    """A request whose prompt fills whole blocks, computed and one token sampled: its next token needs a block."""
    r = _req(rid, prompt)
    m.allocate_slots(r, len(prompt))
    r.num_computed_tokens, r.num_output_tokens = len(prompt), 1
    return r


def _boundary_state() -> tuple[KVCacheManager, list[Request]]:
    m = _mgr(banks=1, per_bank=5)  # slot 0: the cached block; 1-3: the two requests'; 4: the last fresh one
    gone = _req(9, list(range(200, 204)))  # one cached block, freed: the queue's tail evicts it when reached
    m.allocate_slots(gone, 4)
    m.free(gone)
    return m, [_at_boundary(m, 0, list(range(8))), _at_boundary(m, 1, list(range(50, 54)))]


def test_boundary_blocks_in_one_call_match_one_allocate_slots_each() -> None:
    one_by_one, reqs = _boundary_state()
    expected = [one_by_one.allocate_slots(r, 1) for r in reqs]
    batched, reqs2 = _boundary_state()
    got = batched.allocate_boundary_blocks(reqs2)
    assert got is not None
    for a, b in zip(expected, got, strict=True):
        assert a is not None
        assert [(x.bank, x.slot) for x in a.new_blocks] == [(x.bank, x.slot) for x in b.new_blocks]
        assert a.evicted == b.evicted
    assert [a.evicted for a in got] == [[], [(0, 0)]]  # the second one's block is the evicted cached one
    assert [one_by_one.block_table(r.request_id) for r in reqs] == [batched.block_table(r.request_id) for r in reqs2]
    assert one_by_one.version == batched.version and one_by_one.drain_log() == batched.drain_log()
    batched.pool.check()


def test_boundary_blocks_are_all_or_nothing_when_the_pool_is_short() -> None:
    m = _mgr(banks=1, per_bank=4, caching=False)
    reqs = [_at_boundary(m, 0, list(range(4))), _at_boundary(m, 1, list(range(50, 58)))]  # 3 of 4 blocks taken
    version, tables = m.version, [m.block_table(r.request_id) for r in reqs]
    assert m.allocate_boundary_blocks(reqs) is None  # two needed, one free: nothing taken
    assert m.version == version and [m.block_table(r.request_id) for r in reqs] == tables and m.pool.num_free == 1
