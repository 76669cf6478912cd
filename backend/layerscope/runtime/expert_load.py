"""Where a data-parallel group's expert rows land (issue 20): per GPU, under vLLM's linear expert placement or after
EPLB's rebalance.

    ExpertRows(traffic, ep, eplb).per_gpu(n, balanced)  -> [ep] mean token-expert rows per GPU (one layer's mean)
    ExpertRows(...).busiest(n, balanced)                -> ExpertLoad: the busiest GPU's rows, the experts it reads

Linear placement: GPU g holds experts [g E/ep, (g+1) E/ep) (FusedMoE's expert map). EPLB (vLLM --enable-eplb,
vllm/distributed/eplb/rebalance_algo.py, DeepSeek's EPLB algorithm): each of the R redundant slots copies the expert
with the highest load per copy (replicate_experts), then the E + R physical experts are packed onto the GPUs,
heaviest first onto the lightest GPU with a free slot (balanced_packing); a copied expert's rows split evenly over
its copies. The loads EPLB rebalances from are the routing's expected rows per expert (what its load window would
measure under that routing): its best case.
"""

from __future__ import annotations

import heapq
from functools import lru_cache

import numpy as np

from layerscope.deployment import EplbSpec
from layerscope.runtime.routing import ExpertLoad, ExpertTraffic, expected_max


class ExpertRows:
    def __init__(self, traffic: ExpertTraffic, ep: int, eplb: EplbSpec | None) -> None:
        self.traffic, self.ep = traffic, ep
        self.redundant = eplb.num_redundant_experts if eplb is not None else 0
        self._rows = lru_cache(maxsize=4096)(self._rows_uncached)

    def expert_rows(self, n: int) -> np.ndarray:
        """[layers, E] expected rows per logical expert for a step of n tokens."""
        t = self.traffic
        p = t.sampled(n)
        return n * np.minimum(1.0, t.k * p)

    def _rows_uncached(self, n: int, balanced: bool) -> np.ndarray:
        rows = self.expert_rows(n)
        if not balanced or not self.redundant:
            return rows.reshape(len(rows), self.ep, -1).sum(axis=2)
        return np.array([rebalanced(layer, self.ep, self.redundant) for layer in rows])

    def per_gpu(self, n: int, balanced: bool) -> list[float]:
        return [round(float(x), 2) for x in self._rows(n, balanced).mean(axis=0)]

    def busiest(self, n: int, balanced: bool) -> ExpertLoad:
        """The busiest GPU's expected rows (each GPU's count ~ Normal(mean, mean), as the linear case's
        runtime/routing.py ExpertTraffic.load) and the distinct experts it reads."""
        base = self.traffic.load(n)
        if not balanced or not self.redundant:
            return base
        mean = self._rows(n, True)
        rows = expected_max(mean, mean)
        return ExpertLoad(min(float(n * self.traffic.k), rows), base.distinct)


def rebalanced(load: np.ndarray, ep: int, redundant: int) -> np.ndarray:
    """One layer's rows per GPU after replicate_experts + balanced_packing."""
    e = len(load)
    copies = np.ones(e)
    for _ in range(redundant):
        copies[int(np.argmax(load / copies))] += 1
    physical = np.repeat(load / copies, copies.astype(int))
    slots = -(-(e + redundant) // ep)
    packs = [(0.0, g) for g in range(ep)]  # (load, gpu): the lightest first
    room = [slots] * ep
    out = np.zeros(ep)
    for w in sorted(physical, reverse=True):
        full = []
        while True:
            lo, g = heapq.heappop(packs)
            if room[g]:
                break
            full.append((lo, g))
        room[g] -= 1
        out[g] = lo + w
        heapq.heappush(packs, (lo + w, g))
        for item in full:
            heapq.heappush(packs, item)
    return out
