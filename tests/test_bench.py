"""vllm bench serve's result block and saved keys; measured vs simulated on fixtures in vLLM's and SGLang's format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layerscope.bench import compare, comparison_block, load_measured, result_block

FIXTURES = Path(__file__).parent / "fixtures"
VLLM = FIXTURES / "vllm_bench_serve_result.json"
SGLANG = FIXTURES / "sglang_bench_serving_result.jsonl"


def test_result_block_is_vllms_layout() -> None:
    r = json.loads(VLLM.read_text())
    lines = result_block(r).splitlines()
    assert lines[0] == "============ Serving Benchmark Result ============"
    assert lines[1] == "Successful requests:                     64        "
    assert "Maximum request concurrency:             16        " in lines
    assert "Mean TTFT (ms):                          310.50    " in lines
    assert "-----Time per Output Token (excl. 1st token)------" in lines
    assert "---------------Inter-token Latency----------------" in lines
    assert lines[-1] == "=" * 50
    assert "End-to-end Latency" not in result_block(r) and "E2EL" in result_block({**r, "mean_e2el_ms": 1.0,
        "median_e2el_ms": 1.0, "p99_e2el_ms": 1.0}, "ttft,e2el")


def test_compare_to_a_vllm_result() -> None:
    measured = load_measured(VLLM)
    sim = {**measured, "median_tpot_ms": 10.56, "mean_ttft_ms": 155.25, "p99_itl_ms": float("nan")}
    rows = {r["metric"]: r for r in compare(measured, sim)}
    assert rows["median_tpot_ms"]["rel_error"] == pytest.approx(0.10)
    assert rows["mean_ttft_ms"]["rel_error"] == pytest.approx(-0.5)
    assert "p99_itl_ms" not in rows  # not a finite number on one side: not compared
    assert "completed" not in rows and "input_lens" not in rows
    block = comparison_block(list(rows.values()), str(VLLM))
    assert "median_tpot_ms" in block and "+10.0%" in block and "-50.0%" in block


def test_compare_to_sglang_jsonl_takes_the_last_run_and_maps_names() -> None:
    measured = load_measured(SGLANG)
    assert measured["median_tpot_ms"] == 9.5 and measured["mean_e2el_ms"] == 10000.0
    assert measured["total_token_throughput"] == 3200.0
    rows = compare(measured, {"median_tpot_ms": 9.5, "mean_e2el_ms": 12000.0})
    assert [(r["metric"], r["rel_error"]) for r in rows] == [("median_tpot_ms", 0.0), ("mean_e2el_ms", 0.2)]


def test_bad_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no serving metrics"):
        (tmp_path / "x.json").write_text('{"a": 1}')
        load_measured(tmp_path / "x.json")
    with pytest.raises(ValueError, match="not a vLLM or SGLang result"):
        (tmp_path / "y.json").write_text("{nope")
        load_measured(tmp_path / "y.json")
    with pytest.raises(ValueError, match="--compare-to"):
        load_measured(tmp_path / "missing.json")
