"""How a router's choices load the GPUs of an expert-parallel MoE: the busiest rank's share of the token-expert rows.

    busiest_rank_share(tokens, experts, top_k, ep, routing) -> share of the tokens x top_k rows on the busiest rank

routing (MoeOp.routing, `layerscope kernel`'s "routing", and what workload.routing sets):
- "balanced": every expert gets the same number of rows (aiconfigurator-core's "balanced" rows): 1/ep.
- "uniform": each token picks top_k distinct experts uniformly at random. A rank's rows are then a sum of
  tokens x top_k draws landing on its E/ep experts with probability 1/ep, so mean tokens*top_k/ep and variance
  tokens*top_k*(1/ep)(1-1/ep)(E-top_k)/(E-1) (without replacement within a token); the busiest of ep such ranks sits
  at the expected maximum of ep normal draws (Blom's approximation, Phi^-1((ep - 0.375)/(ep + 0.25))) above the mean.
- "power_law:ALPHA": expert i's popularity ~ 1/i^ALPHA (aiconfigurator-core's power_law_ALPHA routing); which
  experts share a rank is not known, so the popularity ranks are placed at random (vLLM places experts contiguously
  by id; ids and popularity are unrelated), averaged over PLACEMENTS seeded placements, plus the same sampling noise.
- "counts:c0,c1,...": measured per-expert token counts (an expert distribution recorder's output), placed
  contiguously by expert id as vLLM's default expert map does.
vLLM's expert-map path still runs its align/sort, activation and sum over all tokens x top_k rows on every rank;
only the expert GEMMs see the busiest rank's share (runtime/vllm.py moe_kernels).
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

import numpy as np

PLACEMENTS = 64  # random expert placements averaged for a power law (the mean settles to ~1% by 64)
ROUTINGS = ("balanced", "uniform", "power_law:ALPHA", "counts:C0,C1,...")


def parse_routing(routing: str) -> tuple[str, tuple[float, ...]]:
    """-> (kind, parameters): ("balanced", ()), ("uniform", ()), ("power_law", (alpha,)), ("counts", counts).
    ValueError naming the problem otherwise."""
    if routing in ("balanced", "uniform"):
        return routing, ()
    kind, _, arg = routing.partition(":")
    try:
        values = tuple(float(v) for v in arg.split(",")) if arg else ()
    except ValueError:
        values = ()
    if kind == "power_law" and len(values) == 1 and 0 <= values[0] < 16:
        return kind, values
    if kind == "counts" and values and all(v >= 0 and math.isfinite(v) for v in values) and sum(values) > 0:
        return kind, values
    raise ValueError(f"routing {routing!r}: expected one of {', '.join(ROUTINGS)} (ALPHA in [0, 16), counts >= 0)")


def expert_popularity(experts: int, routing: str) -> np.ndarray:
    """Per expert, the probability that one of a token's picks is it (sums to 1), in popularity order for a power
    law, in expert-id order for counts."""
    kind, values = parse_routing(routing)
    if kind == "counts":
        if len(values) != experts:
            raise ValueError(f"routing counts: {len(values)} counts for {experts} experts")
        c = np.asarray(values, dtype=float)
        return c / c.sum()
    alpha = values[0] if kind == "power_law" else 0.0
    w = 1.0 / np.arange(1, experts + 1, dtype=float) ** alpha
    return w / w.sum()


@functools.lru_cache(maxsize=1024)  # pure; a serving run asks again for every step's token count
def busiest_rank_share(tokens: int, experts: int, top_k: int, ep: int, routing: str = "uniform") -> float:
    if ep <= 1 or tokens <= 0:
        return 1.0
    kind, _ = parse_routing(routing)
    if kind == "balanced":
        return 1.0 / ep
    rows = tokens * top_k
    per_rank = experts // ep
    hit = np.minimum(1.0, top_k * expert_popularity(experts, routing))  # P(a token picks expert i)
    if kind == "counts":
        placements = [np.arange(experts)]
    elif kind == "uniform":
        placements = [np.arange(experts)]
    else:
        rng = np.random.default_rng(0)
        placements = [rng.permutation(experts) for _ in range(PLACEMENTS)]
    z = NormalDist().inv_cdf((ep - 0.375) / (ep + 0.25))
    shares = []
    for order in placements:
        p_rank = hit[order].reshape(ep, per_rank).sum(axis=1) / hit.sum()  # a row's chance of landing on each rank
        mean = rows * p_rank
        sd = np.sqrt(rows * p_rank * (1 - p_rank) * (experts - top_k) / max(1, experts - 1))
        shares.append(float(np.max(mean + z * sd)) / rows)
    return min(1.0, max(1.0 / ep, float(np.mean(shares))))
