"""One GPU of a deployment: small all-reduces from vLLM's measured custom all-reduce, and the MoE under expert
parallelism priced on the busiest GPU (issue 18 physics 3 and 4)."""

from __future__ import annotations

import pytest

from layerscope.deployment import DeploymentSpec, shard
from layerscope.hardware import tables
from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import gpu
from layerscope.hardware.kernel import AllReduceOp, MoeOp, OpPart
from layerscope.model.config import PRESETS
from layerscope.runtime.sharded import ShardedRuntime, all_reduce_op
from layerscope.runtime.vllm import VllmRuntime

QWEN = PRESETS["qwen3-235b-a22b"]


def _gpu_plan(g: str, dep: DeploymentSpec, routing: str = "uniform") -> tuple[ShardedRuntime, CostModel]:
    return ShardedRuntime(VllmRuntime(), dep, gpu(g), QWEN, routing), CostModel(gpu(g))


@pytest.mark.parametrize(("g", "most_us"), [("h200", 6.0), ("a100-80g-sxm", 7.5)])
def test_a_decode_all_reduce_is_vllm_custom_kernel_as_measured(g: str, most_us: float) -> None:
    """8 GPUs, batch 1: 8 KiB messages, 5.1 us measured on H200 (LayerScope said 10.1), 6.3 us on A100, where vLLM
    runs its custom kernel too."""
    dep = DeploymentSpec(tp=8)
    plan, cm = _gpu_plan(g, dep)
    ks = plan.decode_step(shard(QWEN, dep), 4096, batch=1)
    ars = [k for k in ks if k.kind == "collective" and k.name == "all_reduce"]
    assert len(ars) == 2 and all(k.op == AllReduceOp(8, 8192, "custom") for k in ars)
    for k in ars:
        c = cm.cost(k)
        assert c.source == "measured" and c.table.file.endswith("custom_allreduce_perf.parquet")
        assert c.time_us < most_us and c.time_us < c.parts["analytic_us"]


def test_all_reduce_kernel_choice_follows_vllm() -> None:
    assert all_reduce_op(8, 8 * 2**20, graphs=True) == AllReduceOp(8, 8 * 2**20, "custom")
    assert all_reduce_op(8, 8 * 2**20 + 2, graphs=True).impl == "nccl"  # past the custom kernel's 8 MiB buffer
    assert all_reduce_op(8, 8192, graphs=False).impl == "custom_eager"
    assert all_reduce_op(3, 8192, graphs=True).impl == "nccl"  # a world size the custom kernel refuses


def _experts_us(g: str, dep: DeploymentSpec, tokens: int, routing: str, measured: bool = True) -> float:
    """The experts' time on one GPU: from the measured tables, or the analytic model that prices what they miss."""
    plan = ShardedRuntime(VllmRuntime(), dep, gpu(g), QWEN, routing)
    cm = CostModel(gpu(g))
    price = cm.cost if measured else cm.analytic_cost
    ks = plan.prefill_chunk(shard(QWEN, dep), tokens, 0)
    return sum(price(k).time_us for k in ks if k.stage == "experts")


def test_expert_parallel_moe_is_the_busiest_gpu_as_measured() -> None:
    """H200 bf16 ep 8, 16,384 tokens: 2.36 ms measured (balanced); LayerScope priced the mean GPU at 1.03 ms."""
    dep = DeploymentSpec(tp=8, ep=8)
    plan, _ = _gpu_plan("h200", dep, "balanced")
    ks = plan.prefill_chunk(shard(QWEN, dep), 16384, 0)
    experts = [k for k in ks if k.stage == "experts"]
    assert all(isinstance(k.op, OpPart) for k in experts)
    op = experts[0].op.op
    assert op == MoeOp(16384, 4096, 1536, 128, 8, 1, 8, "bf16", "balanced")
    assert _experts_us("h200", dep, 16384, "balanced") == pytest.approx(2359, rel=0.01)
    # vLLM's expert-map path: align/sort, activation and sum over all tokens x top-k rows on every GPU
    align = next(k for k in experts if k.name == "moe_align_block_size_kernel")
    assert f"sort {16384 * 8} " in align.shapes
    # skewed routing overloads the busiest GPU: dearer, measured and analytic alike
    for measured in (True, False):
        balanced = _experts_us("h200", dep, 16384, "balanced", measured)
        assert balanced < _experts_us("h200", dep, 16384, "uniform", measured)
        assert _experts_us("h200", dep, 16384, "uniform", measured) < _experts_us("h200", dep, 16384,
                                                                                   "power_law:1.2", measured)


