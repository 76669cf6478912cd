"""How vLLM runs one layer of a real model (Qwen3-MoE, Qwen3, Llama-style) on Hopper: the kernels an
nsys profile shows, with their shapes.

    input_norm    rms_norm_kernel
    qkv_proj      cuBLAS GEMM x[T,h] @ W[h, q+2kv]          (fp8: per_token_group_quant_fp8, then CUTLASS scaled_mm;
                                                             every fp8 GEMM below quantizes its input the same way)
    qk_norm_rope  fused_qk_norm_rope_kernel                   (no q/k norm: rotary_embedding_kernel)
    attention     reshape_and_cache_flash_kernel (paged KV write), then
                  flash_fwd_kernel (varlen, causal) | flash_fwd_splitkv_kernel (paged decode)
    o_proj        cuBLAS GEMM
    post_norm     fused_add_rms_norm_kernel                   (residual += attn_out; norm)
    MoE:   router  GEMM x @ W[h, E] + topkGatingSoftmax
           experts moe_align_block_size_kernel, fused_moe_kernel (gate_up), act_and_mul_kernel (silu_and_mul),
                   fused_moe_kernel (down), moe_sum_kernel
    dense: gate_up_proj GEMM, act act_and_mul_kernel, down_proj GEMM
    residual_add  vectorized_elementwise_kernel<add>          (vLLM fuses it into the next layer's norm;
                  kept here so one layer is self-contained)

MoE weights read = the weights of the EXPECTED DISTINCT experts the tokens touch (hardware/cost.py):
a decode token reads 8 of 128 experts, a 4096-token chunk reads them all.
"""

from __future__ import annotations

import bisect
import functools
import math
from operator import itemgetter

from layerscope.hardware.cost import (
    attention_flops,
    decode_attention_bytes,
    flash_prefill_bytes,
)
from layerscope.hardware.kernel import (
    AttentionShape,
    ContextAttentionOp,
    DecodeAttentionOp,
    Kernel,
)
from layerscope.model.config import DTYPE_BYTES, ModelConfig
from layerscope.runtime.plan import ACT_BYTES, RuntimePlan, stored_weight_dtype, weight_bytes
from layerscope.runtime.routing import ExpertTraffic
from layerscope.runtime.vllm_moe import MoePlacement, moe_kernels
from layerscope.runtime.vllm_ops import act_and_mul, linear

# What vLLM runs for attention, per GPU architecture (vLLM's attention backend selection, v0.1x: FlashAttention 2 on
# Ampere, FlashAttention 3 on Hopper through vllm-flash-attn; on Blackwell the FlashInfer backend with its TRT-LLM-gen
# kernels, VLLM_USE_TRTLLM_ATTENTION's default on SM100 -- the kernels aiconfigurator-core's B200 tables measure,
# "vllm_flashinfer_trtllmprefill" / "vllm_flashinfer_trtllmdecode"): (prefill kernel, decode kernel).
ATTENTION_KERNELS = {
    "ampere": ("flash_fwd_kernel", "flash_fwd_splitkv_kernel"),
    "hopper": ("flash_fwd_kernel", "flash_fwd_splitkv_kernel"),
    "blackwell": ("trtllm_fmha_context_kernel (FlashInfer TRT-LLM)", "trtllm_fmha_decode_kernel (FlashInfer TRT-LLM)"),
}


# Where a step's decodes, beside prefill chunks, are not GQA-packed. vLLM V1's FlashAttention backend runs a mixed
# step as ONE flash_attn_varlen_func over every query token (vllm/v1/attention/backends/flash_attn.py), and FA2
# (Ampere) packs a KV head's query heads into one CTA only when max_seqlen_q == 1 (vllm-project/flash-attention
# csrc/flash_attn/flash_api.cpp mha_varlen_fwd, `seqlenq_ngroups_swapped`; vLLM's own use_cascade_attention cites
# it): with a prefill chunk in the step, each query head of a decode reads its KV head's whole cache itself, heads
# the outermost grid dimension (grid (m_block, batch, head)), so a batch's KV is streamed once per query head.
# FA3 (Hopper) packs GQA for every varlen call (hopper/heuristics.h should_pack_gqa: `if (varlen_q) return true`);
# on Blackwell vLLM's FlashInfer backend runs decodes apart.
UNPACKED_MIXED_DECODE = frozenset({"ampere"})


