"""`layerscope plan`: vLLM's startup lines, the JSON per GPU, and one-line refusals."""

from __future__ import annotations

import json

import pytest

from layerscope.cli import main
from layerscope.deployment import DeploymentSpec, place
from layerscope.hardware.gpus import gpu
from layerscope.model.config import preset


def test_plan_json_gives_the_placement_per_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--gpu", "h200", "--tp", "8", "--max-num-batched-tokens", "4096", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # max_num_seqs left out: vLLM's H200 default, 1024 (at most the 4096 batched tokens)
    want = place(preset("qwen3-235b-a22b"), gpu("h200"), DeploymentSpec(tp=8), 4096, 1024).per_gpu()
    assert out["per_gpu"] == want
    assert set(want) >= {"weights_gib", "activation_gib", "cuda_graph_gib", "kv_cache_gib", "kv_tokens",
                         "kv_bytes_per_token", "max_concurrency"}
    assert out["shard"]["kv_heads"] == 1 and out["shard"]["kv_replication"] == 2
    assert out["per_gpu"]["weights_gib"] == 54.91


@pytest.mark.parametrize(("gpu_name", "tokens", "seqs"), [("h200", 8192, 1024), ("a100-80g-sxm", 2048, 256)])
def test_plan_defaults_are_vllms_for_the_gpu(gpu_name: str, tokens: int, seqs: int,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--gpu", gpu_name, "--tp", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["max_num_batched_tokens"], out["max_num_seqs"]) == (tokens, seqs)
    assert out["per_gpu"] == place(preset("qwen3-235b-a22b"), gpu(gpu_name), DeploymentSpec(tp=8), tokens,
                                   seqs).per_gpu()


def test_plan_prints_vllm_log_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--gpu", "h200", "--tp", "4", "--weight-dtype", "fp8", "--max-model-len", "32768"]) == 0
    text = capsys.readouterr().out
    assert "Available KV cache memory: " in text and " GiB" in text
    assert "GPU KV cache size: " in text and " tokens" in text
    assert "Maximum concurrency for 32,768 tokens per request: " in text


def test_plan_refuses_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--gpu", "h100-sxm", "--tp", "4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "weights need 109.5 GiB per GPU at tp=4 in bf16" in err
    assert main(["plan", "--tp", "8", "--ep", "3"]) == 2
    assert "ep=3 must divide tp=8" in capsys.readouterr().err


def test_topology_of_a_deployment_shows_its_collectives(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "real-qwen3-235b-h200", "--json"]) == 0
    topo = json.loads(capsys.readouterr().out)
    for phase in ("prefill", "decode"):
        nodes = {n["id"]: n for n in topo[phase]["nodes"]}
        assert nodes["attn_all_reduce"]["kernels"] == ["all_reduce"]
        assert nodes["moe_all_reduce"]["kind"] == "collective" and nodes["moe_all_reduce"]["bound"] == "latency"


