"""Expert routing: how a step's tokens spread over the experts, and what that does to the MoE's work.

    workload.routing   uniform          every expert equally likely (each token picks k of E at random)
                       balanced         every step's picks spread evenly (AIConfigurator's "balanced" rows)
                       power_law:ALPHA  per layer, expert weights drawn from a bounded power law x^-ALPHA, as
                                        AIConfigurator's collectors draw them (collector/helper.py
                                        sample_power_law / _generate_power_law_distribution): on [1, 0.8 n]
                                        for a step of n tokens when n k > E, else on [0.01, 2]
                       file:NAME.json   measured counts per layer and expert, a shipped file under
                                        scenarios/routing/: SGLang's expert distribution recorder ("stat"
                                        mode's {"logical_count": [steps?][layers][experts]}, which SGLang's
                                        --init-expert-location also reads as JSON) or vLLM's EPLB load window
                                        ({"global_expert_load_window" | "expert_load_window": ...}, shape
                                        [window?][layers][experts])

From the popularity p (per layer, summing to 1 over the experts; a token picks expert i with q = min(1, k p_i)):
the distinct experts a step of n tokens reads, sum_i 1 - (1 - q_i)^n (uniform: E (1 - (1 - k/E)^n), the old
assumption); under expert parallelism (vLLM's linear placement: rank r holds experts [r E/ep, (r+1) E/ep)) the
busiest rank's token-expert rows and distinct experts, the expected maximum over the ranks of their counts
(normal approximation of each rank's count; exact for balanced). The busiest rank sets the MoE's time: the others
wait for it at the all-reduce.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from layerscope.hardware.routing import DEFAULT_ROUTING, ROUTING_DIR, RoutingError, check_routing
from layerscope.paths import scenarios_dir

if TYPE_CHECKING:
    from layerscope.model.config import ModelConfig
    from layerscope.scenario import ScenarioSpec

MAX_ROUTING_FILE_BYTES = 8 * 1024 * 1024  # a count file is read whole: 8 MiB holds 94 layers x 512 experts many times
# The busiest rank's load is averaged over this many of the layers' drawn popularities, not all 94: the mean of 16
# independent layers is within ~4% of the 94's (tests/runtime/test_routing.py) at a sixth of the cost per step size.
EP_LAYER_SAMPLES = 16


@dataclass(frozen=True)
class Routing:
    kind: str  # uniform | balanced | power_law | file
    alpha: float = 0.0
    counts: np.ndarray | None = None  # file: [layers, experts] token-expert picks

    @property
    def table_label(self) -> str:
        """The routing as the measured MoE tables name it (hardware/routing.py): a count file is its per-expert
        counts summed over the layers."""
        if self.kind == "power_law":
            return f"power_law:{self.alpha:g}"
        if self.counts is not None:
            return "counts:" + ",".join(f"{c:.6g}" for c in self.counts.sum(axis=0))
        return self.kind

    @property
    def assumed(self) -> str:
        """The ExpertsEvent label: balanced for the even spreads, skewed for the rest."""
        return "balanced" if self.kind in ("uniform", "balanced") else "skewed"


def parse_routing(text: str, directory: Path | None = None) -> Routing:
    """A routing spec string (check_routing); a file is read from `directory` (default scenarios/routing/)."""
    kind, _, arg = check_routing(text).partition(":")
    if kind in ("uniform", "balanced"):
        return Routing(kind)
    if kind == "power_law":
        return Routing("power_law", alpha=float(arg))
    return Routing("file", counts=load_counts(arg, directory or scenarios_dir() / ROUTING_DIR))


def load_counts(name: str, directory: Path) -> np.ndarray:
    """Counts per layer and expert from a JSON file named `name` directly inside `directory` (no other path)."""
    base = directory.resolve()
    path = (base / name).resolve()
    if path.parent != base:
        raise RoutingError(f"routing file {name!r}: only a file name inside the shipped {ROUTING_DIR}/ folder")
    try:
        size = path.stat().st_size
        if size > MAX_ROUTING_FILE_BYTES:
            raise RoutingError(f"routing file {name!r}: {size} bytes; the limit is {MAX_ROUTING_FILE_BYTES}")
        data = json.loads(path.read_bytes())
    except OSError as e:
        raise RoutingError(f"routing file {name!r}: cannot read it: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise RoutingError(f"routing file {name!r}: not JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise RoutingError(f"routing file {name!r}: nested too deeply to be counts") from None
    if isinstance(data, dict):
        keys = [k for k in ("logical_count", "global_expert_load_window", "expert_load_window") if k in data]
        if not keys:
            raise RoutingError(f"routing file {name!r}: needs a 'logical_count' (SGLang) or "
                               "'global_expert_load_window' (vLLM EPLB) array")
        data = data[keys[0]]
    try:
        counts = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError):
        raise RoutingError(f"routing file {name!r}: the counts are not a rectangular array of numbers") from None
    if counts.ndim == 3:  # [steps or window, layers, experts]: the whole recording
        counts = counts.sum(axis=0)
    if counts.ndim == 1:
        counts = counts[None, :]
    if counts.ndim != 2 or counts.shape[1] < 2 or not np.isfinite(counts).all() or (counts < 0).any():
        raise RoutingError(f"routing file {name!r}: want non-negative counts shaped [layers][experts], "
                           f"got shape {list(counts.shape)}")
    counts = counts[counts.sum(axis=1) > 0]
    if len(counts) == 0:
        raise RoutingError(f"routing file {name!r}: every count is zero")
    return counts


@dataclass(frozen=True)
class ExpertLoad:
    """One step's MoE work on the busiest GPU (the whole MoE when ep = 1)."""

    rows: float  # token-expert pairs it computes
    distinct: float  # distinct experts whose weights it reads