class VllmRuntime(RuntimePlan):
    name = "vllm"
    default_page_size = 16

    def __init__(self, arch: str = "hopper", placement: MoePlacement | None = None) -> None:
        self._parts: dict[tuple[ModelConfig, int, str, bool], tuple[list[Kernel], list[Kernel]]] = {}
        self.arch = arch  # which attention kernels vLLM runs (ATTENTION_KERNELS)
        self.engine = "vllm"  # deployment.engine: "sglang" runs its own q/k norm and rope kernels (_qk_norm_rope)
        self.placement = placement or MoePlacement()
        self.experts: ExpertTraffic | None = None  # the scenario's routing (runtime/routing.py); None: uniform
        # the token counts the engine captured CUDA graphs for, ascending (runtime/sharded.py capture_sizes); empty:
        # no graphs, every kernel runs the step's own token count
        self.capture_sizes: tuple[int, ...] = ()

    def prefill_chunk(self, model: ModelConfig, tokens: int, context_before: int, dtype: str = "bf16") -> list[Kernel]:
        _check(tokens, context_before)
        attn = self._prefill_attention(model, tokens, context_before)
        return self._layer(model, tokens, attn, dtype, eager=self.engine == "sglang")

    def decode_step(self, model: ModelConfig, context_len: int, batch: int = 1, dtype: str = "bf16") -> list[Kernel]:
        _check(batch, context_len)
        attn = self._decode_attention(model, context_len, batch)
        return self._layer(model, batch, attn, dtype)

    def step_kernels(self, model: ModelConfig, batch: list[tuple[int, int]], dtype: str = "bf16") -> list[Kernel]:
        """GEMMs over every token of the step; attention per sequence, merged into one varlen launch per kind
        (prefill chunks attend to their cached context, decodes read their whole KV); MoE over the distinct
        experts all the step's tokens touch."""
        tokens, attn, prefill = self.step_attention(model, batch)
        # SGLang runs a batch with prefill ("extend") tokens eagerly, outside its CUDA graphs (runtime/sharded.py)
        return self._layer(model, tokens, attn, dtype, eager=prefill and self.engine == "sglang")

    def step_attention(self, model: ModelConfig, batch: list[tuple[int, int]]) -> tuple[int, list[Kernel], bool]:
        """The step's token count, its attention kernels, and whether it has a prefill; the rest of its layer is
        `layer_parts` of the token count (the only part a serving run's steps do not share)."""
        if not batch:
            raise ValueError("a step needs at least one sequence")
        news, contexts = zip(*batch, strict=True)
        if min(news) < 1 or min(contexts) < 0:
            for n, ctx in batch:
                _check(n, ctx)
        tokens = sum(news)
        # the prefills (a decode always has context), none in a step of decodes only (most steps): C-speed scans
        prefills = [(n, ctx) for n, ctx in batch if n > 1 or ctx == 0] if tokens > len(batch) or 0 in contexts else []
        num_decodes = len(batch) - len(prefills)
        decode_ctx = sum(contexts) - sum(map(itemgetter(1), prefills)) + num_decodes  # each reads its new token too
        attn: list[Kernel] = []
        if len(prefills) == 1:
            attn += self._prefill_attention(model, *prefills[0])
        elif prefills:
            attn.append(self._varlen_prefill_attention(model, prefills))
        if num_decodes:
            attn += self._decode_attention(model, decode_ctx // num_decodes, num_decodes, decode_ctx,
                                           gqa_packed=not (prefills and self.arch in UNPACKED_MIXED_DECODE))
        return tokens, attn, bool(prefills)

    # -- the layer, around its attention -------------------------------------------------------------------------
    def _layer(self, m: ModelConfig, t: int, attention: list[Kernel], dtype: str,
               eager: bool = False) -> list[Kernel]:
        """The layer's kernels around `attention`; the rest depends only on (model, tokens, dtype, eager), so a
        serving run's thousands of steps share it (Kernels are frozen). `eager`: SGLang outside a CUDA graph."""
        before, after = self.layer_parts(m, t, dtype, eager)
        return [*before, *attention, *after]

    def layer_parts(self, m: ModelConfig, t: int, dtype: str, eager: bool = False
                    ) -> tuple[list[Kernel], list[Kernel]]:
        """The layer's kernels before and after its attention at `t` tokens, memoised (the same lists each step)."""
        key = (m, t, dtype, eager)
        parts = self._parts.get(key)
        if parts is None:
            padded = self.padded_tokens(t, eager)
            parts = self._layer_parts(m, padded, dtype, eager, real=t)
            if padded != t:  # (vLLM's KV store runs the real rows: not marked)
                parts = (_padded(parts[0], t, padded), _padded(parts[1], t, padded))
            self._parts[key] = parts
        return parts

    def padded_tokens(self, t: int, eager: bool = False) -> int:
        """The token count a step of `t` tokens runs its graph at: the smallest captured size >= t (vLLM V1
        gpu_model_runner `pad_for_cudagraph`; SGLang CudaGraphRunner.replay's `bisect_left(capture_bs, raw_bs)`).
        The padded rows are real rows of the persistent input buffers (stale ids of earlier steps), so the GEMMs,
        norms, all-reduces and the MoE (routing them like tokens) run them; attention runs the real sequences
        (padded slots -1 / seq_lens 0 or 1), and the logits only the real ones (logits_indices). Eager (no
        graphs, SGLang's prefill) or above the largest size: unpadded."""
        sizes = self.capture_sizes
        if eager or not sizes or t > sizes[-1]:
            return t
        return sizes[bisect.bisect_left(sizes, t)]

    def _layer_parts(self, m: ModelConfig, t: int, dtype: str, eager: bool = False, real: int | None = None
                     ) -> tuple[list[Kernel], list[Kernel]]:
        """The kernels around attention at `t` tokens (a CUDA graph's padded count; `real` the step's own). vLLM's
        KV store skips the padded rows (their slot_mapping is -1); SGLang's writes them to slot 0 (out_cache_loc
        zeroed in CudaGraphRunner.replay), so it runs all `t`."""
        w = _weight_dtype(m, dtype)
        h = m.hidden_size
        kv_rows = t if real is None or self.engine == "sglang" else real
        ks = [
            _norm("rms_norm_kernel", "input_norm", t, h, fused_add=False),
            *linear(w, "qkv_proj", t, m.q_dim + 2 * m.kv_dim, h),
            *self._qk_norm_rope(m, t, eager),
            *self._kv_write(m, kv_rows, eager),
        ]
        after = [
            *linear(w, "o_proj", t, h, m.q_dim),
            _norm("fused_add_rms_norm_kernel", "post_norm", t, h, fused_add=True),
        ]
        after += self._moe(m, t, w) if m.is_moe else self._mlp(m, t, w)
        after.append(
            Kernel(
                "vectorized_elementwise_kernel<add>",
                "residual_add",
                "elementwise",
                t * h,
                3 * ACT_BYTES * t * h,
                shapes=f"[{t},{h}] + [{t},{h}]",
            )
        )
        return ks, after

    def _qk_norm_rope(self, m: ModelConfig, t: int, eager: bool = False) -> list[Kernel]:
        """vLLM: one fused kernel. SGLang (as of 0.5.6): its fused qk_norm_rope (PR #13998) is behind
        --enable-fused-qk-norm-rope, off by default, so the q/k RMSNorms run before its own rope kernel
        (apply_rope_with_cos_sin_cache_inplace once a layer), as Qwen3MoeAttention._apply_qk_norm writes them:
        `q.reshape(-1, head_dim)` of the qkv split (a view of rows qkv-wide, not viewable as heads beyond one
        token: torch copies it) then q_norm, the same for k; under a CUDA graph capture k's copy and norm run on an
        alternate stream (one copy and one norm on the critical path; SGLang PR #22355's decode trace:
        apply_qk_norm twice a layer), eagerly (a prefill batch) all four one after another."""
        heads = m.num_attention_heads + m.num_key_value_heads
        elems = t * heads * m.head_dim  # q and k rotated (and normalised) in place
        byts = 2 * ACT_BYTES * elems + t * m.head_dim * 4.0  # read+write q,k; cos/sin cache in fp32
        shapes = f"q,k[{t},{heads},{m.head_dim}]"
        if m.qk_norm and self.engine == "sglang":
            rope = Kernel("apply_rope_with_cos_sin_cache_inplace", "qk_norm_rope", "elementwise", 4.0 * elems, byts,
                          shapes=shapes, ctas=t * heads)
            if not eager:
                return [*_reshape_copy("q", t, m.num_attention_heads, m.head_dim),
                        Kernel("apply_qk_norm (q_norm; k_norm on an alternate stream)", "qk_norm_rope", "norm",
                               6.0 * elems, 2 * ACT_BYTES * elems, shapes=shapes, ctas=t * heads),
                        rope]
            out = []
            for part, n in (("q", m.num_attention_heads), ("k", m.num_key_value_heads)):
                e = t * n * m.head_dim
                out += [*_reshape_copy(part, t, n, m.head_dim),
                        Kernel(f"RMSNormKernel ({part}_norm)", "qk_norm_rope", "norm", 6.0 * e, 2 * ACT_BYTES * e,
                               shapes=f"{part}[{t * n},{m.head_dim}]", ctas=t * n)]
            return [*out, rope]
        name = "fused_qk_norm_rope_kernel" if m.qk_norm else "rotary_embedding_kernel"
        flops = (10.0 if m.qk_norm else 4.0) * elems
        return [Kernel(name, "qk_norm_rope", "elementwise", flops, byts, shapes=shapes, ctas=t * heads)]

    def _kv_write(self, m: ModelConfig, t: int, eager: bool = False) -> list[Kernel]:
        """vLLM: one kernel writes k and v into the paged cache. SGLang: MHATokenToKVPool.set_kv_buffer indexes
        `k_buffer[loc] = k` and `v_buffer[loc] = v`, two copies; under a CUDA graph capture v's on an alternate
        stream (one on the critical path), eagerly one after the other (python/sglang/srt/mem_cache/memory_pool.py)."""
        kv_b = DTYPE_BYTES[m.kv_dtype]
        byts = 2 * t * m.kv_dim * (ACT_BYTES + kv_b) + t * 8  # read k, v; write into pages; slot mapping
        if self.engine == "sglang":
            if not eager:
                return [Kernel("index_put_kernel (k_buffer[loc] = k; v on an alternate stream)", "attention",
                               "memory", 0.0, byts, shapes=f"k,v[{t},{m.kv_dim}] -> cache ({m.kv_dtype})", ctas=t)]
            return [Kernel(f"index_put_kernel ({part}_buffer[loc] = {part})", "attention", "memory", 0.0, byts / 2,
                           shapes=f"{part}[{t},{m.kv_dim}] -> cache ({m.kv_dtype})", ctas=t) for part in "kv"]
        return [Kernel(
            "reshape_and_cache_flash_kernel",
            "attention",
            "memory",
            0.0,
            byts,
            shapes=f"k,v[{t},{m.kv_dim}] -> paged cache ({m.kv_dtype})",
            ctas=t,
        )]

    def _prefill_attention(self, m: ModelConfig, t: int, ctx: int) -> list[Kernel]:
        return [prefill_attention_kernel(self.arch, [(t, ctx)], m.num_attention_heads, m.num_key_value_heads,
                                         m.head_dim, m.kv_dtype)]

    def _varlen_prefill_attention(self, m: ModelConfig, seqs: list[tuple[int, int]]) -> Kernel:
        return prefill_attention_kernel(self.arch, seqs, m.num_attention_heads, m.num_key_value_heads, m.head_dim,
                                        m.kv_dtype)

    def _decode_attention(self, m: ModelConfig, ctx: int, batch: int, total_ctx: int | None = None,
                          gqa_packed: bool = True) -> list[Kernel]:
        """`batch` decodes; `total_ctx` is the sum of their context lengths (default batch x ctx). Not `gqa_packed`:
        each query head streams its KV head's cache on its own (UNPACKED_MIXED_DECODE), as many KV streams as heads."""
        total = batch * ctx if total_ctx is None else total_ctx
        kv_heads = m.num_key_value_heads if gqa_packed else m.num_attention_heads
        return [decode_attention_kernel(self.arch, batch, ctx, total, m.num_attention_heads, kv_heads, m.head_dim,
                                        m.kv_dtype)]

    # -- MLP ----------------------------------------------------------------------------------------------------------
    def _mlp(self, m: ModelConfig, t: int, w: str) -> list[Kernel]:
        h, i = m.hidden_size, m.intermediate_size
        return [*linear(w, "gate_up_proj", t, 2 * i, h), act_and_mul("act", t, i), *linear(w, "down_proj", t, h, i)]

    def _moe(self, m: ModelConfig, t: int, w: str) -> list[Kernel]:
        p = self.placement  # a sharded model's experts and top-k are this GPU's: the whole model's are ep times more
        load = self.experts.load(t) if self.experts is not None else None
        return moe_kernels(t, m.hidden_size, m.moe_intermediate_size, m.num_experts * p.ep,
                           m.num_experts_per_tok * p.ep, w, p, load)


