"""`layerscope sweep`: the grid table, --json, --html, and the chunk-size sweep that predates it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from layerscope.cli import main


@pytest.fixture
def scenario(tmp_path: Path) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "gpu": "h200", "prompt_len": 256, "decode_steps": 4,
                                    "chunk_size": 2048, "deployment": {"tp": 8}}))
    return str(path)


def test_grid_json_and_html(scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "pareto.html"
    assert main(["sweep", scenario, "--grid", "deployment.tp=4,8", "--json", "--html", str(html)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["grid"] == {"deployment.tp": [4, 8]}
    assert {"set", "summary", "output_throughput_per_gpu", "median_tpot_ms", "pareto"} <= set(out["points"][0])
    page = html.read_text()
    assert "Pareto front" in page and "plotly" in page.lower()


def test_grid_table_marks_refusals(scenario: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", scenario, "--grid", "deployment.tp=2,8"]) == 0
    text = capsys.readouterr().out
    assert "refused: " in text and "weights need 219.0 GiB" in text


def test_bad_grid_is_one_line(scenario: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", scenario, "--grid", "deployment.tp"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["sweep", scenario, "--grid", "deployment.tp=8", "--jobs", "0"]) == 2


def test_chunk_sizes_keep_working(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "chunk-size-sweep-numa", "--chunk-sizes", "2048,4096", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["chunk_size"] for r in out["rows"]] == [2048, 4096]


def test_sweep_without_a_grid_runs_the_presets_grid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "prefill-8k-chunked", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["grid"] == {"chunk_size": [1024, 2048, 4096, 8192]}
    assert [p["summary"]["num_chunks"] for p in out["points"]] == [8, 4, 2, 1]


def test_a_grid_over_replicas_names_the_refused_points(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"name": "r", "model": "qwen3-30b-a3b", "gpu": "h200", "runtime": "vllm",
                                    "deployment": {"tp": 2},
                                    "workload": {"num_requests": 8, "input_len": 128, "output_len": 4}}))
    assert main(["sweep", str(path), "--grid", "deployment.replicas=1,2,4,8", "--json"]) == 0
    points = json.loads(capsys.readouterr().out)["points"]
    assert [p["summary"].get("replicas", 1) for p in points[:3]] == [1, 2, 4]
    assert "replicas=8 x 2 GPUs each (tp=2) need 16 GPUs" in points[3]["error"]
    one, two = points[0], points[1]  # throughput per GPU divides by every replica's GPUs
    assert [p["summary"]["num_gpus"] for p in points[:3]] == [2, 4, 8]
    assert two["output_throughput_per_gpu"] == round(two["summary"]["output_throughput"] / 4, 3)
    assert one["output_throughput_per_gpu"] == round(one["summary"]["output_throughput"] / 2, 3)


def test_grid_with_goodput_gives_goodput_per_gpu_over_every_pool(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--goodput: each point's request_goodput per GPU, over num_gpus (a 1P1D point: both pools' 8 GPUs)."""
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"name": "w", "gpu": "h200", "deployment": {"tp": 4},
                                    "workload": {"num_requests": 8, "input_len": 256, "output_len": 8}}))
    runs = []
    for grid in ("deployment.tp=4", "deployment.disaggregation.prefill.tp=4"):  # colocated, then 1P1D (tp 4 each)
        assert main(["sweep", str(path), "--grid", grid, "--json", "--goodput", "ttft:100000", "tpot:100000"]) == 0
        runs.append(json.loads(capsys.readouterr().out)["points"][0])
    colo, split = runs
    assert colo["request_goodput_per_gpu"] == pytest.approx(colo["summary"]["request_goodput"] / 4, abs=1e-4)
    assert split["summary"]["num_gpus"] == 8 and split["summary"]["disaggregated"]
    assert split["request_goodput_per_gpu"] == pytest.approx(split["summary"]["request_goodput"] / 8, abs=1e-4)
