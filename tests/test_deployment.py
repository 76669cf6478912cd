"""layerscope/deployment.py's data-parallel layout (issue 20): the fields, their refusals, placement per rank."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from layerscope.deployment import DeploymentSpec, place, rank_placements
from layerscope.hardware.gpus import GiB, gpu
from layerscope.model.config import preset

QWEN = preset("qwen3-235b-a22b")


def test_dp_spreads_the_experts_over_every_gpu() -> None:
    dep = DeploymentSpec(dp=8, weight_dtype="fp8")
    assert (dep.ep, dep.moe_tp, dep.world_size) == (8, 1, 8)  # ep = dp x tp, as --enable-expert-parallel
    ranks = rank_placements(QWEN, place(QWEN, gpu("h200"), dep), dep)
    assert [r.gpus for r in ranks] == [(g,) for g in range(8)]
    assert [r.experts[0] for r in ranks] == [(16 * g, 16 * g + 15) for g in range(8)]  # 128 experts / 8
    assert {r.node for r in ranks} == {0}


def test_each_rank_holds_whole_attention_and_its_own_kv() -> None:
    """DP 8 x tp 1: each GPU keeps all 4 KV heads (no replication) and an eighth of the experts, so it holds more
    attention weight than at TP 8 but a KV cache of its own; the eight caches together hold more tokens than TP 8's
    one (whose 4 KV heads are replicated twice over 8 GPUs)."""
    h200 = gpu("h200")
    tp8 = place(QWEN, h200, DeploymentSpec(tp=8, ep=8, weight_dtype="fp8"))
    dp8 = place(QWEN, h200, DeploymentSpec(dp=8, weight_dtype="fp8"))
    assert dp8.weights_bytes > tp8.weights_bytes
    assert dp8.num_gpus == tp8.num_gpus == 8
    assert dp8.kv_replication == 1 and tp8.kv_replication == 2
    assert 8 * dp8.kv_tokens > tp8.kv_tokens


def test_two_nodes_place_ranks_on_both() -> None:
    dep = DeploymentSpec(dp=16, nodes=2, weight_dtype="fp8")
    ranks = rank_placements(QWEN, place(QWEN, gpu("h100-sxm"), dep), dep)
    assert [r.node for r in ranks] == [0] * 8 + [1] * 8
    assert ranks[15].experts == ((120, 127),)


def test_eplb_costs_the_redundant_experts_memory() -> None:
    h200 = gpu("h200")
    plain = place(QWEN, h200, DeploymentSpec(dp=8, weight_dtype="fp8"))
    eplb = place(QWEN, h200, DeploymentSpec(dp=8, weight_dtype="fp8", eplb={"num_redundant_experts": 32}))
    # 32 redundant over 8 GPUs: 4 more experts per GPU in each of 94 layers; an fp8 expert is 3 x 4096 x 1536 bytes
    # plus its block scales
    per_expert = 3 * 4096 * 1536 + 4 * (2 * 1536 // 128 * 4096 // 128 + 4096 // 128 * 1536 // 128)
    assert eplb.weights_bytes - plain.weights_bytes == pytest.approx(94 * 4 * per_expert)
    assert eplb.kv_cache_bytes < plain.kv_cache_bytes
    assert (eplb.weights_bytes - plain.weights_bytes) / GiB == pytest.approx(6.6, abs=0.1)


@pytest.mark.parametrize(("fields", "message"), [
    ({"dp": 16}, "16 GPUs do not fit 1 node(s) of 8: set nodes=2"),
    ({"tp": 16}, "tensor parallelism stays within a node of 8"),
    ({"dp": 2, "tp": 3, "ep": 6}, "tp=3 must divide the node size 8"),
    ({"dp": 4, "tp": 2, "ep": 4}, "ep must be 8"),
    ({"dp": 8, "nodes": 2}, "fill whole nodes (dp x tp = 16)"),
    ({"nodes": 2, "tp": 8}, "nodes=2 with one engine of dp=1"),
    ({"tp": 8, "eplb": {"num_redundant_experts": 8}}, "eplb: expert-parallel load balancing needs dp > 1"),
    ({"dp": 4, "replicas": 2}, "replicas=2 with dp=4: replicas of a data-parallel group are not simulated; set "
                               "replicas=1 (one group of dp x tp = 4 GPUs) or dp=1 (replicas of tp=1 GPUs each)"),
])
def test_layouts_that_cannot_run_are_refused_with_their_figures(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        DeploymentSpec(**fields)


def test_dp_fields_at_their_defaults_are_not_dumped() -> None:
    """A recording's run line holds the spec: a deployment without dp reads as before issue 20."""
    assert set(DeploymentSpec(tp=8).model_dump()) == {
        "tp", "ep", "weight_dtype", "kv_dtype", "gpu_memory_utilization", "cuda_graphs", "cuda_graph_memory_profiled",
        "async_scheduling", "max_model_len", "engine", "fused_moe_config"}
    dumped = DeploymentSpec(dp=4, tp=2, all2all_backend="pplx").model_dump()
    assert (dumped["dp"], dumped["all2all_backend"], "ep" in dumped) == (4, "pplx", False)  # ep = dp x tp
    assert DeploymentSpec.model_validate(dumped) == DeploymentSpec(dp=4, tp=2, all2all_backend="pplx")


def test_a_disaggregated_deployment_describes_itself_in_labels() -> None:
    """The run label of a preset whose compare run drops the pools names them in a few words, not as a model dump."""
    from layerscope.deployment import DisaggregationSpec
    from layerscope.scenario import load_preset, main_label

    assert DisaggregationSpec(decode={"instances": 3, "tp": 8}, prefill={"tp": 8}, link="rdma").describe() == \
        "1P3D tp8/tp8 over rdma"
    assert main_label(load_preset("pd-disaggregated-vs-colocated")) == \
        "deployment.disaggregation=1P1D tp4/tp4 over nvlink"


def test_a_deployment_describes_itself_in_a_few_words_and_names_every_setting_off_its_default() -> None:
    dp = DeploymentSpec(tp=1, dp=8, weight_dtype="fp8")
    assert dp.describe() == "dp 8 x tp 1, ep 8, fp8 weights, deepep_low_latency"
    assert DeploymentSpec(tp=8, ep=8, weight_dtype="fp8").describe() == "tp 8, ep 8, fp8 weights"
    tight = DeploymentSpec(tp=8, gpu_memory_utilization=0.5)
    assert tight.describe() == "tp 8, gpu_memory_utilization=0.5" != DeploymentSpec(tp=8).describe()
    replicas = DeploymentSpec(tp=2, replicas=4).describe()
    assert replicas.startswith("4 x tp 2") and "=" not in replicas
