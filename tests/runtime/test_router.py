"""runtime/router.py: the router's policies on hand-built replicas and requests."""

from __future__ import annotations

import numpy as np

from layerscope.runtime.kv.cache_manager import hash_blocks
from layerscope.runtime.request import Request
from layerscope.runtime.router import LeastOutstandingRequests, PrefixCacheAware, RoundRobin, make_route

BS = 16


class FakeReplica:
    def __init__(self, load: int = 0) -> None:
        self.load = load

    def num_unfinished(self) -> int:
        return self.load


def _req(rid: int, prefix: int, prefix_blocks: int = 8, own_blocks: int = 2) -> Request:
    """A prompt of `prefix_blocks` blocks shared by every request of prefix group `prefix`, then its own."""
    shared = np.full(prefix_blocks * BS, 1000 + prefix, dtype=np.int32)
    own = np.arange(own_blocks * BS, dtype=np.int32) + 100_000 * (rid + 1)
    ids = np.concatenate([shared, own, np.zeros(4, dtype=np.int32)])
    return Request(rid, 0.0, len(shared) + len(own), 4, ids)


def test_round_robin_goes_round_in_order() -> None:
    route = RoundRobin([FakeReplica(), FakeReplica(), FakeReplica()])
    assert [route(_req(i, 0)) for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_least_outstanding_picks_the_emptiest_lowest_index_on_ties() -> None:
    replicas = [FakeReplica(5), FakeReplica(2), FakeReplica(2), FakeReplica(9)]
    route = LeastOutstandingRequests(replicas)
    assert route(_req(0, 0)) == 1
    replicas[1].load = 3
    assert route(_req(1, 0)) == 2
    replicas[0].load = 0
    assert route(_req(2, 0)) == 0


def test_prefix_aware_sends_a_prefix_back_to_its_holder() -> None:
    replicas = [FakeReplica(), FakeReplica(), FakeReplica()]
    route = PrefixCacheAware(replicas, BS, capacity_blocks=1000)
    first = [route(_req(i, prefix=i)) for i in range(3)]  # three new prefixes: each to the emptiest tree
    assert sorted(first) == [0, 1, 2]
    for rid, prefix in ((3, 1), (4, 2), (5, 0), (6, 1)):
        assert route(_req(rid, prefix)) == first[prefix]
    assert route.cache_routed == 4 and route.balance_routed == 0


def test_prefix_aware_ignores_a_match_below_the_cache_threshold() -> None:
    replicas = [FakeReplica(), FakeReplica()]
    route = PrefixCacheAware(replicas, BS, capacity_blocks=1000, cache_threshold=0.5)
    assert route(_req(0, prefix=7, prefix_blocks=8)) == 0
    assert route(_req(1, prefix=7, prefix_blocks=8)) == 0  # 8 of 10 blocks match: over the threshold
    # 2 shared blocks of 10: 20% matched, under 50%: the smaller tree (replica 1) takes it
    assert route(_req(2, prefix=7, prefix_blocks=2, own_blocks=8)) == 1


def test_prefix_aware_falls_back_to_the_emptiest_under_imbalance() -> None:
    replicas = [FakeReplica(0), FakeReplica(0)]
    route = PrefixCacheAware(replicas, BS, capacity_blocks=1000, balance_abs=4, balance_rel=1.5)
    assert route(_req(0, prefix=3)) == 0
    replicas[0].load = 10  # holder loaded: 10 - 5 > 4 and 10 > 1.5 x 5
    replicas[1].load = 5
    assert route(_req(1, prefix=3, prefix_blocks=4, own_blocks=6)) == 1  # replica 1 now holds 4 of its blocks
    assert route.balance_routed == 1
    replicas[1].load = 8  # 10 - 8 <= 4: balanced again, the longer holder wins
    assert route(_req(2, prefix=3)) == 0


def test_prefix_aware_forgets_the_oldest_blocks_past_the_pool() -> None:
    route = PrefixCacheAware([FakeReplica(), FakeReplica()], BS, capacity_blocks=12)
    held = _hashes(_req(0, prefix=1))
    route.insert(0, held)
    assert PrefixCacheAware.match(route.trees[0], held) == 10
    route.insert(0, _hashes(_req(1, prefix=2, prefix_blocks=3, own_blocks=2)))  # 5 newer blocks: 15 > 12
    assert len(route.trees[0]) == 12
    assert PrefixCacheAware.match(route.trees[0], held) == 0  # its first blocks went first


def _hashes(req: Request) -> list[bytes]:
    hash_blocks(req, BS)
    return req.block_hashes[: req.input_len // BS]


def test_make_route_names_each_policy() -> None:
    replicas = [FakeReplica(), FakeReplica()]
    assert isinstance(make_route("round_robin", replicas, BS, 10), RoundRobin)
    assert isinstance(make_route("least_outstanding_requests", replicas, BS, 10), LeastOutstandingRequests)
    assert isinstance(make_route("prefix_cache_aware", replicas, BS, 10), PrefixCacheAware)