def test_the_analytic_fallback_prices_the_busiest_gpu_too() -> None:
    """Without tables the experts under ep 8 now pay all rows' align/act/sum and zero-filled outputs and the busiest
    GPU's GEMM rows: 1.82 ms against the measured 2.36 (the mean GPU's 1.03 ms was 56% short)."""
    analytic = _experts_us("h200", DeploymentSpec(tp=8, ep=8), 16384, "balanced", measured=False)
    assert analytic == pytest.approx(2359, rel=0.25)
    assert analytic > 1.6 * 1030


def test_routing_reaches_the_moe_spec_under_every_placement() -> None:
    for dep in (DeploymentSpec(tp=8), DeploymentSpec(tp=8, ep=8), DeploymentSpec(tp=4, ep=2)):
        plan, _ = _gpu_plan("h100-sxm", dep, "power_law:1.01")
        experts = [k for k in plan.decode_step(shard(QWEN, dep), 1024, batch=64) if k.stage == "experts"]
        op = experts[0].op.op
        assert (op.routing, op.ep, op.moe_tp, op.experts, op.topk) == ("power_law:1.01", dep.ep, dep.moe_tp, 128, 8)
        # aiconfigurator-core measured moe_tp x 1 and 1 x ep, not mixed placements: those stay analytic
        assert (tables.price("h100-sxm", op) is not None) == (dep.ep == 1 or dep.moe_tp == 1)


def _layer_us(plan: ShardedRuntime, cm: CostModel, dep: DeploymentSpec, batch: int, stages: set[str]) -> float:
    ks = plan.step_kernels(shard(QWEN, dep), [(1, 2048)] * batch)
    return sum(cm.cost(k).time_us for k in ks if k.stage in stages)


def test_a_decode_batch_runs_the_cuda_graph_of_the_next_captured_size() -> None:
    """vLLM pads a batch of 10 to its captured graph of 16 (cudagraph_capture_sizes 1, 2, 4, 8, 16, ...): the
    GEMMs, MoE and all-reduces run 16 rows and say so; attention runs the 10 real sequences."""
    dep = DeploymentSpec(tp=8)
    plan, cm = _gpu_plan("h100-sxm", dep)
    ks = plan.step_kernels(shard(QWEN, dep), [(1, 2048)] * 10)
    qkv = next(k for k in ks if k.stage == "qkv_proj" and k.gemm is not None)
    assert qkv.gemm[0] == 16 and "padded 10 -> 16" in qkv.shapes
    assert all(k.op == AllReduceOp(8, 16 * QWEN.hidden_size * 2, "custom") for k in ks if k.name == "all_reduce")
    attn = next(k for k in ks if k.stage == "attention" and k.attn is not None)
    assert "padded" not in attn.shapes
    gemm_stages = {"qkv_proj", "o_proj", "router", "experts"}
    padded = _layer_us(plan, cm, dep, 10, gemm_stages)
    assert padded == pytest.approx(_layer_us(plan, cm, dep, 16, gemm_stages))  # priced as the graph of 16
    assert padded > _layer_us(plan, cm, dep, 8, gemm_stages)
    extras = plan.outside_layer_kernels(shard(QWEN, dep), [(1, 2048)] * 10)
    assert "padded 10 -> 16" in next(k for k in extras if k.stage == "embedding").shapes
    assert "padded" not in next(k for k in extras if k.stage == "lm_head").shapes  # the real rows' logits only


def test_a_captured_batch_size_and_an_eager_engine_are_not_padded() -> None:
    dep = DeploymentSpec(tp=8)
    plan, _ = _gpu_plan("h100-sxm", dep)
    assert not any("padded" in k.shapes for k in plan.step_kernels(shard(QWEN, dep), [(1, 2048)] * 16))
    eager = DeploymentSpec(tp=8, cuda_graphs=False)  # --enforce-eager: no graphs, nothing to pad to
    plan, _ = _gpu_plan("h100-sxm", eager)
    ks = plan.step_kernels(shard(QWEN, eager), [(1, 2048)] * 10)
    assert not any("padded" in k.shapes for k in ks)
    assert next(k for k in ks if k.stage == "qkv_proj" and k.gemm is not None).gemm[0] == 10


def test_sglang_pads_decodes_to_its_cuda_graph_bs_and_not_its_eager_prefills() -> None:
    """SGLang's default cuda_graph_bs has 12 (1, 2, 4, 8, 12, 16, 24, ...): 10 runs as 12; a prefill is eager."""
    dep = DeploymentSpec(tp=8, engine="sglang")
    plan, _ = _gpu_plan("b200", dep)
    ks = plan.step_kernels(shard(QWEN, dep), [(1, 2048)] * 10)
    assert next(k for k in ks if k.stage == "qkv_proj" and k.gemm is not None).gemm[0] == 12
    ks = plan.step_kernels(shard(QWEN, dep), [(100, 0)])
    assert next(k for k in ks if k.stage == "qkv_proj" and k.gemm is not None).gemm[0] == 100