class ExpertTraffic:
    """A routing applied to one model's MoE (E experts, top-k, `layers` MoE layers) under expert parallelism ep.

    Deterministic per seed: power_law draws its layers' weights from numpy's generator seeded with (seed, n)."""

    def __init__(self, routing: Routing, num_experts: int, top_k: int, layers: int, ep: int = 1, seed: int = 0):
        if routing.counts is not None and routing.counts.shape[1] != num_experts:
            raise RoutingError(f"the routing file counts {routing.counts.shape[1]} experts; the model has "
                               f"{num_experts}")
        self.routing, self.e, self.k, self.layers, self.ep, self.seed = routing, num_experts, top_k, layers, ep, seed
        self.load = lru_cache(maxsize=None)(self._load)
        self.distinct = lru_cache(maxsize=None)(self._distinct)
        # the busiest rank's load and a DP step's rows per GPU (runtime/expert_load.py) read the same sampled
        # layers of a step size, one after the other: 64 step sizes of 16 x E floats (1 MiB at E = 128) at most
        self.sampled = lru_cache(maxsize=64)(self._sampled)

    def popularity(self, n: int, layers: int | None = None) -> np.ndarray:
        """[layers, E] share of a step's token-expert picks per expert; `layers`: only the first that many (the
        rows the whole draw starts with, the same floats: the generator fills the array row by row, and each row
        is normalised on its own)."""
        r = self.routing
        if r.kind == "file":
            assert r.counts is not None
            counts = r.counts[:layers]
            return counts / counts.sum(axis=1, keepdims=True)
        if r.kind == "power_law":
            rng = np.random.default_rng([self.seed, n])
            lo, hi = (1.0, 0.8 * n) if n * self.k > self.e else (0.01, 2.0)
            hi = max(hi, lo * (1 + 1e-9))
            a = 1.0 - r.alpha
            rows = self.layers if layers is None else min(layers, self.layers)
            w = ((hi**a - lo**a) * rng.random((rows, self.e)) + lo**a) ** (1.0 / a)
            return w / w.sum(axis=1, keepdims=True)
        return np.full((1, self.e), 1.0 / self.e)

    def _sampled(self, n: int) -> np.ndarray:
        """The EP_LAYER_SAMPLES layers' popularity the busiest rank's load averages over (read only: shared)."""
        p = self.popularity(n, EP_LAYER_SAMPLES)
        p.flags.writeable = False
        return p

    def _distinct(self, n: int) -> float:
        """Distinct experts the whole MoE layer reads for a step of n tokens (mean over layers)."""
        if n <= 0:
            return 0.0
        if self.routing.kind == "uniform":
            return self.e * (1.0 - (1.0 - self.k / self.e) ** n)  # the closed form: the same floats as before
        if self.routing.kind == "balanced":
            return float(min(self.e, n * self.k))
        return float(_hit(self.popularity(n), self.k, n).sum(axis=1).mean())

    def _load(self, n: int) -> ExpertLoad:
        """The busiest rank's rows and distinct experts for a step of n tokens."""
        rows = float(n * self.k)
        if self.ep == 1 or n <= 0:
            return ExpertLoad(rows, self.distinct(n))
        local = self.e // self.ep
        if self.routing.kind == "balanced":
            return ExpertLoad(math.ceil(rows / self.ep), float(min(local, math.ceil(rows / self.ep))))
        p = self.sampled(n)
        q = np.minimum(1.0, self.k * p).reshape(len(p), self.ep, local)
        hit = 1.0 - (1.0 - q) ** n
        busiest_rows = expected_max(n * q.sum(axis=2), n * (q * (1 - q)).sum(axis=2))
        busiest_distinct = expected_max(hit.sum(axis=2), (hit * (1 - hit)).sum(axis=2))
        return ExpertLoad(min(rows, busiest_rows), min(float(local), busiest_distinct))


