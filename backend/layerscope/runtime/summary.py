"""The run's summary figures (every key is documented in docs/events.md): a one-request run's and a serving run's,
each opening with its instance's header (Instance.summary_header) and closing with the deployment's figures."""

from __future__ import annotations

import numpy as np

from layerscope.hardware.kernel import KernelCost
from layerscope.runtime.chunks import GIB
from layerscope.runtime.deployment import deployment_summary
from layerscope.runtime.kv.manager import SEQ
from layerscope.runtime.request import Request
from layerscope.runtime.request_run import RequestInstance
from layerscope.runtime.serving import ServingInstance


def request_summary(e: RequestInstance) -> dict[str, float | int | bool | str]:
    """A one-request run's figures (one decoder layer's times, and the whole model's)."""
    s = e.stats
    layers = e.model.num_hidden_layers
    steady = s.step_latency_us[1:] or s.step_latency_us  # step 0 carries the switch-over: reported on its own
    steady_model = s.step_model_us[1:] or s.step_model_us
    injected = sum(st.injected for st in e.faults.states)
    detected = sum(st.detected for st in e.faults.states)
    out = e.summary_header(e.spec.allocator)
    out.update({
        "prompt_len": e.spec.prompt_len,
        "decode_steps": e.spec.decode_steps,
        "page_size": e.page_size,
        "prefill_layer_us": round(s.prefill_layer_us, 3),
        "prefill_model_ms": round(s.prefill_layer_us * layers / 1000.0, 3),
        "prefill_tokens_per_s": round(e.spec.prompt_len / (s.prefill_layer_us * layers * 1e-6), 1)
        if s.prefill_layer_us > 0
        else 0.0,
        "decode_step_mean_us": _r(np.mean(steady)) if steady else 0.0,
        "decode_step_p50_us": _r(np.percentile(steady, 50)) if steady else 0.0,
        "decode_step_p99_us": _r(np.percentile(steady, 99)) if steady else 0.0,
        "decode_first_step_us": _r(s.first_step_us),
        "decode_switch_over_us": _r(s.switch_over_us),
        "decode_model_step_ms": _r(np.mean(steady_model) / 1000.0) if steady_model else 0.0,
        "decode_model_step_p99_ms": _r(np.percentile(steady_model, 99) / 1000.0) if steady_model else 0.0,
        "jitter_us": _r(np.mean(s.step_jitter_us[1:])) if len(s.step_jitter_us) > 1 else 0.0,
        "num_chunks": len(s.chunk_sizes),
        "num_attention_launches": s.attention_launches,
        "chunk_sizes": ",".join(str(n) for n in _runs(s.chunk_sizes)),
        "migrations": s.migrations,
        "migrated_gib": _r(s.migrated_bytes / GIB),
        "evictions": s.evictions,
        "refetched_pages": s.refetched_pages,
        "partial_evictions": s.partial_evictions,
        "repaired_pages": s.repaired_pages,
        "alloc_failures": s.alloc_failures,
        "compactions": s.compactions,
        "over_sla_steps": s.over_sla,
        "faults_injected": injected,
        "faults_detected": detected,
        "crc_bad_banks": len(s.crc_bad_banks),
        "max_rel_error": _r(s.max_rel_error),
        "nan_detected": s.nan_detected,
        "kv_pages": len(e.kv.allocator.table(SEQ)),
        "kv_gib": _r(e.kv.owned_pages(SEQ) * e.kv.page_bytes / GIB),
        "pool_pages": e.kv.pool.num_pages,
        "peak_hbm_used_gib": _r(e.peak_used_bytes / GIB),
        "hint_reserved_pages": s.hint_pages,
        "hint_overhead_gib": _r(s.hint_pages * e.kv.page_bytes / GIB),
        "cross_bank_reads": s.cross_bank_reads,
        "prefill_hbm_util": _util(_per_layer(s.prefill_costs)),
        "decode_hbm_util": _util(_per_layer(s.decode_costs)),
    })
    out.update(_shares("prefill", _per_layer(s.prefill_costs)))
    out.update(_shares("decode", _per_layer(s.decode_costs)))
    out.update(deployment_summary(e.spec, e.placement))
    return out


def _per_layer(costs: list[KernelCost]) -> list[KernelCost]:
    """The layer's own kernels: whole-model one-off costs (Kernel.scope "model") are not a layer's share."""
    return [c for c in costs if c.kernel.scope == "layer"]


def _r(x: float | np.floating) -> float:
    return round(float(x), 3)


def _runs(sizes: list[int]) -> list[int]:
    """Chunk sizes with consecutive repeats collapsed (4096,4096,2048 -> 4096,2048)."""
    out: list[int] = []
    for n in sizes:
        if not out or out[-1] != n:
            out.append(n)
    return out