def prefill_attention_kernel(arch: str, seqs: list[tuple[int, int]], q_heads: int, kv_heads: int, head_dim: int,
                             kv_dtype: str) -> Kernel:
    """The varlen flash-attention prefill over `seqs` (new tokens, cached tokens) in one launch. Several prompts are
    priced as a batch of equal sequences with the same attention FLOPs: n sequences of sqrt(mean q^2) new tokens
    (the causal square's FLOPs grow with q^2) over the q-weighted mean cached prefix; measured as batched context
    attention (over a cached prefix: the fresh prompt of equal work, hardware/tables equal_work_seq_len)."""
    q_dim, kv_dim = q_heads * head_dim, kv_heads * head_dim
    kv_b = DTYPE_BYTES[kv_dtype]
    flops = sum(attention_flops(t, ctx, q_heads, head_dim, causal=True) for t, ctx in seqs)
    byts = sum(flash_prefill_bytes(t, ctx, q_dim, kv_dim, ACT_BYTES, kv_b) for t, ctx in seqs)
    t = sum(n for n, _ in seqs)
    if len(seqs) == 1:
        q_eq, ctx_eq = seqs[0]
        shapes = f"q[{t},{q_heads},{head_dim}] x kv[{ctx_eq + t},{kv_heads}] causal, varlen"
    else:
        q_eq = max(1, round(math.sqrt(sum(n * n for n, _ in seqs) / len(seqs))))
        ctx_eq = round(sum(n * c for n, c in seqs) / t)
        shapes = f"q[{t},{q_heads},{head_dim}] over {len(seqs)} sequences, causal, varlen"
    return Kernel(
        ATTENTION_KERNELS[arch][0],
        "attention",
        "attention",
        flops,
        byts,
        shapes=shapes,
        attn=AttentionShape(q_eq, ctx_eq, head_dim, causal=True),
        op=ContextAttentionOp(len(seqs), q_eq, ctx_eq, q_heads, kv_heads, head_dim, kv_dtype),
    )


