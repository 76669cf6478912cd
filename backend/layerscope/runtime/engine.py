"""Scenario -> typed, time-ordered event stream: `simulate` builds a run's instances and its loop.

    spec ─▶ instances (runtime/instance.py: one engine on one GPU group each; runtime/replicas.py: the
            deployment's replicas and the router in front of them)
         ─▶ Loop (runtime/loop.py): the client's arrivals ─▶ route ─▶ an instance; each instance's next step, in time
            order ─▶ Instance.step(t) ─▶ events (runtime/recorder.py)
         ─▶ the events sorted by time, the summary (runtime/summary.py) ─▶ SimResult (layerscope/result.py)

A workload (a serving run) is deployment.replicas ServingInstances (one without a deployment) fed by the workload's
client through the deployment's router, on the whole model's clock; the
one-request shorthand (prompt_len, decode_steps) is one RequestInstance with its single request, on one decoder
layer's clock. Same spec and seed -> the same events, byte for byte: all randomness comes from numpy Generators
seeded from spec.seed, and nothing depends on wall time.
"""

from __future__ import annotations

import gc
from typing import Any, cast

from layerscope.events import SummaryEvent
from layerscope.gcpause import paused_gc
from layerscope.result import SimResult
from layerscope.runtime.blas import single_threaded_blas
from layerscope.runtime.dp_group import DPGroup, dp_figures, is_dp, members
from layerscope.runtime.instance import Instance
from layerscope.runtime.loop import Check, Client, Loop, Progress
from layerscope.runtime.metrics import merged, serving_metrics
from layerscope.runtime.pd_run import serve_disaggregated
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.replicas import build_instances, replica_metrics
from layerscope.runtime.request_run import RequestInstance
from layerscope.runtime.serving import ServingInstance
from layerscope.runtime.summary import replicas_summary, request_summary, serving_summary
from layerscope.runtime.workload import make_requests
from layerscope.scenario import ScenarioSpec


def simulate(spec: ScenarioSpec, progress: Progress | None = None, check: Check | None = None,
             summary_only: bool = False) -> SimResult:
    """`check` (runtime.budget.RunBudget.check): the server's budget and cancel hook, over both runs' events.
    `summary_only`: a serving run (a workload) builds no events, only its summary (the same figures); the
    result's events are then its one summary event. A one-request run keeps its events either way."""
    # every matmul here is small (scaled layer, router): threads cost more than they save; the run's events are
    # long-lived and cycle-free, so the cyclic collector's passes only cost time
    with single_threaded_blas(), paused_gc():
        result = _run(spec, progress, check, summary_only)
        if spec.compare is not None:
            other = spec.with_overrides({**spec.compare.set, "compare": None, "tour": []})
            done = len(result.events)
            result.compare = _run(other, None, None if check is None else lambda n: check(done + n), summary_only)
    return result


def _run(spec: ScenarioSpec, progress: Progress | None, check: Check | None, summary_only: bool) -> SimResult:
    if spec.workload is None:
        if is_dp(spec):
            raise ValueError("deployment.dp: data-parallel ranks serve a workload; a one-request run has one rank")
        return _one_request(spec, progress, check)
    if spec.deployment is not None and spec.deployment.disaggregation is not None:  # xPyD pools (issue 21)
        return serve_disaggregated(spec, progress, check, summary_only)
    return _serve(spec, progress, check, summary_only)


def _one_request(spec: ScenarioSpec, progress: Progress | None, check: Check | None) -> SimResult:
    """The one-request shorthand: one instance, its one request, no client."""
    events: list[Any] = []
    instance = RequestInstance(spec, Recorder(events, instance=0))
    Loop([instance], progress=progress, check=check, events=events).run()
    summary = request_summary(instance)
    events.append(SummaryEvent(t_us=instance.state.t, figures=summary))
    events.sort(key=lambda e: e.t_us)  # stable: emission order breaks ties
    return _result(spec, instance, events, summary)


def _serve(spec: ScenarioSpec, progress: Progress | None, check: Check | None, summary_only: bool) -> SimResult:
    """A workload's run: its client, the deployment's serving instances (runtime/replicas.py) and its route."""
    assert spec.workload is not None
    events: list[Any] | None = None if summary_only else []
    instances, route = build_instances(spec, events)
    first = instances[0]
    requests = make_requests(spec.workload, first.model.vocab_size)
    for i, instance in enumerate(instances):
        instance.expect(requests)
        if i:  # the scaled layer shadows replica 0's GPU only, whose events are the ones kept (runtime/replicas.py)
            instance.shadow = None
    # a DP group is stepped by the loop as one instance (runtime/dp_group.py: the same methods)
    loop = Loop([cast(Instance, inst) for inst in instances], Client(requests, spec.workload.max_concurrency), route,
                progress=progress, check=check, events=events)
    loop.run()
    t = max(loop.end_us)
    if events is not None:
        events.sort(key=lambda e: e.t_us)  # stable: emission order breaks ties
    figures = serving_metrics(events, spec.goodput) if events is not None else \
        merged([inst.metrics for inst in instances if inst.metrics is not None]).figures(spec.goodput)
    summary = serving_summary([m for inst in instances for m in members(inst)], figures, requests) | dp_figures(first)
    replicas = [inst for inst in instances if isinstance(inst, ServingInstance)]
    if len(replicas) > 1:
        summary.update(replicas_summary(replicas, replica_metrics(replicas, events), route))
    if events is None:
        return _result(spec, first, [SummaryEvent(t_us=t, figures=summary)], summary)
    events.append(SummaryEvent(t_us=t, figures=summary))
    _promote_to_oldest_generation()
    return _result(spec, first, events, summary)


def _result(spec: ScenarioSpec, instance: Instance | DPGroup, events: list[Any],
            summary: dict[str, float | int | bool | str]) -> SimResult:
    topology = instance.plan.topology(instance.model, instance.timing.cost_model)  # the plan the instance ran
    return SimResult(spec=spec, events=events, topology=topology, summary=summary, clock=instance.clock)


def _promote_to_oldest_generation() -> None:
    """Hand the run's objects (its events, ~10 per request-step) to the collector's oldest generation.

    The run allocates with the collector paused (gcpause.py), so every object it made is still in the youngest
    generation, and the first young pass after the pause would traverse them all (~0.15 s of a 500-request
    run's 2 s CPU, measured with gc.callbacks) to find them alive. freeze() then unfreeze() moves every tracked
    object to the oldest generation without traversing it; cycles among them are still collected by the next
    full pass."""
    gc.freeze()
    gc.unfreeze()