def test_plan_draws_the_node_with_its_replicas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "qwen3-30b-a3b", "--tp", "4", "--replicas", "2", "--router",
                 "least_outstanding_requests", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["replicas"] == 2 and out["router"] == "least_outstanding_requests"
    assert out["replica_gpus"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert out["kv_tokens_all_replicas"] == 2 * out["per_gpu"]["kv_tokens"]
    assert main(["plan", "--model", "qwen3-30b-a3b", "--tp", "1", "--replicas", "8"]) == 0
    assert "8 replicas behind a round_robin router on 8 of 8 GPUs (0: GPU 0," in capsys.readouterr().out


def test_plan_refuses_replicas_past_the_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "qwen3-30b-a3b", "--tp", "4", "--replicas", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "replicas=3 x 4 GPUs each (tp=4) need 12 GPUs; the deployment has 8" in err


def test_plan_prints_each_data_parallel_rank(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--dp", "16", "--tp", "1", "--nodes", "2", "--gpu", "h100-sxm", "--weight-dtype", "fp8",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["dp"], out["ep"], out["nodes"], out["num_gpus"]) == (16, 16, 2, 16)
    assert [r["node"] for r in out["ranks"]] == [0] * 8 + [1] * 8
    assert out["ranks"][3]["experts"] == [[24, 31]]
    assert main(["plan", "--dp", "8", "--tp", "1", "--weight-dtype", "fp8", "--eplb", "32:100"]) == 0
    text = capsys.readouterr().out
    assert "DP rank 7 (node 0, GPU 7): attention tp 1, experts 112-127 + 4 redundant (EPLB)" in text


def test_plan_refuses_a_dp_layout_naming_the_node_size(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--dp", "8", "--tp", "2"]) == 2
    assert "16 GPUs do not fit 1 node(s) of 8: set nodes=2" in capsys.readouterr().err
    assert main(["plan", "--dp", "8", "--tp", "1", "--eplb", "x"]) == 2
    assert "expected REDUNDANT[:INTERVAL]" in capsys.readouterr().err


def test_plan_request_rate_sizes_a_small_grid(capsys: pytest.CaptureFixture[str]) -> None:
    """--request-rate: each candidate (colocated, replicas, dp ranks, xPyD) simulated at the rate; the answer is the
    fewest GPUs meeting the SLOs, and a TTFT SLO too tight for any leaves none; candidates over --max-gpus are left
    out, refusals kept."""
    small = ["plan", "--gpu", "h200", "--request-rate", "4", "--num-prompts", "24", "--random-input-len", "512",
             "--random-output-len", "16", "--tps", "2,4", "--splits", "1P1D", "--json"]
    assert main([*small, "--slo", "ttft:5000,tpot:200"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["candidate"]: r for r in out["candidates"]}
    assert set(rows) == {"colocated tp2", "colocated tp4", "2 replicas tp2", "3 replicas tp2", "4 replicas tp2",
                         "2 replicas tp4", "dp2 tp2", "dp2 tp4", "1P1D tp2", "1P1D tp4", "1P1D tp2 + decode dp2",
                         "1P1D tp4 + decode dp2"}
    assert "weights need" in rows["colocated tp2"]["error"] and not rows["colocated tp2"]["meets_slo"]
    assert rows["1P1D tp4"]["num_gpus"] == 8 and rows["colocated tp4"]["num_gpus"] == 4
    assert rows["2 replicas tp4"]["num_gpus"] == 8 and rows["2 replicas tp4"]["deployment"]["replicas"] == 2
    # dp 2 x tp 2 spreads the experts over 4 GPUs (ep 4), so it fits where one tp-2 engine does not
    assert rows["dp2 tp2"]["num_gpus"] == 4 and "error" not in rows["dp2 tp2"]
    # two replicas share the same load: each sees half, so the TTFT is no worse than one engine's
    assert rows["2 replicas tp4"]["median_ttft_ms"] <= rows["colocated tp4"]["median_ttft_ms"]
    assert out["best"] == "colocated tp4"  # 4 GPUs meet these loose SLOs
    for r in rows.values():
        if "error" not in r:
            assert r["goodput_per_gpu"] == pytest.approx(r["request_goodput"] / r["num_gpus"], abs=1e-4)
    assert main([*small, "--tps", "4", "--max-gpus", "16", "--splits", "1P1D", "--dps", "4"]) == 0
    wide = {r["candidate"]: r for r in json.loads(capsys.readouterr().out)["candidates"]}
    assert wide["4 replicas tp4"]["deployment"]["nodes"] == 2 and "error" not in wide["4 replicas tp4"]
    assert wide["dp4 tp4"]["num_gpus"] == 16
    # a decode pool of 4 DP ranks of tp 1 beside a tp-4 prefill engine: 8 GPUs, its experts over 4 (ep 4)
    split = wide["1P1D tp4 + decode dp4"]
    assert split["num_gpus"] == 8 and split["deployment"]["disaggregation"]["decode"] == {"instances": 1, "tp": 1,
                                                                                           "dp": 4}
    assert main([*small, "--slo", "ttft:1"]) == 0
    assert json.loads(capsys.readouterr().out)["best"] is None
    assert main(["plan", "--request-rate", "4", "--slo", "itl:3"]) == 2
    assert "--slo" in capsys.readouterr().err


def test_plan_break_even_names_the_winner_and_its_margin(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--gpu", "h200", "--request-rate", "4", "--num-prompts", "12", "--random-output-len", "16",
            "--tps", "4", "--splits", "1P1D", "--slo", "ttft:5000,tpot:200", "--break-even",
            "colocated tp4;1P1D tp4", "--input-lens", "256,2048", "--request-rates", "2", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(c["input_len"], c["request_rate"]) for c in out["cells"]] == [(256, 2.0), (2048, 2.0)]
    for c in out["cells"]:
        a, b = c["goodput_per_gpu"]["colocated tp4"], c["goodput_per_gpu"]["1P1D tp4"]
        assert c["winner"] == ("colocated tp4" if a >= b else "1P1D tp4")
        assert c["margin"] == pytest.approx(max(a, b) / min(a, b) - 1, abs=1e-3)
    assert main([*args[:-1], "--break-even", "colocated tp4;nope"]) == 2


def test_plan_request_rate_with_fp8_weights_sizes_each_candidate_as_given(capsys: pytest.CaptureFixture[str]) -> None:
    """fp8 at tp 8 needs ep (block scales): the grid's tp-4 candidates are sized, not refused for a template's tp."""
    assert main(["plan", "--gpu", "h200", "--request-rate", "4", "--num-prompts", "8", "--random-input-len", "256",
                 "--random-output-len", "8", "--tps", "4", "--splits", "1P1D", "--dps", "", "--weight-dtype", "fp8",
                 "--slo", "ttft:5000,tpot:200", "--json"]) == 0
    rows = {r["candidate"]: r for r in json.loads(capsys.readouterr().out)["candidates"]}
    assert set(rows) == {"colocated tp4", "2 replicas tp4", "1P1D tp4"}
    assert all("error" not in r and r["deployment"]["weight_dtype"] == "fp8" for r in rows.values())
