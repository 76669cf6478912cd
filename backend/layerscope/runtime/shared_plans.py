"""The deployed plans a process's runs share: one per deployment, kept across runs.

A plan (runtime/sharded.py ShardedRuntime over VllmRuntime) memoises the kernels of every step shape it meets: the
layer around the attention per token count, the outside-layer kernels per (tokens, sequences), the all-reduces, the
launch floors. Those are pure in the shape and the deployment (Kernels are frozen), so a second run of the same
deployment can start from the first one's memos instead of building and pricing them again: a warm 500-request
run spends ~30% of its time there otherwise (bench/README.md). A server re-simulating its presets, a sweep's points
over scheduler settings, a benchmark's repeats all run one deployment many times.

Shared: vLLM's plan, sharded over a deployment or not (its memos are all it holds besides its configuration). Not
shared: another runtime's plan (the article's), a data-parallel rank's plan
(runtime/dp_group.py sets its group's step on it while the group runs) and a plan whose routing is read from a
file (read afresh each run: the file may have changed).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from layerscope.model.config import ModelConfig
from layerscope.runtime.plan import RuntimePlan
from layerscope.runtime.sharded import ShardedRuntime, deployed
from layerscope.runtime.vllm import VllmRuntime
from layerscope.scenario import ScenarioSpec

MAX_SHARED_PLANS = 16  # the preset library has ~10 distinct deployments; its 12 plans kept cost ~5 MB in all

_Key = tuple[str, str, str, str, int, str]
_plans: OrderedDict[_Key, tuple[RuntimePlan, ModelConfig]] = OrderedDict()
_lock = threading.Lock()  # the server simulates in worker threads


def shared_deployed(spec: ScenarioSpec) -> tuple[RuntimePlan, ModelConfig]:
    """`deployed(spec)`, the same plan object again for a spec of the same deployment (least recently used go)."""
    key = _key(spec)
    if key is None:
        return deployed(spec)
    with _lock:
        hit = _plans.get(key)
        if hit is not None:
            _plans.move_to_end(key)
            return hit
    made = deployed(spec)
    if not _shareable(made[0]):
        return made
    with _lock:
        hit = _plans.setdefault(key, made)  # another thread's, if it made one meanwhile: one plan per key
        while len(_plans) > MAX_SHARED_PLANS:
            _plans.popitem(last=False)
    return hit


def _key(spec: ScenarioSpec) -> _Key | None:
    """What `deployed` reads of the spec: the runtime, model, GPU, the routing and its seed, the deployment."""
    dep = spec.deployment
    if dep is not None and dep.dp > 1:
        return None
    w = spec.workload
    routing = w.routing if w is not None else ""
    if routing.startswith("file:"):
        return None
    seed = w.seed if w is not None else spec.seed
    return (spec.runtime, spec.model, spec.gpu, routing, seed, dep.model_dump_json() if dep is not None else "")


def _shareable(plan: RuntimePlan) -> bool:
    """vLLM's plan or vLLM's sharded, exactly those classes (a subclass may hold a run's state: DPRankPlan does)."""
    base = plan.base if type(plan) is ShardedRuntime else plan
    return type(base) is VllmRuntime
