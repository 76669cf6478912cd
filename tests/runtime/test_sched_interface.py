"""The scheduler's hand-off: every scheduler is a SchedulerInterface; StepResult names every token sampled."""

from __future__ import annotations

import numpy as np

from layerscope.runtime.chunks import ChunkScheduler
from layerscope.runtime.kv.block_pool import BlockPool
from layerscope.runtime.kv.cache_manager import KVCacheManager
from layerscope.runtime.kv.free_queue import FreeQueueAllocator
from layerscope.runtime.request import Request
from layerscope.runtime.sched_interface import SchedulerInterface, StepResult
from layerscope.runtime.scheduler import ArticleScheduler, Scheduler


def _cache() -> KVCacheManager:
    return KVCacheManager(FreeQueueAllocator(BlockPool(1, 64)), 16, False)


def _schedulers() -> list[SchedulerInterface]:
    chunks = ChunkScheduler(32, 16, 0.0, 16)
    return [Scheduler(_cache(), 64, 4), ArticleScheduler(_cache(), chunks, 4, lambda: 1e12)]


def test_each_step_samples_exactly_the_requests_whose_known_tokens_it_computed() -> None:
    for sched in _schedulers():
        reqs = [Request(i, 0.0, 40, 3, np.arange(43, dtype=np.int32) + 100 * i) for i in range(2)]
        for r in reqs:
            sched.add_request(r)
        tokens: dict[int, int] = {0: 0, 1: 0}
        steps = 0
        while sched.has_unfinished():
            out = sched.schedule()
            before = {r.request_id: r.num_output_tokens for r in reqs}
            res = sched.update_from_output(out)
            grew = {r.request_id for r in reqs if r.num_output_tokens > before[r.request_id]}
            assert set(res.num_sampled()) == grew, type(sched).__name__
            for rid, n in res.num_sampled().items():
                tokens[rid] += n
            ids = set(res.num_sampled())
            assert {r.request_id for r in res.first_token + res.finished} <= ids
            steps += 1
            assert steps < 100
        assert tokens == {0: 3, 1: 3}, type(sched).__name__
        assert sched.num_unfinished() == 0


def test_sampled_into_writes_each_requests_tokens_in_its_place_in_any_order() -> None:
    reqs = [Request(i, 0.0, 4, 2, np.zeros(6, dtype=np.int32)) for i in range(4)]
    ids = [3, 0, 2, 1]  # the step's order
    in_order, shuffled = [0] * 4, [0] * 4
    StepResult(sampled=[reqs[3], reqs[2]]).sampled_into(ids, in_order)
    StepResult(sampled=[reqs[1], reqs[3]]).sampled_into(ids, shuffled)  # out of step order: looked up
    assert in_order == [1, 0, 1, 0] and shuffled == [1, 0, 0, 1]



def test_the_running_pass_without_a_budget_test_sorts_the_running_requests_as_the_budgeted_pass() -> None:
    # at every step of a run (prefills, decodes filling and crossing 4-token blocks), the pass used when the budget
    # covers every running request gives the budgeted pass's decodes, contexts, block-needing decodes and prefills
    from layerscope.runtime.sched_interface import SchedulerOutput

    kv = KVCacheManager(FreeQueueAllocator(BlockPool(2, 64)), 4, True)
    s = Scheduler(kv, 24, 6)
    rng = np.random.default_rng(3)
    for i in range(6):
        n = 3 + 2 * i
        s.add_request(Request(i, 0.0, n, 9, rng.integers(0, 50, n + 9).astype(np.int32)))
    seen_crossing = False
    while s.has_unfinished():
        fast, slow = SchedulerOutput(), SchedulerOutput()
        decodes, prefills = s._plain_decodes(fast)
        decodes_b, prefills_b, left = s._plain_decodes_budgeted(slow, 1000)
        assert (fast.decodes, fast.decode_context, decodes, prefills) == \
            (slow.decodes, slow.decode_context, decodes_b, prefills_b)
        assert left == 1000 - len(fast.decodes)
        seen_crossing |= bool(decodes and fast.decodes)
        s.update_from_output(s.schedule())
    assert seen_crossing, "some step had plain decodes and decodes crossing a block"
