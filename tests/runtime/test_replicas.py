"""runtime/replicas.py: a deployment's replicas as instances, each on its GPU group, and the route to them."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pydantic import ValidationError

from layerscope.deployment import DeploymentSpec
from layerscope.runtime.engine import simulate
from layerscope.runtime.replicas import build_instances
from layerscope.scenario import ScenarioSpec


def _spec(replicas: int, router: str = "round_robin", tp: int = 1, **workload: Any) -> ScenarioSpec:
    return ScenarioSpec.model_validate({
        "model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h200", "free_hbm_gib": 8.0,
        "deployment": {"tp": tp, "replicas": replicas, "router": router, "max_model_len": 4096},
        "workload": {"num_requests": 12, "input_len": 200, "output_len": 6, "request_rate": 400.0, **workload}})


def test_each_replica_is_its_own_instance_with_its_own_pool_and_scheduler() -> None:
    instances, route = build_instances(_spec(4), [])
    assert [inst.recorder.instance for inst in instances] == [0, 1, 2, 3]
    assert len({id(inst.kv.pool) for inst in instances}) == 4
    assert len({id(inst.scheduler) for inst in instances}) == 4
    assert [route(None) for _ in range(5)] == [0, 1, 2, 3, 0]  # type: ignore[arg-type]  # round robin ignores it


def test_replicas_take_consecutive_gpu_groups() -> None:
    dep = DeploymentSpec(tp=4, replicas=2)
    assert [dep.replica_gpus(i) for i in range(2)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert DeploymentSpec(tp=1, replicas=8).replica_gpus(7) == [7]


def test_replicas_that_do_not_fit_the_node_are_refused_naming_the_figures() -> None:
    with pytest.raises(ValidationError, match=r"replicas=3 x 4 GPUs each \(tp=4\) need 12 GPUs; the deployment "
                                              r"has 8 \(1 node\(s\) of 8\)"):
        DeploymentSpec(tp=4, replicas=3)


def test_a_run_with_replicas_serves_each_request_once_on_one_replica() -> None:
    r = simulate(_spec(3))
    arrived = [e for e in r.events if e.kind == "request" and e.what == "arrive"]
    finished = [e for e in r.events if e.kind == "request" and e.what == "finished"]
    assert sorted(e.request_id for e in arrived) == list(range(12))
    assert sorted(e.request_id for e in finished) == list(range(12))
    where = {e.request_id: e.instance for e in arrived}
    assert Counter(where.values()) == {0: 4, 1: 4, 2: 4}
    assert all(where[e.request_id] == e.instance for e in finished)
    for step in (e for e in r.events if e.kind == "step"):  # a replica's steps run only the requests sent to it
        assert {where[rid] for rid in step.request_ids} == {step.instance}
    assert r.summary["completed"] == 12


def test_one_replica_runs_without_a_router() -> None:
    one = simulate(_spec(1, "round_robin"))
    other = simulate(_spec(1, "prefix_cache_aware"))
    assert [e.model_dump_json() for e in one.events] == [e.model_dump_json() for e in other.events]
    assert {e.instance for e in one.events if hasattr(e, "instance")} == {0}


def test_per_replica_figures_sum_to_the_overall_counts() -> None:
    r = simulate(_spec(3, "least_outstanding_requests", shared_prefix_len=64, num_requests=24))
    s = r.summary
    assert s["replicas"] == 3 and s["router"] == "least_outstanding_requests"
    for key in ("completed", "failed", "total_output_tokens", "num_preemptions", "prefix_cache_queries",
                "prefix_cache_hits", "num_steps"):
        assert sum(s[f"replica{i}_{key}"] for i in range(3)) == s[key], key  # type: ignore[misc]
    assert s["completed"] == 24
    assert [s[f"replica{i}_gpus"] for i in range(3)] == ["0", "1", "2"]
    assert "replica3_completed" not in s


def test_a_replicas_summary_counts_every_gpu_of_the_deployment() -> None:
    """num_gpus is the deployment's (2 replicas of tp 2: 4 GPUs), as a vLLM user counts them, not one replica's."""
    s = simulate(_spec(2, tp=2), summary_only=True).summary
    assert s["num_gpus"] == 4 and s["tp"] == 2
    assert simulate(_spec(1, tp=2), summary_only=True).summary["num_gpus"] == 2


def test_a_summary_only_run_of_replicas_has_the_full_runs_figures() -> None:
    spec = _spec(2, "prefix_cache_aware", shared_prefix_len=64)
    assert simulate(spec, summary_only=True).summary == simulate(spec).summary


def test_one_replica_adds_no_replica_figures() -> None:
    assert not any(k.startswith(("replica", "router")) for k in simulate(_spec(1)).summary)


def test_replicas_are_refused_on_the_one_request_shorthand() -> None:
    with pytest.raises(ValidationError, match="'deployment.replicas': 2 replicas serve a workload"):
        ScenarioSpec.model_validate({"model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h200", "prompt_len": 64,
                                     "decode_steps": 2, "deployment": {"replicas": 2}})


def test_only_the_first_replica_records_what_its_gpu_does() -> None:
    r = simulate(_spec(2))
    gpu_kinds = {"kernel", "page_alloc", "page_free", "memory", "banks", "deployment", "phase"}
    assert {e.kind for e in r.events} >= gpu_kinds
    assert {e.instance for e in r.events if e.kind in gpu_kinds and hasattr(e, "instance")} == {0}
    assert sum(e.kind == "deployment" for e in r.events) == 1
    assert {e.instance for e in r.events if e.kind in ("request", "step")} == {0, 1}


def test_numerics_run_with_replicas_on_replica_0s_steps() -> None:
    spec = _spec(2).with_overrides({"numerics": True, "numerics_model": "tiny", "workload.num_requests": 6})
    r = simulate(spec)
    steps0 = sum(e.kind == "step" and e.instance == 0 for e in r.events)
    assert 0 < sum(e.kind == "numerics" for e in r.events) <= steps0
    assert r.summary["max_rel_error"] < 1e-3
