"""The preset library: every story issue 5 asks for, each loads, runs and meets its own tour's claims."""

from __future__ import annotations

from pathlib import Path

import pytest

from layerscope import scenario
from layerscope.scenario import ScenarioError, load_file, load_preset, preset_names

REQUIRED = {
    "prefill-8k-chunked", "long-context-128k", "decode-pulses", "chunk-adapt-low-memory", "chunk-size-sweep-numa",
    "allocator-off-long-context", "page-hint-jitter", "fragmentation-oom", "partial-eviction-spikes",
    "stale-chunk-metadata", "chunk-scheduler-disabled", "ecc-bitflips", "real-qwen3-235b-h200", "article-vs-real",
}  # fmt: skip
PAIRS = {"allocator-off-long-context", "page-hint-jitter", "article-vs-real"}
PANELS = {"topology", "timeline", "banks", "memory", "latency", "stages", "claims", "experts", "controls", "requests",
          "step-mix", "latency-dist", "deployment", "sweep", "numerics", "dp-ranks"}


def test_every_story_of_issue_5_is_a_preset() -> None:
    assert REQUIRED <= set(preset_names())


@pytest.mark.parametrize("name", preset_names())
def test_preset_is_a_complete_story(name: str) -> None:
    spec = load_preset(name)
    assert spec.name == name
    assert spec.title != "Custom scenario" and len(spec.description) > 100
    assert 3 <= len(spec.tour) <= 6
    for step in spec.tour:
        assert step.check is not None, f"{name}: step {step.title!r} makes no checkable claim"
        assert step.highlight and set(step.highlight) <= PANELS, f"{name}: unknown panel in {step.highlight}"
    if name in PAIRS:
        assert spec.compare is not None
    if name == "long-context-128k":
        assert not spec.numerics  # timing only
    if spec.numerics:
        assert spec.numerics_model == "tiny"


def _simulated_weights_gib(spec: scenario.ScenarioSpec) -> float:
    """What one GPU of the run holds in weights: a deployment's (or a serving run's, at tp 1 without one) whole
    model shard; a one-request run without a deployment simulates one layer of the model."""
    from layerscope.deployment import shard, weight_bytes_per_gpu
    from layerscope.model.config import PRESETS

    model = PRESETS[spec.model]
    dep = spec.deployment or scenario.DeploymentSpec()
    whole = weight_bytes_per_gpu(model, shard(model, dep)) / 2**30
    return whole if spec.deployment is not None or spec.workload is not None else whole / model.num_hidden_layers


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_and_its_compare_run_on_a_deployment_whose_weights_fit(name: str) -> None:
    from layerscope.hardware.gpus import gpu
    from layerscope.runtime.deployment import scenario_placement

    spec = load_preset(name)
    runs = [spec] + ([spec.with_overrides(spec.compare.set)] if spec.compare else [])
    for run in runs:
        capacity = gpu(run.gpu).memory_bytes / 2**30
        weights = _simulated_weights_gib(run)
        assert weights + (run.free_hbm_gib or 0.0) <= capacity, f"{name}: {weights:.1f} GiB of weights"
        if run.workload is not None and run.runtime == "vllm":  # whole-model serving: a real placement
            assert run.deployment is not None, f"{name}: a serving run names its deployment"
            placement = scenario_placement(run)
            assert placement is not None and placement.kv_cache_bytes > 0


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("yaml_text", "field", "allowed"),
    [
        ("prompt_len: 999999\n", "prompt_len", "262144"),
        ("chunk_size: 8\n", "chunk_size", "16"),
        ("runtime: tensorrt\n", "runtime", "'article' or 'vllm'"),
        ("fragmentation: 0.99\n", "fragmentation", "0.95"),
        ("faults:\n  - {kind: ecc_bitflips, rate: 2.0}\n", "faults.0.rate", "1"),
        ("tour:\n  - {title: t, text: x, check: {metric: m, op: '=~', value: 1}}\n", "tour.0.check.op", "'=='"),
        ("bogus_field: 1\n", "bogus_field", "not permitted"),
    ],
)
def test_validation_error_names_file_field_and_range(tmp_path: Path, yaml_text: str, field: str, allowed: str) -> None:
    path = _write(tmp_path, yaml_text)
    with pytest.raises(ScenarioError) as err:
        load_file(path)
    msg = str(err.value)
    assert str(path) in msg and f"'{field}'" in msg and allowed in msg
    assert "\n" not in msg


def test_not_yaml_and_not_a_mapping_name_the_file(tmp_path: Path) -> None:
    for text in ("prompt_len: [1,\n", "- just\n- a list\n"):
        path = _write(tmp_path, text)
        with pytest.raises(ScenarioError, match=str(path)):
            scenario.load(str(path))


@pytest.mark.parametrize("name", preset_names())
def test_preset_runs_and_meets_its_tour(name: str) -> None:
    from layerscope.runtime.engine import simulate
    from layerscope.tour import format_results, tour_results

    spec = load_preset(name)
    result = simulate(spec)
    assert result.events and result.summary
    assert (result.compare is not None) == (spec.compare is not None)
    rows = tour_results(result)
    assert len(rows) == len(spec.tour)
    assert all(r["passed"] for r in rows), f"{name}:\n{format_results(rows)}"
    for step, row in zip(spec.tour, rows, strict=True):
        if step.at_event:  # the dashboard can pause there: the event exists in this run
            assert row["t_us"] is not None


@pytest.mark.parametrize("name", preset_names())
def test_tour_claims_hold_for_another_seed(name: str) -> None:
    """A tour claims what the mechanism makes true, not what one seed's random layout happened to give."""
    from layerscope.runtime.engine import simulate
    from layerscope.tour import format_results, tour_results

    rows = tour_results(simulate(load_preset(name).with_overrides({"seed": 1})))
    assert all(r["passed"] for r in rows), f"{name} (seed 1):\n{format_results(rows)}"
