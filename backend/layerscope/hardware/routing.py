"""How a router's choices load the GPUs of an expert-parallel MoE: the busiest rank's share of the token-expert rows;
and the routing spec a scenario's workload.routing names (check_routing: its syntax, no file read).

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
import re
from statistics import NormalDist

import numpy as np

# The default, from measured expert traffic of a Qwen3 MoE model: Qwen3-30B-A3B (128 experts, top-8) under
# llama.cpp's imatrix counts (mcp-tool-shop-org gpu-container handbook, "Routing De-risk": a diverse prose/code/math
# workload of ~1k tokens needs 65 of 128 experts (51%) for 90% of a layer's routing mass, concentration 1 - H/ln E
# = 0.111, top expert 4.3%; a narrow 8k-token Python workload 45%, 0.154, 6.3%). AIConfigurator's power law at
# ALPHA 0.7 gives 48%, 0.11 and ~3% at 1k tokens (tests/runtime/test_routing.py); its own tables' 1.01 and 1.2
# (51%: 34% and 27%) are far more skewed than this router. Uniform routing would need 90% of the experts.
DEFAULT_ROUTING = "power_law:0.7"
ROUTING_PATTERN = r"^(uniform|balanced|power_law:[0-9]+(\.[0-9]+)?|file:[A-Za-z0-9_][A-Za-z0-9_.-]*\.json)$"
MAX_ALPHA = 4.0  # beyond it one expert takes nearly every token: not a router anyone trains
ROUTING_DIR = "routing"  # under the shipped scenarios folder: the only place a count file is read from
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


class RoutingError(ValueError):
    """A routing spec or count file could not be used; the message names it and what is wrong."""


def check_routing(text: str) -> str:
    """`text` if it is a routing spec (ROUTING_PATTERN, ALPHA in range); RoutingError naming the problem. Reads no
    file: a count file is read when a run starts."""
    if not re.match(ROUTING_PATTERN, text):
        raise RoutingError(f"routing {text[:80]!r}: choose uniform, balanced, power_law:ALPHA or file:NAME.json "
                           f"(a file name under scenarios/{ROUTING_DIR}/)")
    kind, _, arg = text.partition(":")
    if kind == "power_law" and (not 0.0 < float(arg) <= MAX_ALPHA or float(arg) == 1.0):
        raise RoutingError(f"routing {text!r}: ALPHA must be in (0, {MAX_ALPHA:g}] and not 1 (use 1.01)")
    return text


TABLE_DRAWS = 64  # draws of aiconfigurator-core's generator averaged for its rows' distinct experts (within ~1)


@functools.lru_cache(maxsize=1024)  # pure; a serving run asks again for every step's token count
def table_distinct_experts(tokens: int, experts: int, top_k: int, alpha: float) -> float:
    """Distinct experts a measured power-law MoE row reads: aiconfigurator-core's collectors do not sample a
    router, they set each expert's token count (collector/helper.py _generate_power_law_distribution, ep 1):
    weights from sample_power_law on [0.01, 2] (on [1, 0.8 tokens] when tokens x top_k > experts), counts
    round(share x tokens x top_k) capped at `tokens`, the cap's overflow and any shortfall added one at a time to the
    smallest count (an expert at 0 first), an excess taken one at a time from the largest. Rounding up small shares
    and filling the zeros spreads a small step over more experts than a router drawing from the same weights
    (runtime/routing.py ExpertTraffic.distinct): at 16 tokens x top-8 of 128, alpha 0.7, 77 against 63.
    Exact in distribution; the mean of TABLE_DRAWS seeded draws."""
    rng = np.random.default_rng([tokens, experts, top_k, round(alpha * 1000)])
    lo, hi = (1.0, 0.8 * tokens) if tokens * top_k > experts else (0.01, 2.0)
    hi = max(hi, lo * (1 + 1e-9))
    a = 1.0 - alpha
    w = ((hi**a - lo**a) * rng.random((TABLE_DRAWS, experts)) + lo**a) ** (1.0 / a)
    target = tokens * top_k
    counts = np.minimum(np.round(w / w.sum(axis=1, keepdims=True) * target), tokens)
    short = target - counts.sum(axis=1)  # the cap's overflow and the rounding's shortfall (< 0: an excess)
    nonzero = (counts > 0).sum(axis=1)
    filled = np.minimum(np.maximum(short, 0), experts - nonzero)  # increments go to the zeros while any is left
    above_one = (counts - 1).clip(min=0).sum(axis=1)  # decrements take from the largest: a 1 goes only when all are 1
    emptied = np.maximum(0, -short - above_one)
    return float((nonzero + filled - emptied).mean())