def _util(costs: list[KernelCost]) -> float:
    """Time-weighted mean HBM utilisation over the phase's kernels."""
    t = sum(c.time_us for c in costs)
    return round(sum(c.hbm_util * c.time_us for c in costs) / t, 4) if t > 0 else 0.0


def _shares(phase: str, costs: list[KernelCost]) -> dict[str, float]:
    """share_<phase>_<stage>: the stage's fraction of the phase's kernel time."""
    total = sum(c.time_us for c in costs)
    by: dict[str, float] = {}
    for c in costs:
        by[c.kernel.stage] = by.get(c.kernel.stage, 0.0) + c.time_us
    return {f"share_{phase}_{k}": round(v / total, 4) for k, v in sorted(by.items())} if total > 0 else {}


def serving_summary(instances: list[ServingInstance], metrics: dict[str, float | int],
                    requests: list[Request]) -> dict[str, float | int | bool | str]:
    """A serving run's figures: the client's metrics (metrics.py), then the engine's, over its instances (counts
    summed, maxima taken; the prefix-cache hit rate is the instances' hits over their queries)."""
    queries = sum(inst.cache.stats.queries for inst in instances)
    hits = sum(inst.cache.stats.hits for inst in instances)
    first, spec = instances[0], instances[0].spec
    layer_us = [x for inst in instances for x in inst.stats.layer_us]
    layer = np.asarray(layer_us) if layer_us else np.zeros(1)
    stats = [inst.stats for inst in instances]
    out = first.summary_header(first.allocator_name)
    out.update({
        "page_size": first.page_size,
        "num_requests": len(requests),
        "max_num_batched_tokens": first.limits.max_num_batched_tokens,
        "max_num_seqs": first.limits.max_num_seqs,
        "prefix_caching": spec.scheduler.prefix_caching,
    })
    out.update(metrics)
    out.update(first.frontend.summary([r.input_len for r in requests]))
    out.update({
        # vLLM's counters (vllm:prefix_cache_queries / vllm:prefix_cache_hits): tokens of never-preempted admissions
        "prefix_cache_hit_rate": round(hits / queries, 4) if queries else 0.0,
        "prefix_cache_queries": queries,
        "prefix_cache_hits": hits,
        "num_steps": sum(inst.num_steps for inst in instances),
        "max_step_tokens": max(st.max_step_tokens for st in stats),
        "max_step_seqs": max(st.max_step_seqs for st in stats),
        "step_layer_mean_us": round(float(layer.mean()), 3),
        "step_layer_p99_us": round(float(np.percentile(layer, 99)), 3),
        "migrations": sum(st.migrations for st in stats),
        "prefix_cache_evictions": sum(st.cache_evictions for st in stats),
        "pool_pages": first.kv.pool.num_pages,
        "peak_hbm_used_gib": round(max(inst.peak_used_bytes for inst in instances) / GIB, 3),
        "max_rel_error": float(f"{max(st.max_rel_error for st in stats):.3g}"),
    })
    out.update(deployment_summary(spec, first.placement))
    return out


REPLICA_FIGURES = ("completed", "failed", "total_output_tokens", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
                   "p99_tpot_ms", "mean_e2el_ms", "num_preemptions")  # of each replica's `vllm bench serve` figures


def replicas_summary(instances: list[ServingInstance], metrics: list[dict[str, float | int]],
                     route: object) -> dict[str, float | int | bool | str]:
    """A deployment of several replicas: each one's figures as replica<i>_<figure> (the serving figures' names, as
    vLLM labels its metrics per engine), and the router's counts (runtime/router.py)."""
    dep = instances[0].spec.deployment
    assert dep is not None
    out: dict[str, float | int | bool | str] = {"replicas": len(instances), "router": dep.router}
    for i, (inst, figures) in enumerate(zip(instances, metrics, strict=True)):
        stats = inst.cache.stats
        out.update({f"replica{i}_{k}": figures[k] for k in REPLICA_FIGURES})
        out.update({
            f"replica{i}_prefix_cache_hit_rate": round(inst.cache.hit_rate, 4),
            f"replica{i}_prefix_cache_queries": stats.queries,
            f"replica{i}_prefix_cache_hits": stats.hits,
            f"replica{i}_num_steps": inst.num_steps,
            f"replica{i}_gpus": ",".join(str(g) for g in dep.replica_gpus(i)),
        })
    for name in ("cache_routed", "balance_routed"):  # prefix_cache_aware's: matched a tree / sent to the emptiest
        if hasattr(route, name):
            out[f"router_{name}"] = getattr(route, name)
    return out
