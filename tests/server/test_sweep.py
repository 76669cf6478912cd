"""POST /api/sweep: validation naming the field, bounded grids, and the call into layerscope.sweep.run_grid."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from layerscope.server.settings import Settings


@pytest.fixture
def settings() -> Settings:
    return Settings(play_seconds=0.2, tick_s=0.005, max_sim_work=100)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, dict[str, list[Any]], int]]:
    """A stand-in run_grid that records its arguments and answers in the CLI's JSON shape."""
    seen: list[tuple[Any, dict[str, list[Any]], int]] = []

    def run_grid(spec: Any, grid: dict[str, list[Any]], jobs: int = 1, ray_address: str | None = None,
                 runner: Any = None) -> dict[str, Any]:
        seen.append((spec, grid, jobs))
        if 8192 in grid.get("chunk_size", []):
            raise ValueError("weights need 109.5 GiB per GPU")
        points = [{"set": {"chunk_size": v}, "summary": {}, "output_throughput_per_gpu": 10.0 * v,
                   "median_tpot_ms": v / 100, "pareto": True} for v in grid["chunk_size"]]
        return {"scenario": spec.name, "grid": grid, "points": points}

    monkeypatch.setattr("layerscope.server.sweep.run_grid", run_grid)
    return seen


def test_a_small_grid_runs_with_the_overrides(client: TestClient, calls: list[Any]) -> None:
    r = client.post("/api/sweep", json={"scenario": "two-chunks", "set": {"decode_steps": 3},
                                        "grid": {"chunk_size": [1024, 2048]}})
    assert r.status_code == 200, r.text
    assert [p["set"] for p in r.json()["points"]] == [{"chunk_size": 1024}, {"chunk_size": 2048}]
    (spec, grid, jobs), = calls
    assert spec.name == "two-chunks" and spec.decode_steps == 3 and grid == {"chunk_size": [1024, 2048]} and jobs == 1


@pytest.mark.parametrize(
    ("body", "loc", "words"),
    [
        ({"scenario": "two-chunks", "grid": {"chunk_size": [16, 32, 64, 128, 256], "decode_steps": [1, 2, 3, 4]}},
         ["body", "grid"], "20 points"),
        ({"scenario": "two-chunks", "grid": {"nope": [1]}}, ["body", "grid"], "unknown field 'nope'"),
        ({"scenario": "two-chunks", "set": {"prompt_len": -1}, "grid": {"chunk_size": [1024]}},
         ["body", "set", "prompt_len"], "greater than or equal to 1"),
        ({"scenario": "no-such-preset", "grid": {"chunk_size": [1024]}}, ["body", "scenario"], "no-such-preset"),
        ({"scenario": "long-decode", "grid": {"chunk_size": [1024]}}, ["body", "grid"], "at most 100"),
        ({"scenario": "two-chunks", "grid": {}}, ["body", "grid"], "at least 1"),
        ({"scenario": "two-chunks", "grid": {"chunk_size": []}}, ["body", "grid", "chunk_size"], "at least 1"),
        ({"scenario": "Bad Name", "grid": {"chunk_size": [1024]}}, ["body", "scenario"], "pattern"),
        ({"scenario": "two-chunks", "grid": {"chunk_size": [1024]}, "jobs": 64}, ["body", "jobs"], "Extra inputs"),
        ({"scenario": "two-chunks", "grid": {"chunk_size": [8192]}}, ["body", "grid"], "weights need"),
    ],
)
def test_bad_bodies_get_a_422_naming_the_field(client: TestClient, calls: list[Any], body: dict[str, Any],
                                               loc: list[str], words: str) -> None:
    r = client.post("/api/sweep", json=body)
    assert r.status_code == 422, r.text
    err = r.json()["detail"][0]
    assert err["loc"] == loc and words in err["msg"], err
    if words != "weights need":
        assert calls == []  # refused before any simulation


def test_a_point_the_scenario_refuses_goes_to_run_grid_which_reports_it(client: TestClient, calls: list[Any]) -> None:
    r = client.post("/api/sweep", json={"scenario": "two-chunks", "grid": {"chunk_size": [3, 1024]}})
    assert r.status_code == 200, r.text
    assert calls[0][1] == {"chunk_size": [3, 1024]}  # run_grid keeps the refused point with its error


def test_a_real_grid_on_a_serving_preset() -> None:
    """The route with the real layerscope.sweep.run_grid and engine, on a small workload."""
    from layerscope.commands.serve import build_app

    small = {"workload.num_requests": 3, "workload.input_len": 256, "workload.output_len": 6,
             "workload.range_ratio": 0.0}
    with TestClient(build_app(Settings())) as c:
        r = c.post("/api/sweep", json={"scenario": "serving-long-prompt-itl", "set": small,
                                       "grid": {"scheduler.max_num_batched_tokens": [256, 2048]}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["scenario"] == "serving-long-prompt-itl"
    assert [p["set"] for p in body["points"]] == [{"scheduler.max_num_batched_tokens": 256},
                                                 {"scheduler.max_num_batched_tokens": 2048}]
    for p in body["points"]:
        assert p["summary"]["completed"] == 3 and p["output_throughput_per_gpu"] > 0 and p["median_tpot_ms"] > 0
    assert any(p["pareto"] for p in body["points"])


@pytest.mark.parametrize("name", __import__("layerscope.scenario", fromlist=["preset_names"]).preset_names())
def test_every_presets_own_grid_passes_the_work_check_and_runs(name: str) -> None:
    """The grid a preset's sweep panel opens with is one POST /api/sweep accepts (the same check_grid, the
    server's default work limit) and every point of it runs; a preset without a sweep hides the panel."""
    from layerscope.runtime.budget import estimate_work
    from layerscope.scenario import load_preset
    from layerscope.server.sweep import SweepBody, check_grid
    from layerscope.sweep import run_grid

    spec = load_preset(name)
    if spec.sweep is None:
        assert spec.workload is None or spec.workload.num_requests == 1  # every serving preset has a sweep
        return
    body = SweepBody(scenario=name, grid=spec.sweep.grid)
    checked = check_grid(body, Settings().max_sim_work, estimate_work)  # HTTPException (422) where the server refuses
    result = run_grid(checked, dict(spec.sweep.grid))
    assert len(result["points"]) >= 2
    for p in result["points"]:
        assert "error" not in p, p
        if spec.sweep.metric is None:
            assert p["output_throughput_per_gpu"] > 0 and p["median_tpot_ms"] > 0
        else:
            assert p["summary"][spec.sweep.metric] > 0
    assert any(p["pareto"] for p in result["points"]) or spec.sweep.metric is not None
