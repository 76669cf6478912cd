"""`layerscope bench`: vllm bench serve's flags, its result block, the saved JSON keys, --compare-to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layerscope.cli import main

FIXTURE = Path(__file__).parents[1] / "fixtures" / "vllm_bench_serve_result.json"
SMALL = ["--gpu", "h200", "--tp", "8", "--random-input-len", "256", "--random-output-len", "16", "--num-prompts", "8"]
# `vllm bench serve --save-result` keys the contract lists (plus LayerScope's two serving extras).
KEYS = {"completed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
        "output_throughput", "total_token_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
        "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms",
        "mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms", "num_preemptions", "prefix_cache_hit_rate"}


def test_bench_json_has_vllms_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *SMALL, "--max-concurrency", "4", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert KEYS <= set(r)
    assert r["completed"] == 8 and r["total_input_tokens"] == 8 * 256 and r["total_output_tokens"] == 8 * 16
    assert r["max_concurrency"] == 4 and r["tensor_parallel_size"] == 8 and r["request_rate"] == "inf"
    assert r["output_throughput"] == pytest.approx(r["total_output_tokens"] / r["duration"], rel=1e-3)


def test_bench_prints_the_result_block_and_compares(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *SMALL, "--compare-to", str(FIXTURE)]) == 0
    text = capsys.readouterr().out
    assert "============ Serving Benchmark Result ============" in text
    assert "Successful requests:                     8" in text
    assert "Median TPOT (ms):" in text
    assert "Measured vs simulated" in text and "median_tpot_ms" in text and "%" in text


def test_bench_compare_json_gives_relative_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *SMALL, "--json", "--compare-to", str(FIXTURE)]) == 0
    r = json.loads(capsys.readouterr().out)
    rows = {row["metric"]: row for row in r["compare_to"]["rows"]}
    tpot = rows["median_tpot_ms"]
    assert tpot["measured"] == 9.6 and tpot["simulated"] == r["median_tpot_ms"]
    assert tpot["rel_error"] == pytest.approx(r["median_tpot_ms"] / 9.6 - 1)


def test_bench_refuses_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--gpu", "h100-sxm", "--tp", "4", "--num-prompts", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "weights need 109.5 GiB per GPU at tp=4" in err
    assert main(["bench", *SMALL, "--percentile-metrics", "ttft,bogus"]) == 2
    assert "--percentile-metrics" in capsys.readouterr().err


def test_bench_starts_from_a_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--scenario", "serving-64-h200-tp8", "--num-prompts", "8", "--random-output-len", "8", "--json"]
    assert main(args) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["tensor_parallel_size"] == 8 and r["max_concurrency"] == 64  # the scenario's deployment and cap
    assert r["completed"] == 8 and r["total_input_tokens"] == 8 * 1024 and r["total_output_tokens"] == 8 * 8


def test_bench_on_a_trace_reports_the_traces_request_count(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "azure.csv"
    rows = [f"2023-11-16 18:15:46.{i:06d},{100 + 7 * i},{4 + i % 5}" for i in range(13)]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    assert main(["bench", "--gpu", "h200", "--tp", "8", "--workload-trace", str(trace), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["num_prompts"] == 13 and r["completed"] == 13  # the trace's rows, not --num-prompts' default 1000
    assert r["total_input_tokens"] == sum(100 + 7 * i for i in range(13))


def test_bench_sglang_ttft_carries_its_front_end(capsys: pytest.CaptureFixture[str]) -> None:
    # SGLang's cookbook: 65 ms median TTFT at concurrency 1 for ~500-token prompts on 8 x B200 (LayerScope said 24 ms
    # before its front of engine and SGLang's eager prefill were modelled)
    args = ["bench", "--gpu", "b200", "--tp", "8", "--random-input-len", "500", "--random-output-len", "8",
            "--num-prompts", "4", "--max-concurrency", "1"]
    assert main([*args, "--engine", "sglang", "--json"]) == 0
    sglang = json.loads(capsys.readouterr().out)
    assert main([*args, "--json"]) == 0
    vllm = json.loads(capsys.readouterr().out)
    assert sglang["engine"] == "sglang" and vllm["engine"] == "vllm"
    parts = ("mean_frontend_tokenize_ms", "mean_frontend_request_ms", "mean_frontend_response_ms")
    assert sum(sglang[k] for k in parts) == pytest.approx(sglang["mean_frontend_ms"], abs=1e-3)
    assert 5.0 < sglang["mean_frontend_ms"] < 20.0
    assert 24.0 < vllm["median_ttft_ms"] < sglang["median_ttft_ms"] < 65.0
    assert main([*args, "--engine", "sglang"]) == 0
    assert "Mean outside the engine (ms):" in capsys.readouterr().out


def test_bench_routing_flag_sets_the_workloads_routing(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--gpu", "h200", "--tp", "8", "--ep", "8", "--random-input-len", "64", "--random-output-len", "8",
            "--num-prompts", "8", "--json"]
    tpot = {}
    for routing in ("balanced", "uniform"):
        assert main([*args, "--routing", routing]) == 0
        tpot[routing] = json.loads(capsys.readouterr().out)["median_tpot_ms"]
    # 8 decodes, 64 picks over 8 GPUs: balanced gives each GPU 8 rows and experts, uniform's busiest GPU more
    assert tpot["balanced"] < tpot["uniform"]
    assert main([*args, "--routing", "zipf"]) == 2
    assert "choose uniform, balanced, power_law:ALPHA" in capsys.readouterr().err


def test_bench_with_replicas_reports_each_one(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--model", "qwen3-30b-a3b", "--tp", "1", "--random-input-len", "256", "--random-output-len",
            "8", "--num-prompts", "12", "--replicas", "3", "--router", "round_robin"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["replicas"] == 3 and out["router"] == "round_robin"
    assert [out[f"replica{i}_completed"] for i in range(3)] == [4, 4, 4]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Replicas (round_robin)" in text and "\n2       2 " in text
    assert main([*args[:-4], "--replicas", "9"]) == 2
    assert "need 9 GPUs; the deployment has 8" in capsys.readouterr().err


def test_bench_takes_the_data_parallel_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """--dp 8 --tp 1: DP 8 x EP 8; the all-to-all backend reaches the engine (naive gathers every token: slower)."""
    durations = {}
    for backend in ("deepep_low_latency", "naive"):
        args = [*SMALL[:2], "--tp", "1", "--dp", "8", "--weight-dtype", "fp8", "--all2all-backend", backend,
                "--eplb", "32:2", *SMALL[4:], "--json"]
        assert main(["bench", *args]) == 0
        r = json.loads(capsys.readouterr().out)
        assert r["completed"] == 8
        durations[backend] = r["duration"]
    assert durations["naive"] > durations["deepep_low_latency"]
    assert main(["bench", *SMALL[:2], "--tp", "1", "--dp", "8", "--nodes", "2", *SMALL[4:]]) == 2
    assert "fill whole nodes" in capsys.readouterr().err


def test_bench_goodput_as_vllm_bench_serve(capsys: pytest.CaptureFixture[str]) -> None:
    """--goodput: request_goodput (good requests / duration) saved and printed after the request throughput;
    a TTFT SLO no request meets gives 0, one every request meets gives the request throughput."""
    assert main(["bench", *SMALL, "--json", "--goodput", "ttft:100000", "tpot:100000"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["request_goodput"] == pytest.approx(r["request_throughput"], rel=1e-3)
    assert r["slo_attainment_pct"] == 100.0 and r["goodput"] == {"ttft": 100000.0, "tpot": 100000.0}
    assert main(["bench", *SMALL, "--goodput", "ttft:0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("Request throughput"))
    assert lines[i + 1].split() == ["Request", "goodput", "(req/s):", "0.00"]
    assert main(["bench", *SMALL, "--goodput", "itl:5"]) == 2
    assert "one of ttft, tpot, e2el" in capsys.readouterr().err
