"""The vLLM plan priced against aiconfigurator-core's measured tables (issue 18 physics 1, 2, 5, 6, 7)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from layerscope.deployment import DeploymentSpec, shard
from layerscope.hardware import tables
from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import gpu
from layerscope.hardware.kernel import ContextAttentionOp, GemmOp, Kernel, MoeOp
from layerscope.model.config import PRESETS
from layerscope.runtime.sharded import deployed
from layerscope.runtime.vllm import ATTENTION_KERNELS, VllmRuntime, decode_attention_kernel
from layerscope.runtime.vllm_moe import TRITON_DEFAULT_TILES, MoePlacement, moe_kernels
from layerscope.scenario import ScenarioSpec

QWEN = PRESETS["qwen3-235b-a22b"]


def _attention(ks: list[Kernel]) -> Kernel:
    return next(k for k in ks if k.kind == "attention")


@pytest.mark.parametrize("g", ["h100-sxm", "h200", "a100-80g-sxm", "b200"])
def test_several_prompts_in_one_step_are_batched_context_attention(g: str) -> None:
    """Four 1,000-token prompts in one step: the measured batch-4 context attention. Without the table the analytic
    model now gives them an attention shape (within 35%; it had none: GEMM efficiency, 44-61% fast)."""
    plan = VllmRuntime(gpu(g).arch)
    attn = _attention(plan.step_kernels(QWEN, [(1000, 0)] * 4))
    assert attn.op == ContextAttentionOp(4, 1000, 0, 64, 4, 128, "bf16") and attn.attn is not None
    cm = CostModel(gpu(g))
    measured = tables.price(g, attn.op)
    c = cm.cost(attn)
    assert measured is not None and c.source == "measured" and c.time_us == pytest.approx(measured.us)
    assert cm.analytic_cost(attn).time_us == pytest.approx(measured.us, rel=0.35)
    shapeless = CostModel(gpu(g), measured=False).cost(replace(attn, attn=None)).time_us  # what it was priced at
    assert shapeless < 0.7 * measured.us
    # unequal prompts: the same attention FLOPs as the equal batch it is priced as
    mixed = _attention(plan.step_kernels(QWEN, [(1800, 0), (200, 0)]))
    assert mixed.op.batch == 2 and mixed.op.seq_len == round(((1800**2 + 200**2) / 2) ** 0.5)


@pytest.mark.parametrize(("g", "floor"), [("h200", 14.1), ("h100-sxm", 14.1), ("b200", 12.1), ("a100-80g-sxm", 11.9)])
def test_prefill_attention_has_a_per_call_floor(g: str, floor: float) -> None:
    """Measured FA3 is 13-15 us a call at 128 tokens (LayerScope said ~2 us): measured where the table covers it (a
    chunk over a cached prefix as the fresh prompt of equal work), and the analytic fallback keeps the floor."""
    plan = VllmRuntime(gpu(g).arch)
    cm = CostModel(gpu(g))
    fresh = cm.cost(_attention(plan.prefill_chunk(QWEN, 128, 0)))
    assert fresh.source == "measured" and 12.0 <= fresh.time_us <= 17.0
    chunk = cm.cost(_attention(plan.prefill_chunk(QWEN, 128, 256)))
    assert chunk.source == "measured" and chunk.time_us >= fresh.time_us
    analytic = CostModel(gpu(g)).analytic_cost(_attention(plan.prefill_chunk(QWEN, 128, 256)))
    assert analytic.time_us >= floor
    old = CostModel(gpu(g), measured=False).cost(_attention(plan.prefill_chunk(QWEN, 128, 0))).time_us
    assert old < 0.6 * fresh.time_us  # the model as fitted had no floor (H200: 2.5 us against 15.5)


@pytest.mark.parametrize(("g", "streams"), [("a100-80g-sxm", 8), ("h100-sxm", 1), ("b200", 1)])
def test_decodes_beside_a_prefill_chunk_on_fa2_stream_their_kv_once_per_query_head(g: str, streams: int) -> None:
    """vLLM V1 runs a mixed step as one varlen FlashAttention call; FA2 packs a KV head's query heads only when every
    query is one token, so on an A100 each of a tp-8 GPU's 8 query heads reads its one KV head's cache itself: 8 x
    the KV bytes of the same decodes in a step of their own. FA3 and FlashInfer do not (streams 1)."""
    tp8 = shard(QWEN, DeploymentSpec(tp=8))
    assert (tp8.num_attention_heads, tp8.num_key_value_heads) == (8, 1)
    plan = VllmRuntime(gpu(g).arch)
    decodes = [(1, 4000)] * 64

    def decode_kernel(batch: list[tuple[int, int]]) -> Kernel:
        return next(k for k in plan.step_kernels(tp8, batch) if k.attn is not None and k.attn.batch == 64)

    alone, mixed = decode_kernel(decodes), decode_kernel([*decodes, (1024, 0)])
    kv = alone.bytes - alone.attn.batch * 2 * tp8.num_attention_heads * tp8.head_dim * 2.0  # less q in, out
    assert mixed.bytes - alone.bytes == pytest.approx((streams - 1) * kv, rel=0.01)
    assert mixed.attn.kv_heads == streams * alone.attn.kv_heads
    cm = CostModel(gpu(g))
    if streams == 1:
        assert cm.cost(mixed).time_us == pytest.approx(cm.cost(alone).time_us)
    else:  # an MHA-shaped stream no table holds (analytic) against the measured GQA decode: ~6x on an A100
        assert cm.cost(mixed).time_us > 0.6 * streams * cm.cost(alone).time_us


def test_sglang_runs_its_q_k_norms_and_rope_apart() -> None:
    """SGLang's fused qk_norm_rope is opt-in (PR #13998): its decode runs q_norm (k_norm beside it on an alternate
    stream) and then rope, one kernel more a layer than vLLM's fused_qk_norm_rope_kernel."""
    vllm, sglang = VllmRuntime("blackwell"), VllmRuntime("blackwell")
    sglang.engine = "sglang"
    names = [k.name for k in sglang.decode_step(QWEN, 1000) if k.stage == "qk_norm_rope"]
    assert names == ["apply_qk_norm (q_norm; k_norm on an alternate stream)", "apply_rope_with_cos_sin_cache_inplace"]
    assert [k.name for k in vllm.decode_step(QWEN, 1000) if k.stage == "qk_norm_rope"] == ["fused_qk_norm_rope_kernel"]
    cm = CostModel(gpu("b200"))
    extra = sum(cm.cost(k).time_us for k in sglang.decode_step(QWEN, 1000)) - sum(
        cm.cost(k).time_us for k in vllm.decode_step(QWEN, 1000))
    assert 1.0 < extra < 3.0  # one more small launch under CUDA graphs
    deployed_plan, _ = deployed(ScenarioSpec(name="x", model="qwen3-235b-a22b", gpu="b200",
                                             deployment={"tp": 8, "engine": "sglang"}))
    assert deployed_plan.base.engine == "sglang"


