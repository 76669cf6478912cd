"""A disaggregated serving run (deployment.disaggregation): its pools built from the spec, the loop run, the
summary with the pools' figures. The engines and the loop are runtime/disagg.py's; the transfer's
runtime/transfer.py's."""

from __future__ import annotations

from typing import Any

import numpy as np

from layerscope.deployment import pool_deployment
from layerscope.events import SummaryEvent
from layerscope.hardware.cost import CostModel
from layerscope.result import SimResult
from layerscope.runtime.disagg import DisaggLoop
from layerscope.runtime.dp_group import DPGroup
from layerscope.runtime.loop import Check, Client, Progress
from layerscope.runtime.metrics import ServingMetrics, serving_metrics
from layerscope.runtime.pools import DecodeGroup, DecodeInstance, PrefillGroup, PrefillInstance
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.summary import serving_summary
from layerscope.runtime.workload import make_requests
from layerscope.scenario import ScenarioSpec


def pool_spec(spec: ScenarioSpec, pool: str) -> ScenarioSpec:
    """The scenario one engine of the pool runs: the pool's tp and ep."""
    assert spec.deployment is not None and spec.deployment.disaggregation is not None
    dep = pool_deployment(spec.deployment, getattr(spec.deployment.disaggregation, pool))
    return spec.model_copy(update={"deployment": dep})


def build_pools(spec: ScenarioSpec, events: list[Any] | None, metrics: ServingMetrics | None
                ) -> tuple[list[PrefillInstance | PrefillGroup], list[DecodeInstance | DecodeGroup]]:
    """The pools' engines; events' `instance`: the prefill engines' first, then the decode engines', an engine
    with dp > 1 one per DP rank (numbered on)."""
    assert spec.deployment is not None and spec.deployment.disaggregation is not None
    dis = spec.deployment.disaggregation
    p_spec, d_spec = pool_spec(spec, "prefill"), pool_spec(spec, "decode")
    pdp, ddp = dis.prefill.dp, dis.decode.dp
    prefills: list[PrefillInstance | PrefillGroup] = [
        PrefillGroup(p_spec, events, metrics, i * pdp) if pdp > 1 else PrefillInstance(p_spec, Recorder(events, i,
                                                                                                       metrics))
        for i in range(dis.prefill.instances)]
    x = dis.prefill.instances * pdp
    decodes: list[DecodeInstance | DecodeGroup] = [
        DecodeGroup(d_spec, events, metrics, x + j * ddp) if ddp > 1 else DecodeInstance(d_spec, Recorder(events, x + j,
                                                                                                        metrics))
        for j in range(dis.decode.instances)]
    return prefills, decodes


def serve_disaggregated(spec: ScenarioSpec, progress: Progress | None, check: Check | None,
                        summary_only: bool) -> SimResult:
    """A workload's run on prefill and decode pools: the same events and summary as a colocated run, plus the
    transfers (request transfer_start / transfer_done, kernels on the kv_transfer stream) and the pools' figures."""
    assert spec.workload is not None and spec.deployment is not None
    dis = spec.deployment.disaggregation
    assert dis is not None
    events: list[Any] | None = None if summary_only else []
    metrics = ServingMetrics() if summary_only else None
    prefills, decodes = build_pools(spec, events, metrics)
    requests = make_requests(spec.workload, prefills[0].model.vocab_size)
    for inst in (*prefills, *decodes):
        inst.expect(requests)
    loop = DisaggLoop(prefills, decodes, dis, Client(requests, spec.workload.max_concurrency), progress, check,
                      events)
    loop.run()
    t = max(loop.end_us)
    figures = metrics.figures(spec.goodput) if metrics is not None else None
    if events is not None:
        events.sort(key=lambda e: e.t_us)  # stable: emission order breaks ties
        figures = serving_metrics(events, spec.goodput)
    assert figures is not None
    engines = [m for e in (*prefills, *decodes) for m in e.members()]
    summary = serving_summary(engines, figures, requests)
    summary.update(pool_figures(spec, prefills, decodes, loop))
    out_events = events if events is not None else []
    out_events.append(SummaryEvent(t_us=t, figures=summary))
    first = prefills[0]
    topology = first.plan.topology(first.model, CostModel(first.gpu))
    return SimResult(spec=spec, events=out_events, topology=topology, summary=summary, clock=first.clock)


def pool_figures(spec: ScenarioSpec, prefills: list[PrefillInstance | PrefillGroup],
                 decodes: list[DecodeInstance | DecodeGroup],
                 loop: DisaggLoop) -> dict[str, float | int | str | bool]:
    """The pools' own figures (docs/events.md): GPUs, KV capacity per pool, the transfers and the wait for
    decode blocks (back-pressure)."""
    assert spec.deployment is not None and spec.deployment.disaggregation is not None
    dis = spec.deployment.disaggregation
    recs = [r for r in loop.records.values() if r.done_us > 0]
    transfer = [r.done_us - r.start_us for r in recs]
    wait = [max(0.0, r.start_us - r.prefill_end_us) for r in recs]  # streaming allocates before the end
    out: dict[str, float | int | str | bool] = {
        "disaggregated": True,
        "num_gpus": dis.num_gpus,
        "kv_link": dis.link,
        "kv_streaming": dis.streaming,
        "prefill_instances": dis.prefill.instances,
        "prefill_tp": dis.prefill.tp,
        "decode_instances": dis.decode.instances,
        "decode_tp": dis.decode.tp,
        **({"prefill_dp": dis.prefill.dp} if dis.prefill.dp > 1 else {}),
        **({"decode_dp": dis.decode.dp} if dis.decode.dp > 1 else {}),
        "prefill_kv_tokens": sum(r.kv.pool.num_pages * r.page_size for r in prefills[0].members()),
        "decode_kv_tokens": sum(r.kv.pool.num_pages * r.page_size for r in decodes[0].members()),
        "prefill_num_steps": sum(p.num_steps for p in prefills),
        "decode_num_steps": sum(d.num_steps for d in decodes),
        "kv_transfers": len(recs),
        "kv_transfer_gib": round(sum(r.bytes for r in recs) / 2**30, 3),
        "mean_kv_transfer_ms": _ms(transfer, None),
        "p99_kv_transfer_ms": _ms(transfer, 99.0),
        "mean_kv_wait_ms": _ms(wait, None),
        "p99_kv_wait_ms": _ms(wait, 99.0),
        "max_prefill_held_requests": max(p.max_held for p in prefills),
        "prefill_stalls": sum(p.stalls for p in prefills),
    }
    keys = ("all2all_backend", "dp_idle_share", "a2a_share", "expert_imbalance")
    for name, first in (("prefill", prefills[0]), ("decode", decodes[0])):  # each pool's first engine's DP figures
        if isinstance(first, DPGroup):
            dp = first.figures()
            out.update({f"{name}_{k}": dp[k] for k in keys})
    pools: tuple[tuple[str, list[Any]], ...] = (("prefill", prefills), ("decode", decodes))
    for name, pool in ((name, [m for e in engines for m in e.members()]) for name, engines in pools):
        layer = [x for inst in pool for x in inst.stats.layer_us]
        out[f"{name}_step_layer_mean_us"] = round(float(np.mean(layer)), 3) if layer else 0.0
    return out


def _ms(xs: list[float], q: float | None) -> float:
    """Mean (q None) or percentile q of µs values, in ms."""
    if not xs:
        return 0.0
    return round(float(np.mean(xs) if q is None else np.percentile(xs, q)) / 1000.0, 4)
