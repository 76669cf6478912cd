"""A scenario's deployment: the placement, KV pool, deployment event and summary figures of one ScenarioSpec (the
placement math itself: layerscope/deployment.py)."""

from __future__ import annotations

from layerscope.deployment import Placement, place
from layerscope.events import DeploymentEvent
from layerscope.hardware.gpus import GiB
from layerscope.hardware.gpus import gpu as gpu_preset
from layerscope.model.config import PRESETS
from layerscope.scenario import DEFAULT_FREE_HBM_GIB, ScenarioSpec


# -- a scenario's deployment -------------------------------------------------------------------------------------
def batched_tokens(spec: ScenarioSpec) -> int:
    """The profile run's token count: the scheduler's max_num_batched_tokens (vLLM's default for the GPU where
    the scenario leaves it null), one-request runs included, as vLLM profiles whatever it is started with."""
    return spec.scheduler_limits.max_num_batched_tokens


def max_seqs(spec: ScenarioSpec) -> int:
    """The sampler dummy run's requests: the scheduler's max_num_seqs (vLLM's default for the GPU)."""
    return spec.scheduler_limits.max_num_seqs


def scenario_placement(spec: ScenarioSpec) -> Placement | None:
    if spec.deployment is None:
        return None
    return place(PRESETS[spec.model], gpu_preset(spec.gpu), spec.deployment, batched_tokens(spec), max_seqs(spec))


def kv_pool_bytes(spec: ScenarioSpec, placement: Placement | None) -> float:
    """The simulation's KV pool: free_hbm_gib when the scenario sets it (stories and what-ifs), else what the
    deployment's placement leaves, else the old default."""
    if spec.free_hbm_gib is not None:
        return spec.free_hbm_gib * GiB
    if placement is not None:
        return placement.kv_cache_bytes
    return DEFAULT_FREE_HBM_GIB * GiB


def pool_workspace_bytes(spec: ScenarioSpec, placement: Placement | None, workspace: float) -> float:
    """The activation workspace kept out of the KV pool: none where the placement sized the pool, whose
    activation peak (vLLM's profile run) is already out of it; else the largest step's `workspace`."""
    return 0.0 if spec.free_hbm_gib is None and placement is not None else workspace


def deployment_event(spec: ScenarioSpec, placement: Placement) -> DeploymentEvent:
    dep = spec.deployment
    assert dep is not None
    lim = spec.scheduler_limits
    return DeploymentEvent.model_validate(dict(
        t_us=0.0, gpu=placement.gpu, num_gpus=placement.num_gpus, tp=dep.tp, ep=dep.ep, moe_tp=dep.moe_tp,
        weight_dtype=dep.weight_dtype, kv_dtype=dep.kv_dtype, gpu_memory_utilization=dep.gpu_memory_utilization,
        cuda_graphs=dep.cuda_graphs, async_scheduling=dep.async_scheduling,
        cuda_graph_memory_profiled=dep.cuda_graph_memory_profiled, max_model_len=placement.max_model_len,
        per_gpu=placement.per_gpu(), max_num_batched_tokens=lim.max_num_batched_tokens, max_num_seqs=lim.max_num_seqs,
        prefix_caching=spec.scheduler.prefix_caching, scheduler_source=lim.source))


def deployment_summary(spec: ScenarioSpec, placement: Placement | None) -> dict[str, float | int | str]:
    """The run summary's deployment figures (absent without a deployment)."""
    if placement is None or spec.deployment is None:
        return {}
    d, g = spec.deployment, placement.per_gpu()
    return {
        "num_gpus": placement.num_gpus * d.replicas,  # every GPU, as vLLM's users count a deployment's: all replicas
        "tp": d.tp,
        "ep": d.ep,
        "weight_dtype": d.weight_dtype,
        "kv_dtype": d.kv_dtype,
        "weights_gib_per_gpu": g["weights_gib"],
        "kv_cache_gib_per_gpu": g["kv_cache_gib"],
        "kv_tokens": g["kv_tokens"],
        "kv_replication": placement.kv_replication,
        "max_concurrency_at_max_model_len": g["max_concurrency"],
    }