def _hit(p: np.ndarray, k: int, n: int) -> np.ndarray:
    """Probability that at least one of n tokens picks each expert."""
    return 1.0 - (1.0 - np.minimum(1.0, k * p)) ** n


def expected_max(mean: np.ndarray, var: np.ndarray, points: int = 49) -> float:
    """E[max over the last axis] of independent non-negative counts ~ Normal(mean, var), averaged over the first
    axis (layers): lo + the integral over [lo, hi] of P(max > x) = 1 - prod_r Phi((x - mean_r) / sd_r), where below
    lo (6 sd under the lowest mean, at least 0) the maximum is surely higher and above hi (6 sd over the highest)
    surely lower."""
    sd = np.sqrt(np.maximum(var, 1e-12))
    lo = np.maximum(0.0, (mean - 6 * sd).min(axis=1))
    hi = (mean + 6 * sd).max(axis=1)
    x = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, points)[None, :]  # [layers, points]
    z = (x[:, None, :] - mean[..., None]) / sd[..., None]
    tail = 1.0 - np.prod(0.5 * (1.0 + _erf(z / math.sqrt(2.0))), axis=1)
    area = (tail[:, 1:] + tail[:, :-1]).sum(axis=1) * (hi - lo) / (points - 1) / 2.0
    return float((lo + area).mean())


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf and scipy is not a dependency."""
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return s * (1.0 - poly * np.exp(-a * a))


def scenario_traffic(spec: ScenarioSpec, model: ModelConfig) -> ExpertTraffic | None:
    """The routing a scenario runs its MoE with: its workload's (the default without a workload), the workload's
    seed, the deployment's ep; None for a dense model."""
    if not model.is_moe:
        return None
    w = spec.workload
    text = w.routing if w is not None else DEFAULT_ROUTING
    ep = spec.deployment.ep if spec.deployment is not None else 1
    args = (model.num_experts, model.num_experts_per_tok, model.num_hidden_layers, ep,
            w.seed if w is not None else spec.seed)
    if text.startswith("file:"):  # read afresh: the file may have changed
        return ExpertTraffic(parse_routing(text), *args)
    return _shared_traffic(text, *args)


@lru_cache(maxsize=64)  # pure in its arguments: a process's runs of one routing share its per-step-size draws
def _shared_traffic(text: str, num_experts: int, top_k: int, layers: int, ep: int, seed: int) -> ExpertTraffic:
    return ExpertTraffic(parse_routing(text), num_experts, top_k, layers, ep, seed)


__all__ = ["ExpertLoad", "ExpertTraffic", "Routing", "expected_max", "load_counts", "parse_routing", "scenario_traffic"]
