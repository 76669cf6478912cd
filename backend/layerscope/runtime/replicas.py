"""A deployment's engines: `deployment.replicas` ServingInstances of one shape, and the route in front of them.

    spec.deployment (tp, replicas, router) ─▶ build_instances ─▶ [ServingInstance 0 .. replicas-1], route
        replica i runs on GPUs deployment.replica_gpus(i) (consecutive groups of tp x dp), with its own KV pool
        (the placement of one GPU of its group), its own scheduler and its own recorder (events carry `instance`)
        route: runtime/router.py, the deployment's router over those instances

Without a deployment, or with replicas 1, it is the one instance and the route to it (events as before).
"""

from __future__ import annotations

from layerscope.runtime.loop import Route
from layerscope.runtime.metrics import ServingMetrics
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.router import make_route
from layerscope.runtime.serving import ServingInstance
from layerscope.scenario import ScenarioSpec


def num_replicas(spec: ScenarioSpec) -> int:
    return spec.deployment.replicas if spec.deployment is not None else 1


def build_instances(spec: ScenarioSpec, events: list[object] | None,
                    metrics: ServingMetrics | None) -> tuple[list[ServingInstance], Route]:
    """The run's serving instances, all appending to `events` (None: a summary-only run feeding `metrics`)."""
    instances = [ServingInstance(spec, Recorder(events, instance=i, metrics=metrics))
                 for i in range(num_replicas(spec))]
    if len(instances) == 1:
        return instances, lambda req: 0
    first = instances[0]
    assert spec.deployment is not None
    route = make_route(spec.deployment.router, instances, first.page_size, first.kv.pool.num_pages)
    return instances, route
