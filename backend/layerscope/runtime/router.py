"""The router in front of a deployment's replicas (deployment.router): which engine a request goes to.

    client ─▶ route(request) ─▶ replica i ─▶ its own scheduler and KV cache (runtime/serving.py)

A replica's load is its outstanding requests (sent to it and not yet finished: ServingInstance.num_unfinished),
what a router in front of `vllm serve` processes counts from the responses it is still streaming.

- round_robin: the next replica in turn (vLLM production stack's RoundRobinRouter, src/vllm_router/routers/
  routing_logic.py: `endpoints[self.req_id % len(endpoints)]`; SGLang router's round_robin policy).
- least_outstanding_requests: the replica with the fewest outstanding requests, the lowest index on ties (SGLang
  router's shortest-queue fallback; llm-d inference scheduler's queue scorer; the "least outstanding requests"
  algorithm of load balancers such as AWS ALB).
- prefix_cache_aware: SGLang router's cache_aware policy (sgl-router src/policies/cache_aware.rs): when the replicas
  are imbalanced (max load - min load > balance_abs_threshold and max load > balance_rel_threshold x min load) the
  least-loaded one; else the replica whose approximate tree matches the longest prefix of the prompt, if that match
  covers more than cache_threshold of it; else the replica with the smallest tree (the most cache room). The tree
  records what the router sent each replica (not what the replica still caches), one entry per full KV block, the
  oldest forgotten first past the replica's pool size (sgl-router evicts its tree by LRU past max_tree_size). llm-d's
  prefix-cache scorer keeps the same per-pod block-hash index, weighed against its load scorers.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

from layerscope.deployment import RouterName
from layerscope.runtime.kv.cache_manager import hash_blocks
from layerscope.runtime.loop import Route
from layerscope.runtime.request import Request

# sgl-router's launch defaults (src/main.rs: --cache-threshold 0.3, --balance-abs-threshold 64,
# --balance-rel-threshold 1.5): the share of the prompt a replica's tree must match to win the request, and the two
# thresholds that, both crossed, make the replicas "imbalanced" (shortest queue then).
CACHE_THRESHOLD = 0.3
BALANCE_ABS_THRESHOLD = 64
BALANCE_REL_THRESHOLD = 1.5


class Replica(Protocol):
    """What the router sees of an engine: its outstanding requests."""

    def num_unfinished(self) -> int: ...


class RoundRobin:
    def __init__(self, replicas: Sequence[Replica]) -> None:
        self.n = len(replicas)
        self.count = 0

    def __call__(self, req: Request) -> int:
        i = self.count % self.n
        self.count += 1
        return i


class LeastOutstandingRequests:
    def __init__(self, replicas: Sequence[Replica]) -> None:
        self.replicas = replicas

    def __call__(self, req: Request) -> int:
        return least_loaded([r.num_unfinished() for r in self.replicas])


def least_loaded(loads: list[int]) -> int:
    return min(range(len(loads)), key=loads.__getitem__)


class PrefixCacheAware:
    """`block_size`: the replicas' KV block (the tree's unit); `capacity_blocks`: how many blocks a replica's tree
    remembers (its KV pool's size: what it could still hold)."""

    def __init__(self, replicas: Sequence[Replica], block_size: int, capacity_blocks: int,
                 cache_threshold: float = CACHE_THRESHOLD, balance_abs: int = BALANCE_ABS_THRESHOLD,
                 balance_rel: float = BALANCE_REL_THRESHOLD) -> None:
        self.replicas = replicas
        self.block_size = block_size
        self.capacity = capacity_blocks
        self.cache_threshold = cache_threshold
        self.balance_abs = balance_abs
        self.balance_rel = balance_rel
        self.trees: list[OrderedDict[bytes, None]] = [OrderedDict() for _ in replicas]  # block hash, oldest first
        self.cache_routed = 0  # requests sent to the replica matching them (the rest: imbalance or no match)
        self.balance_routed = 0

    def __call__(self, req: Request) -> int:
        loads = [r.num_unfinished() for r in self.replicas]
        hash_blocks(req, self.block_size)
        hashes = req.block_hashes[: req.input_len // self.block_size]  # the prompt's full blocks
        if self.imbalanced(loads):
            i = least_loaded(loads)
            self.balance_routed += 1
        else:
            matched = [self.match(tree, hashes) for tree in self.trees]
            best = max(range(len(matched)), key=lambda j: (matched[j], -loads[j]))  # ties: the less loaded
            if req.input_len and matched[best] * self.block_size / req.input_len > self.cache_threshold:
                i = best
                self.cache_routed += 1
            else:
                i = min(range(len(self.trees)), key=lambda j: (len(self.trees[j]), loads[j]))
        self.insert(i, hashes)
        return i

    def imbalanced(self, loads: list[int]) -> bool:
        lo, hi = min(loads), max(loads)
        return hi - lo > self.balance_abs and hi > self.balance_rel * lo

    @staticmethod
    def match(tree: OrderedDict[bytes, None], hashes: list[bytes]) -> int:
        """How many leading blocks of the prompt the tree holds (a block's hash covers its whole prefix)."""
        n = 0
        for h in hashes:
            if h not in tree:
                break
            n += 1
        return n

    def insert(self, i: int, hashes: list[bytes]) -> None:
        tree = self.trees[i]
        for h in hashes:
            tree[h] = None
            tree.move_to_end(h)
        while len(tree) > self.capacity:
            tree.popitem(last=False)


def make_route(name: RouterName, replicas: Sequence[Replica], block_size: int, capacity_blocks: int) -> Route:
    if name == "round_robin":
        return RoundRobin(replicas)
    if name == "least_outstanding_requests":
        return LeastOutstandingRequests(replicas)
    return PrefixCacheAware(replicas, block_size, capacity_blocks)
