"""The grid sweep: points in grid order, dotted fields, Pareto marks, refusals, --jobs and Ray give the same."""

from __future__ import annotations

import json

import pytest

from layerscope.scenario import ScenarioError, ScenarioSpec
from layerscope.sweep import grid_points, mark_pareto, parse_grid, run_grid, with_fields

SPEC = ScenarioSpec(name="sweep-test", gpu="h200", prompt_len=256, decode_steps=4, chunk_size=2048,
                    deployment={"tp": 8})


def test_parse_grid_reads_yaml_scalars_and_dotted_fields() -> None:
    grid = parse_grid(["deployment.tp=4,8", "deployment.cuda_graphs=true,false", "gpu=h200"])
    assert grid == {"deployment.tp": [4, 8], "deployment.cuda_graphs": [True, False], "gpu": ["h200"]}
    assert [p["deployment.tp"] for p in grid_points(grid)] == [4, 4, 8, 8]  # the last field varies fastest
    with pytest.raises(ScenarioError, match="expected field=value"):
        parse_grid(["deployment.tp"])
    with pytest.raises(ScenarioError, match="limit is 256"):
        grid_points({"a": list(range(20)), "b": list(range(20))})


def test_with_fields_sets_nested_fields_and_names_bad_ones() -> None:
    s = with_fields(SPEC, {"deployment.tp": 4, "deployment.weight_dtype": "fp8", "decode_steps": 2})
    assert s.deployment is not None and (s.deployment.tp, s.deployment.weight_dtype, s.decode_steps) == (4, "fp8", 2)
    bare = ScenarioSpec(gpu="h200")
    assert with_fields(bare, {"deployment.tp": 8}).deployment.tp == 8  # type: ignore[union-attr]
    with pytest.raises(ScenarioError, match="deployment.bogus"):
        with_fields(SPEC, {"deployment.bogus": 1})
    with pytest.raises(ScenarioError, match="tp=16 spans nodes: tensor parallelism stays within a node of 8"):
        with_fields(SPEC, {"deployment.tp": 16})
    with pytest.raises(ScenarioError, match="unknown or not sweepable field 'nope.x'"):
        with_fields(SPEC, {"nope.x": 1})


def test_pareto_marks_the_non_dominated_points() -> None:
    rows = [{"output_throughput_per_gpu": t, "median_tpot_ms": l, "pareto": False}
            for t, l in [(100, 10), (200, 20), (150, 25), (50, 5), (200, 30), (None, 1)]]
    mark_pareto(rows)
    assert [r["pareto"] for r in rows] == [True, True, False, True, False, False]


def test_a_point_that_does_not_fit_is_kept_with_its_error() -> None:
    out = run_grid(SPEC, {"deployment.tp": [2, 8]})
    refused, ok = out["points"]
    assert "weights need 219.0 GiB per GPU at tp=2" in refused["error"] and refused["pareto"] is False
    assert "error" not in ok and ok["summary"]["decode_steps"] == 4
    assert out["grid"] == {"deployment.tp": [2, 8]} and out["scenario"] == "sweep-test"


def test_jobs_give_the_same_result_as_one_process() -> None:
    grid = {"deployment.tp": [4, 8], "decode_steps": [2, 4]}
    one = run_grid(SPEC, grid, jobs=1)
    two = run_grid(SPEC, grid, jobs=2)
    assert json.dumps(one) == json.dumps(two)
    assert [p["set"] for p in one["points"]] == grid_points(grid)


def test_a_local_ray_instance_gives_the_same_result() -> None:
    ray = pytest.importorskip("ray")  # `make test` installs it (dev extra); skipped only where it is absent
    grid = {"deployment.tp": [4, 8]}
    local = run_grid(SPEC, grid)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        remote = run_grid(SPEC, grid, ray_address="auto")
    finally:
        ray.shutdown()
    assert json.dumps(remote) == json.dumps(local)


