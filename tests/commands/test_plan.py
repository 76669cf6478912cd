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
