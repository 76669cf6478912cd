"""The design article's single-layer runtime, on the `article` ModelConfig (int2 weights in groups of 64,
4-bit packed embedding, hidden 2048, 32 heads of 64, dense SwiGLU FFN).

Prefill, per chunk (kernel names as the article prints them):
    qwen3_prefill_norm_kernel          per-token RMSNorm
    qwen3_prefill_dequant_matmul       int2 -> bf16 dequant fused into the QKV GEMM; its epilogue writes K, V
                                       into the chunk's KV pages
    qwen3_prefill_chunk_schedule       the chunk scheduler: page-table remap + barrier (a cheap launch)
    qwen3_prefill_flash_attn_chunked   causal flash attention over the cache so far + the chunk
    qwen3_prefill_dequant_matmul       o_proj (same kernel, another launch)
    qwen3_prefill_ffn_swiglu           gate/up/down with an fp32 sigmoid, residual adds fused

Decode: a five-stage pipeline fused in ONE launch (stream "decode_fused"). Each stage is its own Kernel so
the timeline can show it, but only the norm stage has own_launch=True: each layer pays one launch, and
the engine lays the stages end to end (the embedding row, looked up once per token, rides in layer 0's launch).
    qwen3_decode_embedding_lookup_l2     one packed 4-bit row; an L2 hit when warm (l2_bytes)
    qwen3_decode_rmsnorm_shared_stats    RMSNorm whose statistics are computed once and shared
    qwen3_decode_q_proj_kv_fetch         Q-only projection (the article's words) + fetch of the cached K, V
    qwen3_decode_single_token_attention  one query over the fetched context, then o_proj
    qwen3_decode_ffn_lut_sigmoid         SwiGLU FFN with a lookup-table sigmoid

The first decode step also pays the article's listed fixed costs (ArticleProfile): those, and only those,
are constants. They, and the embedding lookup, are whole-model costs (Kernel.scope="model"): paid once per
model step, not once per layer, and left out of the per-layer stage shares and HBM utilisation.
The article's totals (42 ms prefill layer, 8.3 ms decode step, 7.92 ms pipeline) are observations to compare
with, never inputs: every other time comes out of FLOPs and bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from layerscope.hardware.cost import attention_flops, flash_prefill_bytes
from layerscope.hardware.kernel import AttentionShape, Kernel
from layerscope.model.config import DTYPE_BYTES, ModelConfig
from layerscope.runtime.plan import ACT_BYTES, RuntimePlan, gemm_kernel, stored_weight_dtype, weight_bytes

FUSED_STREAM = "decode_fused"


@dataclass(frozen=True)
class ArticleProfile:
    """The fixed costs the article lists, as named, editable constants."""

    quant_context_switch_us: float = 1200.0  # switching the quantization context from prefill to decode
    init_us: float = 800.0  # decode pipeline initialisation
    l2_warmup_us: float = 300.0  # first touch of the L2-resident data (embedding rows, LUT)
    sla_ms: float = 10.0  # decode step latency SLA
    lut_entries: int = 256  # sigmoid lookup table (fp16 entries)


class ArticleRuntime(RuntimePlan):
    name = "article"
    default_page_size = 256

    def __init__(self, profile: ArticleProfile | None = None) -> None:
        self.profile = profile or ArticleProfile()

    # -- prefill --------------------------------------------------------------------------------------------------
    def prefill_chunk(self, model: ModelConfig, tokens: int, context_before: int, dtype: str = "bf16") -> list[Kernel]:
        if tokens < 1 or context_before < 0:
            raise ValueError(f"bad chunk: tokens={tokens}, context_before={context_before}")
        m, t, h = model, tokens, model.hidden_size
        w, g = stored_weight_dtype(m), m.quant_group_size
        kv_b = DTYPE_BYTES[m.kv_dtype]
        kv_write = 2 * t * m.kv_dim * kv_b
        qkv = gemm_kernel(
            "qwen3_prefill_dequant_matmul", "qkv_proj", t, m.q_dim + 2 * m.kv_dim, h, w, g, extra_out_bytes=kv_write
        )
        pages = -(-t // self.default_page_size)
        return [
            Kernel(
                "qwen3_prefill_norm_kernel",
                "input_norm",
                "norm",
                4.0 * t * h,
                2 * ACT_BYTES * t * h + 2 * h,
                shapes=f"[{t},{h}] per-token RMSNorm",
                ctas=t,
            ),
            qkv,
            Kernel(
                "qwen3_prefill_chunk_schedule",
                "chunk_scheduler",
                "overhead",
                0.0,
                16.0 * pages,
                shapes=f"{pages} pages remapped + barrier",
                ctas=1,
            ),
            Kernel(
                "qwen3_prefill_flash_attn_chunked",
                "attention",
                "attention",
                attention_flops(t, context_before, m.num_attention_heads, m.head_dim, causal=True),
                flash_prefill_bytes(t, context_before, m.q_dim, m.kv_dim, ACT_BYTES, kv_b),
                shapes=f"q[{t},{m.num_attention_heads},{m.head_dim}] x kv[{context_before + t}] causal",
                attn=AttentionShape(t, context_before, m.head_dim, causal=True),
            ),
            gemm_kernel("qwen3_prefill_dequant_matmul", "o_proj", t, h, m.q_dim, w, g),
            self._ffn("qwen3_prefill_ffn_swiglu", t, m, sigmoid_flops=20.0),
        ]

    # -- decode ---------------------------------------------------------------------------------------------------
    def decode_step(self, model: ModelConfig, context_len: int, batch: int = 1, dtype: str = "bf16") -> list[Kernel]:
        if batch < 1 or context_len < 0:
            raise ValueError(f"bad decode step: batch={batch}, context_len={context_len}")
        m, b, h = model, batch, model.hidden_size
        w, g = stored_weight_dtype(m), m.quant_group_size
        kv_b = DTYPE_BYTES[m.kv_dtype]
        row = weight_bytes(h, m.embedding_dtype, 32 if m.embedding_dtype == "int4" else 0)  # one packed row
        q_proj = gemm_kernel(
            "qwen3_decode_q_proj_kv_fetch",
            "qkv_proj",
            b,
            m.q_dim,
            h,
            w,
            g,
            extra_out_bytes=2 * b * context_len * m.kv_dim * kv_b,
        )
        o_proj_w = weight_bytes(h * m.q_dim, w, g)
        attn = Kernel(
            "qwen3_decode_single_token_attention",
            "attention",
            "attention",
            4.0 * b * m.num_attention_heads * m.head_dim * context_len + 2.0 * b * h * m.q_dim,
            o_proj_w + 2 * b * m.q_dim * ACT_BYTES,
            shapes=f"q[{b},{m.num_attention_heads},{m.head_dim}] x kv[{context_len}] (fetched), then o_proj ({w})",
            dtype=m.kv_dtype,
            attn=AttentionShape(1, max(0, context_len - 1), m.head_dim, causal=True),
        )
        stages = [
            Kernel(
                "qwen3_decode_embedding_lookup_l2",
                "embedding",
                "memory",
                0.0,
                b * row + b * h * ACT_BYTES,
                shapes=f"{b} row(s) of [{m.vocab_size},{h}] ({m.embedding_dtype})",
                dtype=m.embedding_dtype,
                l2_bytes=b * row,
                scope="model",  # the token's row is looked up once, before layer 0, not once per layer
            ),
            Kernel(
                "qwen3_decode_rmsnorm_shared_stats",
                "input_norm",
                "norm",
                4.0 * b * h,
                2 * ACT_BYTES * b * h,
                shapes=f"[{b},{h}] shared statistics",
            ),
            q_proj,
            attn,
            self._ffn(
                "qwen3_decode_ffn_lut_sigmoid",
                b,
                m,
                sigmoid_flops=2.0,
                lut_bytes=self.profile.lut_entries * DTYPE_BYTES["fp16"],
            ),
        ]
        # the embedding stage rides in layer 0's launch; every layer pays its own launch at the norm stage
        return [_fused(k, first=k.stage == "input_norm") for k in stages]

    def step_kernels(self, model: ModelConfig, batch: list[tuple[int, int]], dtype: str = "bf16") -> list[Kernel]:
        """The article runs each prompt chunk as its own launches, then the fused decode pipeline once for every
        decoding sequence (batch = their count, context = their mean: the pipeline reads each one's KV)."""
        if not batch:
            raise ValueError("a step needs at least one sequence")
        ks: list[Kernel] = []
        for n, ctx in batch:
            if n > 1 or ctx == 0:  # a decode always has context: a 1-token prompt is a prefill
                ks += self.prefill_chunk(model, n, ctx, dtype)
        decodes = [ctx + 1 for n, ctx in batch if n == 1 and ctx > 0]
        if decodes:
            ks += self.decode_step(model, round(sum(decodes) / len(decodes)), len(decodes), dtype)
        return ks

    def switch_over(self, model: ModelConfig) -> list[Kernel]:
        p = self.profile
        return [
            Kernel(
                "qwen3_quant_context_switch",
                "switch_over",
                "overhead",
                0.0,
                0.0,
                fixed_us=p.quant_context_switch_us,
                dtype="",
                shapes="prefill -> decode quantization context",
                own_launch=False,
                scope="model",
            ),
            Kernel(
                "qwen3_decode_init",
                "switch_over",
                "overhead",
                0.0,
                0.0,
                fixed_us=p.init_us,
                dtype="",
                shapes="decode pipeline initialisation",
                own_launch=False,
                scope="model",
            ),
            Kernel(
                "qwen3_decode_l2_warmup",
                "switch_over",
                "overhead",
                0.0,
                0.0,
                fixed_us=p.l2_warmup_us,
                dtype="",
                shapes="L2 warm-up",
                own_launch=False,
                scope="model",
            ),
        ]

    def _ffn(self, name: str, t: int, m: ModelConfig, sigmoid_flops: float, lut_bytes: float = 0.0) -> Kernel:
        # a MoE model run by the article's runtime gets a dense FFN as wide as its active experts
        h, i = m.hidden_size, m.num_experts_per_tok * m.moe_intermediate_size if m.is_moe else m.intermediate_size
        w = stored_weight_dtype(m)
        w_bytes = weight_bytes(3 * h * i, w, m.quant_group_size)
        flops = 2.0 * t * 3 * h * i + sigmoid_flops * t * i
        return Kernel(
            name,
            "ffn",
            "gemm",
            flops,
            w_bytes + 2 * ACT_BYTES * t * h + lut_bytes,
            shapes=f"x[{t},{h}] @ W_gate,up[{h},{i}], W_down[{i},{h}] ({w})",
            gemm=(t, 2 * i, h),
            dtype=w,
            l2_bytes=lut_bytes,
        )


def _fused(k: Kernel, first: bool) -> Kernel:
    return replace(k, stream=FUSED_STREAM, own_launch=first)