@functools.lru_cache(maxsize=4096)  # pure; a serving run asks again for the same batch x context many steps
def decode_attention_kernel(arch: str, batch: int, ctx: int, total_ctx: int, q_heads: int, kv_heads: int,
                            head_dim: int, kv_dtype: str) -> Kernel:
    """The paged decode vLLM runs on this architecture, measured as generation attention at the mean length."""
    k = paged_decode_kernel(batch, ctx, total_ctx, q_heads, kv_heads, head_dim, DTYPE_BYTES[kv_dtype])
    op = DecodeAttentionOp(batch, max(1, round(total_ctx / batch)), q_heads, kv_heads, head_dim, kv_dtype)
    return k.evolve(name=ATTENTION_KERNELS[arch][1], op=op)


def paged_decode_kernel(batch: int, ctx: int, total_ctx: int, q_heads: int, kv_heads: int, head_dim: int,
                        kv_elem_bytes: float) -> Kernel:
    """flash_fwd_splitkv_kernel over `batch` sequences of `ctx` tokens each on average (`total_ctx` in all): one
    query per sequence reads its whole paged KV. The AttentionShape carries the grid's inputs (batch, KV heads)."""
    q_dim, kv_dim = q_heads * head_dim, kv_heads * head_dim
    flops = 4.0 * q_heads * head_dim * total_ctx
    byts = decode_attention_bytes(1, total_ctx, q_dim, kv_dim, kv_elem_bytes) + (batch - 1) * (2 * q_dim * 2.0)
    return Kernel(
        "flash_fwd_splitkv_kernel",
        "attention",
        "attention",
        flops,
        byts,
        shapes=f"q[{batch},{q_heads},{head_dim}] x paged kv[{ctx}] per sequence",
        attn=AttentionShape(1, ctx - 1, head_dim, causal=True, batch=batch, kv_heads=kv_heads),
    )


