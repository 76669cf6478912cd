"""One Qwen3-MoE decoder layer in numpy, readable top to bottom (nanoGPT style).

    x ─▶ RMSNorm ─▶ q,k,v proj ─▶ q/k head RMSNorm ─▶ RoPE ─▶ causal GQA attention ─▶ o proj ─▶ (+x) = h
    h ─▶ RMSNorm ─▶ router softmax ─▶ top-k (renormalised) ─▶ SwiGLU experts, weighted sum ─▶ (+h) = y

Dense configs (qwen3, llama, qwen2, article) use one SwiGLU MLP instead of router + experts; qwen2 adds
q/k/v biases. Everything computes in float32, as Hugging Face transformers does in fp32.

Shapes: T new tokens, S cached + new tokens, H hidden, nh query heads, n_kv key/value heads, hd head_dim,
g = nh // n_kv (GQA group), E experts, k experts per token, I expert (or MLP) width.

Weights live in `layer.weights`, a dict keyed by the hub's names without the `model.layers.N.` prefix
(`self_attn.q_proj.weight`, `mlp.experts.7.down_proj.weight`, ...), so checkpoints map 1:1. A value is a
float32 array or any object with `dequantize() -> float32 array` and an optional `bias_comp` vector
(numerics.QuantizedWeight): it is dequantized on every use, so corrupting its storage shows in the output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from layerscope.model.config import ModelConfig
from layerscope.model.kv_cache import PagedKVCache, Placer


class PackedWeight(Protocol):
    """A weight kept in another format (e.g. 2-bit groups), turned into float32 when used."""

    bias_comp: np.ndarray | None  # (out,) added after the matmul, or None
    shape: tuple[int, int]  # (out, in) of the weight it stands for

    def dequantize(self) -> np.ndarray: ...


Weight = np.ndarray | PackedWeight


@dataclass(frozen=True)
class LayerTrace:
    """Intermediates of one forward call, returned (never stored) by `Layer.forward_traced`."""

    x_norm: np.ndarray  # (T, H) attention input after input_layernorm
    attn_out: np.ndarray  # (T, nh*hd) attention output, the o_proj input
    h: np.ndarray  # (T, H) after the first residual add
    h_norm: np.ndarray  # (T, H) MLP input after post_attention_layernorm
    mlp_out: np.ndarray  # (T, H)
    y: np.ndarray  # (T, H)
    router_logits: np.ndarray | None = None  # (T, E)
    topk_idx: np.ndarray | None = None  # (T, k) expert ids, most probable first
    topk_weight: np.ndarray | None = None  # (T, k)
    expert_counts: np.ndarray | None = None  # (E,) tokens routed to each expert

    @property
    def active_experts(self) -> np.ndarray:
        """Ids of experts that received at least one token."""
        return np.array([], dtype=np.int64) if self.expert_counts is None else np.nonzero(self.expert_counts)[0]


def weight_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of one layer, by hub name (without `model.layers.N.`), with its shape."""
    c = config
    h, q, kv, hd = c.hidden_size, c.q_dim, c.kv_dim, c.head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "input_layernorm.weight": (h,),
        "post_attention_layernorm.weight": (h,),
        "self_attn.q_proj.weight": (q, h),
        "self_attn.k_proj.weight": (kv, h),
        "self_attn.v_proj.weight": (kv, h),
        "self_attn.o_proj.weight": (h, q),
    }
    if c.attention_bias:
        shapes |= {"self_attn.q_proj.bias": (q,), "self_attn.k_proj.bias": (kv,), "self_attn.v_proj.bias": (kv,)}
    if c.qk_norm:
        shapes |= {"self_attn.q_norm.weight": (hd,), "self_attn.k_norm.weight": (hd,)}
    if c.is_moe:
        i = c.moe_intermediate_size
        shapes["mlp.gate.weight"] = (c.num_experts, h)
        for e in range(c.num_experts):
            p = f"mlp.experts.{e}."
            shapes |= {p + "gate_proj.weight": (i, h), p + "up_proj.weight": (i, h), p + "down_proj.weight": (h, i)}
    else:
        i = c.intermediate_size
        shapes |= {"mlp.gate_proj.weight": (i, h), "mlp.up_proj.weight": (i, h), "mlp.down_proj.weight": (h, i)}
    return shapes


