"""Kernel plans of the two runtimes, and the `cost` / `topology` commands that print them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from layerscope.cli import main
from layerscope.events import Topology
from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import gpu
from layerscope.model.config import preset
from layerscope.runtime.article import FUSED_STREAM, ArticleProfile, ArticleRuntime
from layerscope.runtime.runtimes import get_runtime

QWEN = preset("qwen3-235b-a22b")
ARTICLE = preset("article")
H100 = CostModel(gpu("h100-sxm"))
MOE_STAGES = [
    "input_norm",
    "qkv_proj",
    "qk_norm_rope",
    "attention",
    "o_proj",
    "post_norm",
    "router",
    "experts",
    "residual_add",
]
DENSE_STAGES = [
    "input_norm",
    "qkv_proj",
    "qk_norm_rope",
    "attention",
    "o_proj",
    "post_norm",
    "gate_up_proj",
    "act",
    "down_proj",
    "residual_add",
]
LLAMA_CONFIG = {
    "model_type": "llama",
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "torch_dtype": "bfloat16",
}


def _stages(kernels: list) -> list[str]:
    return list(dict.fromkeys(k.stage for k in kernels))


def _total(kernels: list) -> float:
    return H100.total_us(kernels)


def _expert_weight_bytes(kernels: list) -> float:
    return sum(k.bytes for k in kernels if k.name == "fused_moe_kernel")


# -- vllm ------------------------------------------------------------------------------------------------------------
def test_vllm_moe_stages_and_kernel_names() -> None:
    plan = get_runtime("vllm")
    assert plan.default_page_size == 16 and plan.switch_over(QWEN) == []
    prefill = plan.prefill_chunk(QWEN, 4096, 0)
    decode = plan.decode_step(QWEN, 8192)
    assert _stages(prefill) == _stages(decode) == MOE_STAGES
    names = [k.name for k in prefill]
    for expected in (
        "rms_norm_kernel",
        "fused_qk_norm_rope_kernel",
        "reshape_and_cache_flash_kernel",
        "flash_fwd_kernel",
        "fused_add_rms_norm_kernel",
        "topkGatingSoftmax",
        "moe_align_block_size_kernel",
        "act_and_mul_kernel<silu>",
        "moe_sum_kernel",
    ):
        assert expected in names
    assert names.count("fused_moe_kernel") == 2  # gate_up, then down
    assert names[1].startswith("sm90_xmma_gemm_bf16")
    assert "flash_fwd_splitkv_kernel" in [k.name for k in decode]
    assert {k.kind for k in prefill} <= {"norm", "gemm", "attention", "moe", "elementwise", "memory", "overhead"}


def test_moe_reads_only_the_distinct_experts_touched() -> None:
    plan = get_runtime("vllm")
    one_expert = 3 * QWEN.hidden_size * QWEN.moe_intermediate_size * 2  # bf16 gate, up, down
    one_token = _expert_weight_bytes(plan.decode_step(QWEN, 8192))
    chunk = _expert_weight_bytes(plan.prefill_chunk(QWEN, 4096, 0))
    assert one_token == pytest.approx(8 * one_expert, rel=0.01)  # + activations of 8 rows
    weights_in_chunk = chunk - 2 * 4096 * 8 * (QWEN.hidden_size + 3 * QWEN.moe_intermediate_size) * 2 / 2
    assert weights_in_chunk > 127 * one_expert


def test_dense_llama_config(tmp_path: Path) -> None:
    from layerscope.model.config import from_hf

    (tmp_path / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    llama = from_hf(tmp_path / "config.json")
    kernels = get_runtime("vllm").prefill_chunk(llama, 256, 0)
    assert _stages(kernels) == DENSE_STAGES
    assert "rotary_embedding_kernel" in [k.name for k in kernels]  # llama has no q/k norm
    qkv = next(k for k in kernels if k.stage == "qkv_proj")
    assert qkv.gemm == (256, 512 + 2 * 128, 512)


def test_prefill_attention_cost_grows_with_cached_context() -> None:
    plan = get_runtime("vllm")

    def attn(ctx: int) -> float:
        return _total([k for k in plan.prefill_chunk(QWEN, 4096, ctx) if k.stage == "attention"])

    assert attn(0) < attn(4096) < attn(12288)
    assert plan.decode_step(QWEN, 8192, batch=4)[0].flops == 4 * plan.decode_step(QWEN, 8192)[0].flops


def test_bad_arguments_raise_value_error() -> None:
    with pytest.raises(ValueError, match="runtime"):
        get_runtime("sglang")
    with pytest.raises(ValueError):
        get_runtime("vllm").prefill_chunk(QWEN, 0, 0)
    with pytest.raises(ValueError, match="dtype"):
        get_runtime("vllm").decode_step(QWEN, 10, dtype="int3")


# -- article ---------------------------------------------------------------------------------------------------------
def test_article_prefill_kernel_names_in_order() -> None:
    plan = get_runtime("article")
    assert plan.default_page_size == 256
    names = [k.name for k in plan.prefill_chunk(ARTICLE, 4096, 0)]
    assert names == [
        "qwen3_prefill_norm_kernel",
        "qwen3_prefill_dequant_matmul",
        "qwen3_prefill_chunk_schedule",
        "qwen3_prefill_flash_attn_chunked",
        "qwen3_prefill_dequant_matmul",
        "qwen3_prefill_ffn_swiglu",
    ]


def test_article_decode_is_one_fused_launch_of_five_stages() -> None:
    decode = get_runtime("article").decode_step(ARTICLE, 8192)
    assert [k.name for k in decode] == [
        "qwen3_decode_embedding_lookup_l2",
        "qwen3_decode_rmsnorm_shared_stats",
        "qwen3_decode_q_proj_kv_fetch",
        "qwen3_decode_single_token_attention",
        "qwen3_decode_ffn_lut_sigmoid",
    ]
    assert {k.stream for k in decode} == {FUSED_STREAM}
    # each layer pays one launch at its norm stage; the embedding row rides in layer 0's launch
    assert [k.own_launch for k in decode] == [False, True, False, False, False]
    launches = [H100.cost(k).parts["launch_us"] for k in decode]
    # one launch overhead, not five: the launching stage's, at least the fitted cost, at most the GPU's kernel floor
    assert launches[0] == 0.0 and launches[2:] == [0.0, 0.0, 0.0]
    assert H100.constants.launch_us <= launches[1] <= H100.kernel_floor_us
    assert H100.cost(decode[0]).l2_hit > 0  # the embedding row is an L2 hit when warm
    # the lookup happens once per token, before layer 0: a whole-model cost, not one per layer
    assert [k.scope for k in decode] == ["model", "layer", "layer", "layer", "layer"]
    assert {k.scope for k in ArticleRuntime().switch_over(ARTICLE)} == {"model"}


def test_article_switch_over_is_the_profile() -> None:
    kernels = ArticleRuntime().switch_over(ARTICLE)
    assert [k.fixed_us for k in kernels] == [1200.0, 800.0, 300.0]
    assert _total(kernels) == pytest.approx(2300.0)
    edited = ArticleRuntime(ArticleProfile(quant_context_switch_us=100.0)).switch_over(ARTICLE)
    assert _total(edited) == pytest.approx(1200.0)


def test_article_times_come_from_work_not_constants() -> None:
    plan = get_runtime("article")
    wide = replace(ARTICLE, hidden_size=4096)
    assert _total(plan.prefill_chunk(wide, 4096, 0)) > 1.5 * _total(plan.prefill_chunk(ARTICLE, 4096, 0))
    assert _total(plan.decode_step(wide, 256)) > 1.5 * _total(plan.decode_step(ARTICLE, 256))  # weights dominate
    assert _total(plan.decode_step(ARTICLE, 65536)) > _total(plan.decode_step(ARTICLE, 8192))
    assert _total(plan.prefill_chunk(ARTICLE, 2048, 0)) < _total(plan.prefill_chunk(ARTICLE, 4096, 0))
    # and nothing reproduces the article's own totals (42 ms prefill, 8.3 ms decode) by construction
    for t in (_total(plan.prefill_chunk(ARTICLE, 4096, 0)), _total(plan.decode_step(ARTICLE, 8192))):
        assert t not in (42_000.0, 8_300.0, 7_920.0)


# -- topology ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("runtime,model", [("vllm", QWEN), ("article", ARTICLE)])
def test_topology_nodes_are_the_kernel_stages(runtime: str, model: object) -> None:
    plan = get_runtime(runtime)
    topo = plan.topology(model, H100)  # type: ignore[arg-type]
    prefill_stages = _stages(plan.prefill_chunk(model, 4096, 0))  # type: ignore[arg-type]
    assert [n.id for n in topo.prefill.nodes if n.kind != "cache"] == prefill_stages
    for phase in (topo.prefill, topo.decode):
        ids = {n.id for n in phase.nodes}
        assert all(e.source in ids and e.target in ids and e.bytes > 0 for e in phase.edges)
        assert all(n.bound in ("compute", "memory", "latency") for n in phase.nodes if n.kind != "cache")


# -- CLI ---------------------------------------------------------------------------------------------------------------
def _cost_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["cost", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cost_cli_json_for_the_moe_model(capsys: pytest.CaptureFixture[str]) -> None:
    out = _cost_json(capsys, "--model", "qwen3-235b-a22b", "--gpu", "h100-sxm", "--tokens", "4096")
    assert out["model"] == "qwen3-235b-a22b" and out["gpu"] == "h100-sxm"
    assert [s["name"] for s in out["stages"]] == MOE_STAGES
    for s in out["stages"]:
        assert {"name", "kind", "time_us", "flops", "bytes", "bound"} <= set(s)
        assert s["time_us"] > 0 and s["bound"] in ("compute", "memory", "latency")
    assert out["total_us"] == pytest.approx(sum(s["time_us"] for s in out["stages"]))
    decode = _cost_json(capsys, "--phase", "decode", "--context", "8192", "--batch", "1")
    assert decode["total_us"] < out["total_us"] / 5
    assert {s["name"]: s["bound"] for s in decode["stages"]}["experts"] == "memory"
    fp8 = _cost_json(capsys, "--tokens", "4096", "--dtype", "fp8")
    assert fp8["total_us"] < out["total_us"]


def test_cost_cli_llama_config_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_CONFIG))
    out = _cost_json(capsys, "--model", str(path), "--gpu", "a100-80g-sxm", "--tokens", "512")
    assert [s["name"] for s in out["stages"]] == DENSE_STAGES
    assert main(["cost", "--model", str(path), "--tokens", "512"]) == 0
    table = capsys.readouterr().out
    assert "gate_up_proj" in table and "total" in table


@pytest.mark.parametrize(
    "args,word",
    [
        (["--gpu", "v100"], "v100"),
        (["--model", "no-such-model"], "no-such-model"),
        (["--phase", "decode", "--tokens", "4", "--batch", "2"], "--batch"),
    ],
)
def test_cost_cli_bad_input_is_one_line_exit_2(args: list[str], word: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and word in err


def test_topology_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "article-vs-real"]) == 0
    text = capsys.readouterr().out
    assert "prefill" in text and "decode" in text
    assert "qwen3_prefill_flash_attn_chunked" in text and "qwen3_decode_ffn_lut_sigmoid" in text
    assert main(["topology", "article-vs-real", "--json"]) == 0
    topo = Topology.model_validate_json(capsys.readouterr().out)
    assert topo.runtime == "article" and topo.prefill.nodes
    assert main(["topology", "no-such-scenario"]) == 2


@pytest.mark.parametrize("runtime", ["vllm", "article"])
@pytest.mark.parametrize("gpu_name", ["a100-80g-sxm", "h100-sxm", "h200", "b200"])
def test_every_preset_plans_and_prices(runtime: str, gpu_name: str) -> None:
    from layerscope.model.config import PRESETS

    cm, plan = CostModel(gpu(gpu_name)), get_runtime(runtime)
    for model in PRESETS.values():
        for kernels in (plan.prefill_chunk(model, 1000, 3000), plan.decode_step(model, 5000, batch=3)):
            times = [cm.cost(k).time_us for k in kernels]
            assert all(0 < t < 1e6 for t in times), model.name
            assert all(k.bytes >= 0 and k.flops >= 0 for k in kernels)


def test_fp8_gemms_quantize_their_activations_first() -> None:
    """vLLM's block-fp8 linear and fused MoE run per_token_group_quant_fp8 before each fp8 GEMM; bf16 does not."""
    from layerscope.model.config import preset

    plan, qwen = get_runtime("vllm"), preset("qwen3-235b-a22b")
    fp8 = plan.decode_step(qwen, 1024, batch=4, dtype="fp8")
    names = [k.name for k in fp8]
    quant = [i for i, n in enumerate(names) if n == "per_token_group_quant_fp8"]
    assert [fp8[i + 1].name for i in quant] == [
        "cutlass_3x_gemm_sm90_fp8_e4m3_scaled_mm", "cutlass_3x_gemm_sm90_fp8_e4m3_scaled_mm",
        "fused_moe_kernel", "fused_moe_kernel"]  # qkv_proj, o_proj, the experts' gate_up and down
    gate_up_quant = fp8[quant[2]]
    assert gate_up_quant.bytes == 4 * 4096 * (2 + 1) + 4.0 * 4 * (4096 // 128)  # bf16 in, fp8 out, fp32 scales
    down_quant = fp8[quant[3]]
    assert "x[32,1536]" in down_quant.shapes  # 4 tokens x top-8 rows of the moe intermediate
    assert "per_token_group_quant_fp8" not in [k.name for k in plan.decode_step(qwen, 1024, batch=4)]


# -- the mixed step ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("runtime", ["vllm", "article"])
def test_step_kernels_of_one_sequence_are_its_chunk_or_its_decode(runtime: str) -> None:
    from layerscope.model.config import PRESETS
    from layerscope.runtime.runtimes import get_runtime

    plan = get_runtime(runtime)
    m = PRESETS["qwen3-235b-a22b" if runtime == "vllm" else "article"]
    assert plan.step_kernels(m, [(4096, 8192)]) == plan.prefill_chunk(m, 4096, 8192)
    assert plan.step_kernels(m, [(1, 0)]) == plan.prefill_chunk(m, 1, 0)  # a 1-token prompt
    assert plan.step_kernels(m, [(1, 999)]) == plan.decode_step(m, 1000)
    with pytest.raises(ValueError):
        plan.step_kernels(m, [])


def test_a_mixed_step_prices_gemms_over_all_tokens_and_attention_per_sequence() -> None:
    from layerscope.model.config import PRESETS
    from layerscope.runtime.runtimes import get_runtime

    plan, m = get_runtime("vllm"), PRESETS["qwen3-235b-a22b"]
    mixed = plan.step_kernels(m, [(1, 1000), (1, 3000), (500, 200)])
    qkv = next(k for k in mixed if k.stage == "qkv_proj")
    assert qkv.gemm is not None and qkv.gemm[0] == 502  # every token of the step in one GEMM
    attn = [k for k in mixed if k.kind == "attention"]
    assert [k.name for k in attn] == ["flash_fwd_kernel", "flash_fwd_splitkv_kernel"]
    prefill = plan.prefill_chunk(m, 500, 200)
    assert attn[0].flops == next(k for k in prefill if k.kind == "attention").flops  # the chunk over its context
    one, other = (next(k for k in plan.decode_step(m, c) if k.kind == "attention") for c in (1001, 3001))
    assert attn[1].flops == pytest.approx(one.flops + other.flops)  # each decode reads its own KV
    assert attn[1].bytes == pytest.approx(one.bytes + other.bytes)
    experts = [k for k in mixed if k.name == "fused_moe_kernel"]
    assert experts[0].groups == 128  # 502 tokens x top-8 touch (almost) every one of the 128 experts
    two = plan.step_kernels(m, [(1, 1000), (1, 3000)])
    assert next(k for k in two if k.name == "fused_moe_kernel").groups == round(128 * (1 - (1 - 8 / 128) ** 2))