def _reshape_copy(part: str, t: int, heads: int, head_dim: int) -> list[Kernel]:
    """SGLang's `q.reshape(-1, head_dim)` of the qkv split: a copy from two tokens up (one token's row is viewable)."""
    if t < 2:
        return []
    e = t * heads * head_dim
    return [Kernel(f"direct_copy_kernel ({part}.reshape(-1, head_dim))", "qk_norm_rope", "elementwise", 0.0,
                   2 * ACT_BYTES * e, shapes=f"{part}[{t},{heads * head_dim}] -> [{t * heads},{head_dim}]", ctas=t)]


def _padded(kernels: list[Kernel], t: int, padded: int) -> list[Kernel]:
    """The kernels of a CUDA graph padded from `t` to `padded` tokens, saying so in their shapes (all but a KV
    store over the `t` real rows)."""
    return [k if k.name.startswith("reshape_and_cache") else
            k.evolve(shapes=f"{k.shapes} (CUDA graph padded {t} -> {padded})") for k in kernels]


def _norm(name: str, stage: str, t: int, h: int, fused_add: bool) -> Kernel:
    passes = 4 if fused_add else 2  # (x, residual) in and out, or x in, y out
    return Kernel(
        name,
        stage,
        "norm",
        (5.0 if fused_add else 4.0) * t * h,
        ACT_BYTES * passes * t * h + 2 * h,
        shapes=f"[{t},{h}]",
        ctas=t,
    )


def _weight_dtype(m: ModelConfig, dtype: str) -> str:
    if dtype not in ("bf16", "fp8"):
        raise ValueError(f"dtype {dtype!r} is not supported by the vllm runtime; choose bf16 or fp8")
    return dtype if dtype == "fp8" else stored_weight_dtype(m)


def _check(n: int, ctx: int) -> None:
    if n < 1:
        raise ValueError(f"need at least one token, got {n}")
    if ctx < 0:
        raise ValueError(f"context length must be >= 0, got {ctx}")


__all__ = ["UNPACKED_MIXED_DECODE", "VllmRuntime", "decode_attention_kernel", "paged_decode_kernel",
           "prefill_attention_kernel", "weight_bytes"]