# -- the boxes of the diagram ---------------------------------------------------------------------
def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm over the last axis, in float32."""
    x = x.astype(np.float32, copy=False)  # (..., D)
    ms = np.mean(x * x, axis=-1, keepdims=True)  # (..., 1)
    return (x / np.sqrt(ms + np.float32(eps))) * weight  # (..., D)


def rotate_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)  # (..., hd)


def rope_cos_sin(positions: np.ndarray, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Non-interleaved RoPE tables for `positions`, computed in float32 as transformers does."""
    inv_freq = 1.0 / (np.float32(theta) ** (np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)))
    freqs = positions.astype(np.float32)[:, None] * inv_freq[None, :]  # (T, hd/2)
    emb = np.concatenate([freqs, freqs], axis=-1)  # (T, hd)
    return np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]  # (T, 1, hd) each, broadcast over heads


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    return x * cos + rotate_half(x) * sin  # (T, heads, hd)


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, num_past: int, block: int = 64) -> np.ndarray:
    """Softmax attention of T new queries over S = num_past + T keys; query i sees keys 0 .. num_past + i.

    q: (T, nh, hd); k, v: (S, n_kv, hd). Query head j reads kv head j // g (GQA). Queries go in blocks of
    `block` tokens, each against only the keys it can see, so the masked half of a prefill is mostly skipped."""
    t, nh, hd = q.shape
    s, n_kv, _ = k.shape
    g = nh // n_kv
    q = q * np.float32(1.0 / np.sqrt(hd))  # (T, nh, hd) scale folded into q
    qg = q.reshape(t, n_kv, g, hd).transpose(1, 0, 2, 3).reshape(n_kv, t * g, hd)  # (n_kv, T*g, hd) rows = (t, g)
    kt = np.ascontiguousarray(k.transpose(1, 2, 0))  # (n_kv, hd, S)
    vh = np.ascontiguousarray(v.transpose(1, 0, 2))  # (n_kv, S, hd)
    out = np.empty((n_kv, t * g, hd), dtype=np.float32)  # (n_kv, T*g, hd)
    for t0 in range(0, t, block):
        t1 = min(t, t0 + block)
        sb = num_past + t1  # keys visible to this block
        scores = qg[:, t0 * g : t1 * g] @ kt[:, :, :sb]  # (n_kv, B*g, Sb)
        future = np.arange(sb)[None, :] > (num_past + np.arange(t0, t1))[:, None]  # (B, Sb)
        mask = np.where(future, np.float32(-np.inf), np.float32(0.0))  # (B, Sb)
        scores.reshape(n_kv, t1 - t0, g, sb)[...] += mask[None, :, None, :]  # (n_kv, B, g, Sb) view
        scores -= scores.max(axis=-1, keepdims=True)  # (n_kv, B*g, Sb)
        np.exp(scores, out=scores)  # unnormalised probabilities
        out[:, t0 * g : t1 * g] = (scores @ vh[:, :sb]) / scores.sum(axis=-1, keepdims=True)  # (n_kv, B*g, hd)
    return out.reshape(n_kv, t, g, hd).transpose(1, 0, 2, 3).reshape(t, nh * hd)  # (T, nh*hd)


def _as_layer_array(w: np.ndarray) -> np.ndarray:
    """float32; matrices column-major, so x @ W.T reads a row-major W.T (the fast case for small GEMMs).
    Arrays already in that form are kept, not copied."""
    if w.ndim != 2:
        return np.ascontiguousarray(w, dtype=np.float32)
    if w.dtype == np.float32 and w.strides[0] == w.itemsize:
        return w
    return np.asfortranarray(w, dtype=np.float32)


def _halves_of(both: np.ndarray | None, gate: np.ndarray, up: np.ndarray) -> bool:
    """Whether gate and up are exactly the top and bottom halves of the column-major (2I, H) array `both`."""
    return (
        both is not None
        and up.base is both
        and both.flags.f_contiguous
        and both.shape == (2 * gate.shape[0], gate.shape[1])
        and gate.ctypes.data == both.ctypes.data
        and up.ctypes.data == both[gate.shape[0] :].ctypes.data
    )


