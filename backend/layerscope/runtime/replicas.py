"""A deployment's engines: `deployment.replicas` ServingInstances of one shape, and the route in front of them.

    spec.deployment (tp, replicas, router) ─▶ build_instances ─▶ [ServingInstance 0 .. replicas-1], route
        replica i runs on GPUs deployment.replica_gpus(i) (consecutive groups of tp x dp), with its own KV pool
        (the placement of one GPU of its group), its own scheduler and its own recorder (events carry `instance`)
        route: runtime/router.py, the deployment's router over those instances
    every replica records its requests and steps; only replica 0 what its GPU does (kernels, pages, memory, banks,
    phases): the time views draw one GPU, as they do of a tp group, and those events carry no instance to tell
    replicas apart on one axis (memory, banks, phases)

Without a deployment, or with replicas 1, it is the one instance and the route to it (events as before).
"""

from __future__ import annotations

from layerscope.runtime.dp_group import DPGroup, is_dp
from layerscope.runtime.loop import Route
from layerscope.runtime.metrics import ServingMetrics, serving_metrics
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.router import make_route
from layerscope.runtime.serving import ServingInstance
from layerscope.scenario import ScenarioSpec


def num_replicas(spec: ScenarioSpec) -> int:
    return spec.deployment.replicas if spec.deployment is not None else 1


def build_instances(spec: ScenarioSpec, events: list[object] | None) -> tuple[list[ServingInstance | DPGroup], Route]:
    """The run's serving instances, all appending to `events`; None: a summary-only run, where each instance feeds
    its own ServingMetrics (its `metrics`; metrics.merged gives the run's). With dp > 1 the one instance is a DP
    group, its ranks stepped in lockstep (runtime/dp_group.py)."""
    if is_dp(spec):
        return [DPGroup(spec, events, ServingMetrics() if events is None else None)], lambda req: 0
    instances = [ServingInstance(spec, Recorder(events, instance=i, metrics=ServingMetrics() if events is None
                                                else None, gpu_events=i == 0))
                 for i in range(num_replicas(spec))]
    if len(instances) == 1:
        return [*instances], lambda req: 0
    first = instances[0]
    assert spec.deployment is not None
    route = make_route(spec.deployment.router, instances, first.page_size, first.kv.pool.num_pages)
    return [*instances], route


def replica_metrics(instances: list[ServingInstance], events: list[object] | None) -> list[dict[str, float | int]]:
    """Each replica's `vllm bench serve` figures: from its own events, or its own ServingMetrics."""
    if events is None:
        return [inst.metrics.figures() for inst in instances if inst.metrics is not None]
    own: dict[object, list[object]] = {i: [] for i in range(len(instances))}
    for e in events:  # one pass, each replica's in the run's order (not one pass of every event per replica)
        mine = own.get(getattr(e, "instance", 0))
        if mine is not None:
            mine.append(e)
    return [serving_metrics(mine) for mine in own.values()]