def test_sglang_copies_its_q_k_heads_and_runs_them_one_by_one_outside_a_graph() -> None:
    """Qwen3MoeAttention._apply_qk_norm reshapes the qkv split to heads (a copy from two tokens up), and only under
    a CUDA graph capture does k's copy and norm (and set_kv_buffer's v store) go on an alternate stream; a prefill
    batch runs eagerly, each of them in turn."""
    sglang = VllmRuntime("blackwell")
    sglang.engine = "sglang"

    def names(ks: list[Kernel], stage: str) -> list[str]:
        return [k.name.split(" ")[0] for k in ks if k.stage == stage]

    one, many = sglang.decode_step(QWEN, 1000), sglang.step_kernels(QWEN, [(1, 1000)] * 16)
    assert names(one, "qk_norm_rope") == ["apply_qk_norm", "apply_rope_with_cos_sin_cache_inplace"]  # a view
    assert names(many, "qk_norm_rope") == ["direct_copy_kernel", "apply_qk_norm",
                                           "apply_rope_with_cos_sin_cache_inplace"]
    prefill = sglang.prefill_chunk(QWEN, 512, 0)
    assert names(prefill, "qk_norm_rope") == ["direct_copy_kernel", "RMSNormKernel", "direct_copy_kernel",
                                              "RMSNormKernel", "apply_rope_with_cos_sin_cache_inplace"]
    assert names(prefill, "attention")[:2] == ["index_put_kernel", "index_put_kernel"]
    assert names(many, "attention")[0] == "index_put_kernel" and names(many, "attention")[1] != "index_put_kernel"
    # a prefill chunk beside decodes is eager too; vLLM's lists do not change with the step's kind
    assert names(sglang.step_kernels(QWEN, [(512, 0), (1, 1000)]), "qk_norm_rope") == names(prefill, "qk_norm_rope")
    vllm = VllmRuntime("blackwell")
    assert names(vllm.prefill_chunk(QWEN, 512, 0), "qk_norm_rope") == names(vllm.decode_step(QWEN, 1000),
                                                                             "qk_norm_rope")
    # the copies move the bytes of q (and k): same traffic as the norm that reads them
    copy = next(k for k in prefill if k.name.startswith("direct_copy_kernel (q"))
    assert copy.bytes == pytest.approx(2 * 2 * 512 * QWEN.num_attention_heads * QWEN.head_dim)