def test_a_serving_grid_marks_the_pareto_front_of_throughput_per_gpu_and_tpot() -> None:
    serving = SPEC.model_copy(update={"workload": None})
    grid = {"deployment.tp": [4, 8], "workload.max_concurrency": [1, 8], "workload.num_requests": [8],
            "workload.input_len": [256], "workload.output_len": [16]}
    out = run_grid(serving, grid, jobs=2)
    pts = {(p["set"]["deployment.tp"], p["set"]["workload.max_concurrency"]): p for p in out["points"]}
    for (tp, _), p in pts.items():
        assert p["output_throughput_per_gpu"] == pytest.approx(p["summary"]["output_throughput"] / tp, abs=1e-3)
        assert p["median_tpot_ms"] == p["summary"]["median_tpot_ms"]
    # more requests in flight: more throughput and a longer TPOT, so both concurrencies of a tp can be on the front
    assert pts[(8, 8)]["output_throughput_per_gpu"] > pts[(8, 1)]["output_throughput_per_gpu"]
    assert pts[(8, 8)]["median_tpot_ms"] > pts[(8, 1)]["median_tpot_ms"]
    front = [k for k, p in pts.items() if p["pareto"]]
    assert front and all(not _dominated(pts[k], pts.values()) for k in front)
    assert all(_dominated(p, pts.values()) for k, p in pts.items() if k not in front)


def _dominated(p: dict, others: object) -> bool:
    t, lat = p["output_throughput_per_gpu"], p["median_tpot_ms"]
    return any(o["output_throughput_per_gpu"] >= t and o["median_tpot_ms"] <= lat
               and (o["output_throughput_per_gpu"] > t or o["median_tpot_ms"] < lat) for o in others)  # type: ignore[attr-defined]


def test_a_grid_over_data_parallel_ranks_names_the_refused_points() -> None:
    """deployment.dp with tp: ep follows dp x tp at each point; a layout that needs more than a node is refused
    with the GPUs it needs; throughput per GPU counts dp x tp GPUs."""
    spec = ScenarioSpec.model_validate({
        "name": "dp-sweep", "model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h100-sxm",
        "deployment": {"dp": 2}, "workload": {"num_requests": 4, "input_len": 128, "output_len": 8}})
    out = run_grid(spec, {"deployment.dp": [2, 4], "deployment.tp": [1, 4]})
    pts = {(p["set"]["deployment.dp"], p["set"]["deployment.tp"]): p for p in out["points"]}
    assert "dp=4 x tp=4 = 16 GPUs do not fit 1 node(s) of 8: set nodes=2" in pts[(4, 4)]["error"]
    ok = pts[(4, 1)]
    assert "error" not in ok and ok["summary"]["dp"] == 4 and ok["summary"]["completed"] == 4
    assert ok["output_throughput_per_gpu"] == pytest.approx(ok["summary"]["output_throughput"] / 4, abs=1e-3)
    assert "error" not in pts[(2, 4)]  # dp 2 x tp 4: ep 8 over the node's 8 GPUs


def test_a_grid_over_dp_from_one_and_replicas_runs_one_engine_at_dp_1_and_names_replicas_of_a_dp_group() -> None:
    """deployment.dp=1 in a DP scenario's grid is one engine of tp GPUs (ep derived afresh, not dp x tp's);
    replicas of a DP group are refused at their point, with the fix."""
    spec = ScenarioSpec.model_validate({
        "name": "dp-sweep", "model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h100-sxm",
        "deployment": {"dp": 2}, "workload": {"num_requests": 4, "input_len": 128, "output_len": 8}})
    out = run_grid(spec, {"deployment.dp": [1, 2], "deployment.replicas": [1, 2]})
    pts = {(p["set"]["deployment.dp"], p["set"]["deployment.replicas"]): p for p in out["points"]}
    one = pts[(1, 1)]
    assert "error" not in one and "dp" not in one["summary"] and one["summary"]["completed"] == 4
    assert "replicas" not in one["summary"]
    assert pts[(1, 2)]["summary"]["replicas"] == 2 and pts[(2, 1)]["summary"]["dp"] == 2
    assert "replicas=2 with dp=2: replicas of a data-parallel group are not simulated; set replicas=1" in \
        pts[(2, 2)]["error"]