class Layer:
    """One decoder layer: `config` (ModelConfig) and `weights` (hub names -> float32 arrays or packed weights)."""

    def __init__(self, config: ModelConfig, weights: Mapping[str, Weight]) -> None:
        if config.rope_type != "default":
            raise ValueError(f"RoPE type {config.rope_type!r} is not implemented; the numpy layer runs default RoPE")
        self.config = config
        shapes = weight_shapes(config)
        missing = [n for n in shapes if n not in weights]
        if missing:
            raise ValueError(
                f"layer weights lack {missing[0]!r}" + (f" and {len(missing) - 1} more" if missing[1:] else "")
            )
        self.weights: dict[str, Weight] = {}
        for name, shape in shapes.items():
            w = weights[name]
            if isinstance(w, np.ndarray):
                w = _as_layer_array(w)
            got = tuple(w.shape)
            if got != shape:
                raise ValueError(f"weight {name!r} has shape {got}, expected {shape}")
            self.weights[name] = w
        self._gate_up = self._fuse_gate_up()

    def _fuse_gate_up(self) -> dict[str, np.ndarray]:
        """Per MLP/expert prefix, one (2I, H) array holding gate rows then up rows; the `gate_proj` and
        `up_proj` entries of `weights` become views of it, so one matmul serves both (and in-place edits of
        either entry show in it). Packed weights are left alone and take the unfused path."""
        fused: dict[str, np.ndarray] = {}
        prefixes = [f"mlp.experts.{e}." for e in range(self.config.num_experts)] if self.config.is_moe else ["mlp."]
        for p in prefixes:
            gate, up = self.weights[p + "gate_proj.weight"], self.weights[p + "up_proj.weight"]
            if not (isinstance(gate, np.ndarray) and isinstance(up, np.ndarray)):
                continue
            both = gate.base
            # (a layer built from another layer's weights shares its arrays)
            if both is None or not _halves_of(both, gate, up):
                both = np.asfortranarray(np.concatenate([gate, up]))  # (2I, H), column-major
                self.weights[p + "gate_proj.weight"], self.weights[p + "up_proj.weight"] = np.split(both, 2)
            fused[p] = both
        return fused

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def random(cls, config: ModelConfig, seed: int = 0) -> Layer:
        """Seeded random weights: N(0, 1/fan_in) matrices (unit-scale outputs), norm weights near 1."""
        rng = np.random.default_rng(seed)
        weights: dict[str, np.ndarray] = {}
        for name, shape in weight_shapes(config).items():
            if name.endswith("norm.weight"):
                w = 1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)
            elif name.endswith(".bias"):
                w = 0.1 * rng.standard_normal(shape, dtype=np.float32)
            else:
                w = rng.standard_normal(shape, dtype=np.float32) * np.float32(1.0 / np.sqrt(shape[1]))
            weights[name] = w
        return cls(config, weights)

    def new_cache(self, page_size: int = 256, banks: int = 32, placer: Placer | None = None, **kw: Any) -> PagedKVCache:
        """An empty paged KV cache shaped for this layer (extra keywords go to PagedKVCache)."""
        c = self.config
        return PagedKVCache(c.num_key_value_heads, c.head_dim, page_size=page_size, banks=banks, placer=placer, **kw)

    # -- weights ----------------------------------------------------------------------------
    def w(self, name: str) -> np.ndarray:
        """Weight `name` as float32 (dequantized if packed)."""
        w = self.weights[name]
        return w if isinstance(w, np.ndarray) else w.dequantize()

    def linear(self, name: str, x: np.ndarray) -> np.ndarray:
        """x @ W.T (+ bias) (+ quantization bias compensation) for the linear `name` (without `.weight`)."""
        raw = self.weights[name + ".weight"]
        y = x @ self.w(name + ".weight").T  # (T, out)
        if name + ".bias" in self.weights:
            y = y + self.w(name + ".bias")
        comp = getattr(raw, "bias_comp", None)
        return y if comp is None else y + comp

    # -- attention --------------------------------------------------------------------------
    def qkv(self, x: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q (T, nh, hd), k and v (T, n_kv, hd) of normed x: projected, q/k-normed, rotated at `positions`."""
        c = self.config
        t = x.shape[0]
        q = self.linear("self_attn.q_proj", x).reshape(t, c.num_attention_heads, c.head_dim)  # (T, nh, hd)
        k = self.linear("self_attn.k_proj", x).reshape(t, c.num_key_value_heads, c.head_dim)  # (T, n_kv, hd)
        v = self.linear("self_attn.v_proj", x).reshape(t, c.num_key_value_heads, c.head_dim)  # (T, n_kv, hd)
        if c.qk_norm:
            q = rms_norm(q, self.w("self_attn.q_norm.weight"), c.rms_norm_eps)  # (T, nh, hd)
            k = rms_norm(k, self.w("self_attn.k_norm.weight"), c.rms_norm_eps)  # (T, n_kv, hd)
        cos, sin = rope_cos_sin(positions, c.head_dim, c.rope_theta)  # (T, 1, hd)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v  # (T, nh, hd), (T, n_kv, hd), (T, n_kv, hd)

    def attention(self, x: np.ndarray, positions: np.ndarray, cache: PagedKVCache | None) -> np.ndarray:
        q, k, v = self.qkv(x, positions)
        num_past = 0
        if cache is not None:
            num_past = cache.num_tokens
            cache.append(k, v)
            k, v = cache.gather()  # (S, n_kv, hd) each
        return causal_attention(q, k, v, num_past)  # (T, nh*hd)

    def attention_varlen(
        self, x: np.ndarray, positions: np.ndarray, caches: list[PagedKVCache], seq_lens: list[int]
    ) -> np.ndarray:
        """Attention for the flattened tokens of several sequences (a varlen batch): one projection over all
        tokens, then each sequence's queries against its own paged cache (its earlier tokens + its new ones)."""
        q, k, v = self.qkv(x, positions)  # (T, nh, hd), (T, n_kv, hd) x2
        out = np.empty((x.shape[0], q.shape[1] * q.shape[2]), dtype=np.float32)  # (T, nh*hd)
        start = 0
        for cache, n in zip(caches, seq_lens, strict=True):
            rows = slice(start, start + n)  # this sequence's tokens
            num_past = cache.num_tokens
            cache.append(k[rows], v[rows])
            ks, vs = cache.gather()  # (S_i, n_kv, hd) each
            out[rows] = causal_attention(q[rows], ks, vs, num_past)  # (n, nh*hd)
            start += n
        return out

    # -- MLP --------------------------------------------------------------------------------
    def swiglu(self, prefix: str, x: np.ndarray) -> np.ndarray:
        """down(silu(gate(x)) * up(x)) for the MLP or expert at `prefix` (e.g. 'mlp.experts.3.')."""
        both = self._gate_up.get(prefix)
        gate, up = self.weights[prefix + "gate_proj.weight"], self.weights[prefix + "up_proj.weight"]
        if both is not None and isinstance(gate, np.ndarray) and gate.base is both and \
                isinstance(up, np.ndarray) and up.base is both:
            gu = x @ both.T  # (n, 2I) gate and up in one matmul
            g, u = np.split(gu, 2, axis=1)  # (n, I) each
        else:  # packed weights, or entries replaced since construction
            g, u = self.linear(prefix + "gate_proj", x), self.linear(prefix + "up_proj", x)  # (n, I) each
        return self.linear(prefix + "down_proj", silu(g) * u)  # (n, H)

    def route(self, x_normed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Router: softmax over experts in float32, top-k, renormalised when norm_topk_prob.

        Returns (topk_idx (T, k), topk_weight (T, k), router_logits (T, E)); most probable expert first."""
        c = self.config
        logits = self.linear("mlp.gate", x_normed)  # (T, E)
        z = np.exp(logits - logits.max(axis=-1, keepdims=True))  # (T, E)
        probs = z / z.sum(axis=-1, keepdims=True)  # (T, E)
        idx = np.argsort(-probs, axis=-1, kind="stable")[:, : c.num_experts_per_tok]  # (T, k)
        weight = np.take_along_axis(probs, idx, axis=-1)  # (T, k)
        if c.norm_topk_prob:
            weight = weight / weight.sum(axis=-1, keepdims=True)  # (T, k)
        return idx, weight.astype(np.float32), logits

    def moe(self, x: np.ndarray, idx: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """Weighted sum of each token's top-k experts, grouped by expert: one SwiGLU call per active expert."""
        t, k = idx.shape
        flat = idx.reshape(-1)  # (T*k,) expert of each (token, slot)
        order = np.argsort(flat, kind="stable")  # (T*k,) (token, slot) pairs grouped by expert
        counts = np.bincount(flat, minlength=self.config.num_experts)  # (E,)
        ends = np.cumsum(counts)  # (E,)
        x_sorted = x[order // k]  # (T*k, H) each token once per expert it chose, grouped by expert
        out_sorted = np.empty_like(x_sorted)  # (T*k, H)
        for e in np.nonzero(counts)[0]:
            rows = slice(ends[e] - counts[e], ends[e])  # this expert's group
            out_sorted[rows] = self.swiglu(f"mlp.experts.{e}.", x_sorted[rows])  # (n_e, H)
        out = np.empty_like(out_sorted)  # (T*k, H)
        out[order] = out_sorted
        return np.einsum("tkh,tk->th", out.reshape(t, k, -1), weight)  # (T, H)

    # -- the layer --------------------------------------------------------------------------
    def forward(self, x: np.ndarray, positions: np.ndarray, cache: PagedKVCache | None = None) -> np.ndarray:
        """y (T, H) for x float32 (T, H) at integer `positions` (T,).

        Without a cache: causal self-attention over x. With one: this call's K/V (after k-norm and RoPE) are
        appended, and new token i attends to every cached token and to new tokens 0..i."""
        return self.forward_traced(x, positions, cache)[0]

    def forward_varlen(
        self, x: np.ndarray, positions: np.ndarray, caches: list[PagedKVCache], seq_lens: list[int]
    ) -> tuple[np.ndarray, LayerTrace]:
        """One forward over an engine step's flattened tokens: x (T, H) holds seq_lens[i] tokens of sequence i in
        order, each at its own positions and appended to its own cache (caches[i]). Everything but attention is
        per token, so each sequence's rows equal its own forward."""
        if sum(seq_lens) != np.asarray(x).shape[0] or len(seq_lens) != len(caches) or min(seq_lens, default=1) < 1:
            raise ValueError(f"seq_lens {seq_lens} must be >= 1 each, one per cache, summing to the {len(x)} rows")
        return self.forward_traced(x, positions, attend=lambda xn, pos: self.attention_varlen(xn, pos, caches,
                                                                                             seq_lens))

    def forward_traced(
        self,
        x: np.ndarray,
        positions: np.ndarray,
        cache: PagedKVCache | None = None,
        attend: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    ) -> tuple[np.ndarray, LayerTrace]:
        """`forward`, also returning the intermediates (router decision, expert counts, ...) as a LayerTrace.
        `attend(x_norm, positions)` replaces the attention over `cache` (forward_varlen's per-sequence one)."""
        c = self.config
        x = np.asarray(x, dtype=np.float32)  # (T, H)
        positions = np.asarray(positions)  # (T,)
        if x.ndim != 2 or x.shape[1] != c.hidden_size:
            raise ValueError(f"x must have shape (T, {c.hidden_size}); got {x.shape}")
        if positions.shape != (x.shape[0],) or not np.issubdtype(positions.dtype, np.integer):
            raise ValueError(
                f"positions must be integers of shape ({x.shape[0]},); got {positions.dtype} {positions.shape}"
            )
        x_norm = rms_norm(x, self.w("input_layernorm.weight"), c.rms_norm_eps)  # (T, H)
        attn_out = attend(x_norm, positions) if attend else self.attention(x_norm, positions, cache)  # (T, nh*hd)
        h = x + self.linear("self_attn.o_proj", attn_out)  # (T, H) first residual
        h_norm = rms_norm(h, self.w("post_attention_layernorm.weight"), c.rms_norm_eps)  # (T, H)
        routing: dict[str, np.ndarray] = {}
        if c.is_moe:
            idx, weight, logits = self.route(h_norm)  # (T, k), (T, k), (T, E)
            mlp_out = self.moe(h_norm, idx, weight)  # (T, H)
            counts = np.bincount(idx.reshape(-1), minlength=c.num_experts)  # (E,)
            routing = dict(router_logits=logits, topk_idx=idx, topk_weight=weight, expert_counts=counts)
        else:
            mlp_out = self.swiglu("mlp.", h_norm)  # (T, H)
        y = h + mlp_out  # (T, H) second residual
        trace = LayerTrace(x_norm=x_norm, attn_out=attn_out, h=h, h_norm=h_norm, mlp_out=mlp_out, y=y, **routing)
        return y, trace

    __call__ = forward