def _fused(ks: list[Kernel]) -> list[Kernel]:
    return [k for k in ks if k.name == "fused_moe_kernel"]


def test_default_fused_moe_tiles_starve_a_small_grid() -> None:
    """No tuned config file (SGLang 0.5.6 on 8 x B200, vLLM PR #23151's baseline): get_default_config's 16 x 32
    tiles, K step 64, 3 stages. One decode token on Qwen3-235B-A22B tp 8: gate_up is 8 experts x 384/32 = 96 CTAs
    of 2 x 64 x 32 bf16 weights in flight each, so its 25 MB stream waits on the DRAM latency; at 64 tokens the grid
    is ~120 experts wide and the bandwidth bounds it again. Tuned tiles keep the fitted price."""
    h, mi, e, topk = QWEN.hidden_size, QWEN.moe_intermediate_size // 8, QWEN.num_experts, QWEN.num_experts_per_tok
    default, tuned = MoePlacement(moe_tp=8, tiles="default"), MoePlacement(moe_tp=8)
    gate_up, down = _fused(moe_kernels(1, h, mi, e, topk, "bf16", default))
    assert gate_up.inflight_bytes == pytest.approx(8 * (2 * mi // 32) * 2 * 64 * 32 * 2)
    assert down.inflight_bytes == pytest.approx(8 * (h // 32) * 2 * 64 * 32 * 2)  # 192 = 3 K steps: 2 in flight
    assert all(kern.inflight_bytes == 0 for kern in _fused(moe_kernels(1, h, mi, e, topk, "bf16", tuned)))
    cm = CostModel(gpu("b200"))

    def experts_us(t: int, p: MoePlacement) -> float:
        return sum(cm.cost(kern).time_us for kern in _fused(moe_kernels(t, h, mi, e, topk, "bf16", p)))

    assert experts_us(1, default) > experts_us(1, tuned) + 8.0  # ~+10 us a layer, ~+0.9 ms a decode step
    assert experts_us(64, default) == pytest.approx(experts_us(64, tuned))
    assert TRITON_DEFAULT_TILES[("bf16", False)].block_m == 64  # more tokens than experts: the larger tile
    assert experts_us(512, default) == pytest.approx(experts_us(512, tuned))  # a prefill's grid is wide too


def test_fp8_gemms_and_block_fp8_moe_come_from_the_tables() -> None:
    """Block-fp8 (Qwen3-235B-A22B-FP8): GEMMs at large M and the block-fp8 MoE at >= 128 tokens read the measured
    rows (the analytic model was 18-32% and 28-58% fast there); the small-M GEMM rows were timed eagerly and are
    host-bound: the per-tensor fp8 rows on Hopper, analytic on B200."""
    dep = DeploymentSpec(tp=8, ep=8, weight_dtype="fp8")
    for g in ("h200", "b200"):
        cm = CostModel(gpu(g))
        plan = VllmRuntime(gpu(g).arch, placement=None)
        local = shard(QWEN, DeploymentSpec(tp=1, weight_dtype="fp8"))
        ks = plan.prefill_chunk(local, 16384, 0, "fp8")
        qkv = [k for k in ks if k.stage == "qkv_proj"]
        assert [k.name for k in qkv] == ["per_token_group_quant_fp8", "cutlass_3x_gemm_sm90_fp8_e4m3_scaled_mm"]
        assert all(cm.cost(k).source == "measured" for k in qkv)
        assert qkv[1].op.op == GemmOp(16384, 9216, 4096, "fp8_block")
        decode = [k for k in plan.decode_step(local, 1024, batch=8, dtype="fp8") if k.stage == "qkv_proj"]
        # M = 8: the eager block-fp8 rows are host launch; on Hopper the per-tensor fp8 rows stand in
        assert all(cm.cost(k).source == ("measured" if g == "h200" else "analytic") for k in decode)
        moe = MoeOp(256, 4096, 1536, 128, 8, 1, dep.ep, "fp8_block", "balanced")
        hit = tables.price(g, moe)
        assert hit is not None and hit.table.kernel.startswith("vllm_fp8moe_")


@pytest.mark.parametrize("g", ["h100-sxm", "h200"])
def test_bf16_gemms_at_moderate_m_are_measured_on_hopper(g: str) -> None:
    """bf16 GEMMs at M 256-4096 were ~20% slow on Hopper: now the measured cuBLAS rows."""
    cm = CostModel(gpu(g))
    for m in (256, 1000, 4096):
        qkv = next(k for k in VllmRuntime().prefill_chunk(QWEN, m, 0) if k.stage == "qkv_proj")
        c = cm.cost(qkv)
        assert c.source == "measured" and c.time_us == pytest.approx(tables.price(g, qkv.op).us)
        assert c.table.kernel == "torch.nn.functional.linear"


@pytest.mark.parametrize("g", ["h100-sxm", "h200", "b200"])
def test_long_kv_decode_and_streams_reach_the_measured_fraction_of_peak(g: str) -> None:
    """A decode past the measured grid (batch 64 x 128k keys) streams at the measured long-KV rate (87-93% of peak:
    GPU.stream_eff), not the fitted short-context 73%; an ordinary streaming kernel no longer reaches 100% of peak."""
    cm = CostModel(gpu(g))
    k = decode_attention_kernel(gpu(g).arch, 64, 131072, 64 * 131072, 8, 1, 128, "bf16")
    c = cm.cost(k)
    stream_eff = gpu(g).stream_eff
    assert c.source == "analytic" and c.hbm_util <= stream_eff
    if gpu(g).arch == "hopper":  # B200's analytic decode also pays its attention-efficiency compute side: 73%
        assert c.hbm_util >= 0.85 * stream_eff
    copy = Kernel("copy", "x", "memory", 0.0, 8e9)
    assert cm.cost(copy).hbm_util == pytest.approx(stream_eff, rel=0.01) and stream_eff < 0.95
    assert CostModel(gpu(g), measured=False).cost(copy).hbm_util > 0.99  # the model as fitted: 100%


def test_b200_runs_flashinfer_trtllm_attention_and_is_priced_as_such() -> None:
    b200, h200 = VllmRuntime(gpu("b200").arch), VllmRuntime(gpu("h200").arch)
    assert _attention(h200.prefill_chunk(QWEN, 2048, 0)).name == "flash_fwd_kernel"
    prefill = _attention(b200.prefill_chunk(QWEN, 2048, 0))
    decode = _attention(b200.decode_step(QWEN, 4096, batch=8))
    assert (prefill.name, decode.name) == ATTENTION_KERNELS["blackwell"] and "TRT-LLM" in prefill.name
    cm = CostModel(gpu("b200"))
    assert cm.cost(prefill).table.kernel == "vllm_flashinfer_trtllmprefill"
    tp8 = shard(QWEN, DeploymentSpec(tp=8))
    assert cm.cost(_attention(b200.decode_step(tp8, 4096, batch=8))).table.kernel == "vllm_flashinfer_trtllmdecode"
