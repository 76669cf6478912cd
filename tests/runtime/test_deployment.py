"""Deployment: one GPU's shard, and its memory placement checked against a hand computation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from layerscope.deployment import (
    BLOCK_SIZE,
    CUDA_GRAPH_GIB,
    NON_TORCH_GIB,
    DeploymentError,
    DeploymentSpec,
    kv_replication,
    place,
    shard,
)
from layerscope.hardware.cost import CostModel, expected_distinct_experts
from layerscope.hardware.gpus import GiB, gpu
from layerscope.model.config import preset
from layerscope.runtime.runtimes import get_runtime
from layerscope.runtime.sharded import (
    EAGER_LAUNCH_FLOOR_US,
    SGLANG_EAGER_LAUNCH_US,
    ShardedRuntime,
    sglang_launch_waits,
)
from layerscope.scenario import ScenarioSpec

QWEN = preset("qwen3-235b-a22b")


def test_tp8_splits_heads_and_replicates_the_four_kv_heads() -> None:
    local = shard(QWEN, DeploymentSpec(tp=8))
    assert local.num_attention_heads == 8
    assert local.num_key_value_heads == 1  # 4 KV heads over 8 GPUs: one each, every head on 2 GPUs
    assert kv_replication(QWEN, 8) == 2 and kv_replication(QWEN, 4) == 1
    assert local.num_experts == 128 and local.moe_intermediate_size == 192  # moe_tp = 8
    assert local.vocab_size == 151936 // 8
    assert local.hidden_size == QWEN.hidden_size and local.num_hidden_layers == 94


def test_expert_parallel_keeps_the_distinct_expert_formula() -> None:
    local = shard(QWEN, DeploymentSpec(tp=8, ep=8))
    assert (local.num_experts, local.num_experts_per_tok, local.moe_intermediate_size) == (16, 1, 1536)
    for n in (1, 7, 64, 4096):  # each GPU sees 1/ep of the experts the batch touches
        whole = expected_distinct_experts(n, 128, 8)
        assert expected_distinct_experts(n, local.num_experts, local.num_experts_per_tok) * 8 == pytest.approx(whole)


def test_placement_matches_a_hand_computation() -> None:
    p = place(QWEN, gpu("h200"), DeploymentSpec(tp=8), max_num_batched_tokens=8192)
    # Weights of one layer on one GPU (parameters): q 4096x1024, k and v 4096x128 each, o 1024x4096,
    # norms 2x4096 + q/k norm 2x128, 128 experts x 3 x 4096 x 192, router 4096x128; bf16.
    layer = 4096 * 1024 + 2 * 4096 * 128 + 1024 * 4096 + 2 * 4096 + 2 * 128 + 128 * 3 * 4096 * 192 + 4096 * 128
    tables = 2 * (151936 // 8) * 4096  # embedding + lm_head, vocab slice 18992
    weights = 2 * (94 * layer + tables + 4096)
    assert p.weights_bytes == weights
    assert round(weights / GiB, 2) == 54.91
    # KV: one KV head of 128, K and V, bf16, 94 layers.
    assert p.kv_bytes_per_token == 94 * 2 * 128 * 2 == 48128
    # Activation peak at 8192 tokens: hidden + residual, fused_moe caches for top-8 (384 + 192 + 4096 wide), fp32
    # router logits; then (the forward's activations freed) the sampler's three fp32 [256, 151936] copies beside the
    # hidden states: the larger of the two.
    hidden = 2 * 8192 * 4096 * 2
    forward = hidden + 8192 * 8 * (384 + 192 + 4096) * 2 + 8192 * 128 * 4
    sampler = hidden + 3 * 256 * 151936 * 4
    act = max(forward, sampler)
    assert act == forward and p.activation_bytes == act
    with_1024_seqs = place(QWEN, gpu("h200"), DeploymentSpec(tp=8), max_num_batched_tokens=8192, max_num_seqs=1024)
    assert with_1024_seqs.activation_bytes == hidden + 3 * 1024 * 151936 * 4  # the sampler's peak is the larger
    budget = 0.9 * gpu("h200").memory_bytes
    kv = budget - weights - act - CUDA_GRAPH_GIB * GiB - NON_TORCH_GIB[2] * GiB
    assert p.kv_cache_bytes == pytest.approx(kv)
    assert p.kv_tokens == int(kv // (BLOCK_SIZE * 48128)) * BLOCK_SIZE
    assert p.max_concurrency == pytest.approx(p.kv_tokens / 40960)
    lines = p.log_lines()
    assert f"GPU KV cache size: {p.kv_tokens:,} tokens" in lines
    assert any(line.startswith("Maximum concurrency for 40,960 tokens per request: ") for line in lines)


def test_fp8_halves_the_expert_weights_and_adds_block_scales() -> None:
    bf16 = place(QWEN, gpu("h200"), DeploymentSpec(tp=4))
    fp8 = place(QWEN, gpu("h200"), DeploymentSpec(tp=4, weight_dtype="fp8"))
    scales_per_expert = 4 * ((2 * 384 // 128) * (4096 // 128) + (4096 // 128) * (384 // 128))
    assert fp8.weights_bytes < 0.52 * bf16.weights_bytes
    assert fp8.weights_bytes > bf16.weights_bytes / 2  # bf16 embedding, lm_head, router and norms, plus scales
    assert scales_per_expert > 0 and fp8.kv_tokens > bf16.kv_tokens


def test_weights_that_do_not_fit_are_refused_with_advice() -> None:
    with pytest.raises(DeploymentError) as e:
        place(QWEN, gpu("h100-sxm"), DeploymentSpec(tp=4))
    assert str(e.value) == ("weights need 109.5 GiB per GPU at tp=4 in bf16; an h100-sxm has 79.2 GiB: "
                            "use tp>=8 or weight_dtype=fp8")


def test_a_scenario_with_a_deployment_that_does_not_fit_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="weights need 109.5 GiB per GPU at tp=4"):
        ScenarioSpec(gpu="h100-sxm", deployment={"tp": 4})
    with pytest.raises(ValidationError, match="multiple of 128"):  # 1536 / 8 = 192: vLLM refuses fp8 blocks too
        ScenarioSpec(gpu="h200", deployment={"tp": 8, "weight_dtype": "fp8"})
    with pytest.raises(ValidationError, match="must divide tp"):
        ScenarioSpec(gpu="h200", deployment={"tp": 8, "ep": 3})
    with pytest.raises(ValidationError, match="max_model_len 262144 needs"):
        ScenarioSpec(gpu="h100-sxm", deployment={"tp": 8, "max_model_len": 262144})
    ok = ScenarioSpec(gpu="h200", deployment={"tp": 8, "ep": 8, "weight_dtype": "fp8"})
    assert ok.deployment is not None and ok.deployment.moe_tp == 1 and ok.free_hbm_gib is None


def test_free_hbm_beside_weights_that_leave_no_room_is_refused_naming_both() -> None:
    serving = {"gpu": "h200", "workload": {"num_requests": 4, "input_len": 100, "output_len": 10}}
    with pytest.raises(ValidationError, match=r"free_hbm_gib 4 GiB and 437.9 GiB of weights per GPU "
                                              r"\(qwen3-235b-a22b at tp=1 in bf16\) exceed the 140.0 GiB of an h200: "
                                              r"use deployment.tp>=4"):
        ScenarioSpec(free_hbm_gib=4, **serving)
    with pytest.raises(ValidationError, match="free_hbm_gib 90 GiB and 54.9 GiB of weights per GPU"):
        ScenarioSpec(free_hbm_gib=90, deployment={"tp": 8}, **serving)
    assert ScenarioSpec(free_hbm_gib=60, deployment={"tp": 8}, **serving).free_hbm_gib == 60
    assert ScenarioSpec(free_hbm_gib=20, model="qwen3-30b-a3b", **serving).deployment is None  # 56.9 GiB fit
    # a one-request run without a deployment is one layer; the article runtime is the article's layer
    assert ScenarioSpec(gpu="h200", free_hbm_gib=60).free_hbm_gib == 60
    assert ScenarioSpec(runtime="article", free_hbm_gib=60, **serving).runtime == "article"


def test_collectives_in_the_step_at_tp8_and_none_at_tp1() -> None:
    from layerscope.hardware.gpus import gpu as gpu_of
    from layerscope.runtime.runtimes import get_runtime
    from layerscope.runtime.sharded import ShardedRuntime, step_extras

    dep = DeploymentSpec(tp=8)
    local = shard(QWEN, dep)
    plan = ShardedRuntime(get_runtime("vllm"), dep, gpu_of("h200"), QWEN)
    ks = plan.decode_step(local, 8192, batch=4)
    comm = [k for k in ks if k.kind == "collective"]
    assert [(k.name, k.stage, k.stream) for k in comm] == [
        ("all_reduce", "attn_all_reduce", "comm"), ("all_reduce", "moe_all_reduce", "comm")]
    assert all("32,768 B over 8 GPUs" in k.shapes for k in comm)  # 4 tokens x 4096 x bf16
    stages = [k.stage for k in ks]
    assert stages.index("attn_all_reduce") == stages.index("o_proj") + 1
    assert stages.index("moe_all_reduce") == len(stages) - 2  # before the residual add
    single = ShardedRuntime(get_runtime("vllm"), DeploymentSpec(tp=1), gpu_of("h200"), QWEN)
    assert not [k for k in single.decode_step(QWEN, 8192, batch=4) if k.kind == "collective"]
    extras = step_extras(QWEN, local, dep, gpu_of("h200"), tokens=4, seqs=4)
    assert [k.stage for k in extras.kernels] == ["embedding", "embedding_all_reduce", "final_norm", "lm_head",
                                                 "logits_all_gather", "sampling"]
    eager = DeploymentSpec(tp=8, cuda_graphs=False)
    assert step_extras(QWEN, local, eager, gpu_of("h200"), 4, 4).host_us > extras.host_us


def test_eager_launches_have_a_host_floor() -> None:
    from layerscope.hardware.cost import CostModel
    from layerscope.hardware.gpus import gpu as gpu_of
    from layerscope.runtime.runtimes import get_runtime
    from layerscope.runtime.sharded import EAGER_LAUNCH_FLOOR_US, ShardedRuntime

    local = shard(QWEN, DeploymentSpec(tp=8))
    cost = CostModel(gpu_of("h200"))
    graphs = ShardedRuntime(get_runtime("vllm"), DeploymentSpec(tp=8), gpu_of("h200"), QWEN).decode_step(local, 1024)
    eager = ShardedRuntime(get_runtime("vllm"), DeploymentSpec(tp=8, cuda_graphs=False), gpu_of("h200"), QWEN)
    eager_ks = eager.decode_step(local, 1024)
    assert min(cost.cost(k).time_us for k in eager_ks) >= EAGER_LAUNCH_FLOOR_US - 1e-9
    assert min(cost.cost(k).time_us for k in graphs) < EAGER_LAUNCH_FLOOR_US


def test_sglang_eager_kernels_wait_for_their_launch_until_the_gpu_has_more_work_than_the_host() -> None:
    """The steady state of a layer launched eagerly, layer after layer: host-bound, it lasts its launches' time and
    a kernel waits less after a long one (the host caught up meanwhile); GPU-bound, nothing waits."""
    small = [2.0, 3.0, 2.0, 1.0]
    waits = sglang_launch_waits(small, 20.0)
    assert sum(small) + sum(waits) == pytest.approx(4 * 20.0)
    assert all(w >= 0.0 for w in waits)
    long_first = sglang_launch_waits([50.0, 2.0, 2.0, 1.0], 20.0)
    # issued at 20 and 40 us, the GPU busy until 50: no wait; the last, issued at 60, waits 6 us
    assert long_first[1:] == pytest.approx([0.0, 0.0, 6.0])
    assert 50.0 + 2.0 + 2.0 + 1.0 + sum(long_first) == pytest.approx(80.0)
    assert sglang_launch_waits([70.0, 2.0, 2.0, 6.0], 20.0) == [0.0] * 4  # 80 us of kernels, 80 of launches
    assert sglang_launch_waits([], 20.0) == []


def test_sglang_eager_prefill_is_bound_by_its_launches_and_vllm_keeps_its_floor() -> None:
    """SGLang's prefill batch (eager) of a few hundred tokens: a layer of 22 mostly small kernels lasts its launches'
    time on the host; a long prompt's layer has more GPU work than launches and is priced as its kernels. vLLM's
    eager steps keep the per-kernel floor."""
    dep = DeploymentSpec(tp=8, engine="sglang")
    local, cost = shard(QWEN, dep), CostModel(gpu("b200"))
    sglang = ShardedRuntime(get_runtime("vllm"), dep, gpu("b200"), QWEN)

    def layer_us(ks: list) -> float:
        return sum(cost.cost(k).time_us for k in ks)

    short = sglang.prefill_chunk(local, 256, 0)
    assert layer_us(short) == pytest.approx(len(short) * SGLANG_EAGER_LAUNCH_US)
    long = sglang.prefill_chunk(local, 8192, 0)
    assert layer_us(long) > len(long) * SGLANG_EAGER_LAUNCH_US
    assert layer_us(long) == pytest.approx(layer_us(sglang.with_collectives(local, sglang.base.prefill_chunk(
        local, 8192, 0), 8192)))  # unchanged: the host ran ahead
    assert layer_us(sglang.decode_step(local, 1024)) < len(short) * SGLANG_EAGER_LAUNCH_US  # a CUDA graph
    vllm_dep = DeploymentSpec(tp=8, cuda_graphs=False)
    vllm = ShardedRuntime(get_runtime("vllm"), vllm_dep, gpu("b200"), QWEN).prefill_chunk(local, 256, 0)
    assert min(cost.cost(k).time_us for k in vllm) == pytest.approx(EAGER_LAUNCH_FLOOR_US)


def test_host_time_is_exposed_without_async_scheduling() -> None:
    from layerscope.hardware.gpus import gpu as gpu_of
    from layerscope.runtime.runtimes import get_runtime
    from layerscope.runtime.sharded import (
        HOST_ASYNC_EXPOSED_US,
        HOST_SYNC_BASE_US,
        HOST_SYNC_PER_SEQ_US,
        ShardedRuntime,
        step_extras,
    )

    local = shard(QWEN, DeploymentSpec(tp=8))
    overlapped = step_extras(QWEN, local, DeploymentSpec(tp=8), gpu_of("h200"), tokens=64, seqs=64)
    sync = step_extras(QWEN, local, DeploymentSpec(tp=8, async_scheduling=False), gpu_of("h200"), 64, 64)
    assert overlapped.host_us == HOST_ASYNC_EXPOSED_US
    assert sync.host_us == pytest.approx(HOST_SYNC_BASE_US + 64 * HOST_SYNC_PER_SEQ_US)  # 0.5 + 1.28 ms
    plan = ShardedRuntime(get_runtime("vllm"), DeploymentSpec(tp=8, async_scheduling=False), gpu_of("h200"), QWEN)
    host = [k for k in plan.outside_layer_kernels(local, [(1, 100)] * 64) if k.stream == "host"]
    assert len(host) == 1 and host[0].fixed_us == sync.host_us and "synchronous" in host[0].shapes


def test_older_engines_keep_the_cuda_graph_pool_out_of_the_kv_budget() -> None:
    profiled = place(QWEN, gpu("h200"), DeploymentSpec(tp=8))
    older = place(QWEN, gpu("h200"), DeploymentSpec(tp=8, cuda_graph_memory_profiled=False))
    assert older.cuda_graph_bytes == 0.0
    assert older.kv_cache_bytes - profiled.kv_cache_bytes == pytest.approx(CUDA_GRAPH_GIB * GiB)


def test_the_serving_pool_is_the_placements_kv_cache_with_no_second_workspace() -> None:
    from layerscope.runtime.recorder import Recorder
    from layerscope.runtime.serving import ServingInstance

    spec = ScenarioSpec(name="pool", gpu="h100-sxm", deployment={"tp": 8},
                        workload={"num_requests": 2, "input_len": 64, "output_len": 2})
    engine = ServingInstance(spec, Recorder([]))
    placement = engine.placement
    assert placement is not None
    # the profile run's activation peak is already out of the placement's KV cache: every block of it is a page
    # (but the few that do not fill the last row of the bank map)
    assert placement.kv_blocks - spec.banks < engine.kv.pool.num_pages <= placement.kv_blocks
    story = ServingInstance(spec.with_overrides({"free_hbm_gib": 10.0}), Recorder([]))
    assert story.kv.pool.num_pages < int(10.0 * GiB // story.kv.page_bytes)  # a story's free HBM keeps its workspace


def test_the_deployment_event_says_how_the_engine_schedules_and_budgets() -> None:
    from layerscope.runtime.deployment import deployment_event

    spec = ScenarioSpec(gpu="h200", deployment={"tp": 8, "async_scheduling": False,
                                                "cuda_graph_memory_profiled": False})
    assert spec.deployment is not None
    ev = deployment_event(spec, place(QWEN, gpu("h200"), spec.deployment))
    assert ev.async_scheduling is False and ev.cuda_graph_memory_profiled is False
    assert ev.per_gpu.cuda_graph_gib == 0.0


def test_communicator_buffers_leave_the_kv_budget_from_vllm_v0_11() -> None:
    """vLLM v0.11.0 sets up NCCL and the custom all-reduce before its memory snapshot (PR #25359): only the profile
    run's own non-torch memory is subtracted, and the cache gains what the older accounting reserved."""
    model, h100 = preset("qwen3-235b-a22b"), gpu("h100-sxm")
    old = place(model, h100, DeploymentSpec(tp=8))
    new = place(model, h100, DeploymentSpec(tp=8, comm_buffers_in_kv_budget=False))
    assert old.non_torch_bytes == pytest.approx(3.58 * GiB)
    assert new.non_torch_bytes == pytest.approx(0.2 * GiB)
    assert (new.kv_cache_bytes - old.kv_cache_bytes) / GiB == pytest.approx(3.58 - 0.2)
    assert new.kv_tokens > old.kv_tokens
