"""The numpy decoder layer: cache equivalence (hypothesis), MoE grouping vs a per-token loop, traces, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layerscope.model import Layer, preset
from layerscope.model.layer import rms_norm, silu

TINY = Layer.random(preset("tiny"), seed=3)
DENSE = Layer.random(preset("tiny").scaled(name="tiny-dense", num_experts=0, intermediate_size=96), seed=4)


def inputs(n: int, hidden: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, hidden)).astype(np.float32)


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def split_points(draw: st.DrawFn, n: int) -> list[int]:
    cuts = draw(st.lists(st.integers(1, max(1, n - 1)), max_size=4, unique=True))
    return sorted(c for c in cuts if 0 < c < n)


@st.composite
def cache_case(draw: st.DrawFn) -> tuple[int, list[int], int, int, int]:
    prompt = draw(st.integers(1, 40))
    return (
        prompt,
        split_points(draw, prompt),
        draw(st.integers(0, 4)),
        draw(st.integers(1, 16)),
        draw(st.integers(1, 5)),
    )


@settings(max_examples=25, deadline=None, derandomize=True)
@given(cache_case(), st.booleans())
def test_chunked_prefill_and_decode_through_cache_equal_full_forward(case, dense: bool) -> None:
    prompt, cuts, decode_steps, page_size, banks = case
    layer = DENSE if dense else TINY
    total = prompt + decode_steps
    x = inputs(total, layer.config.hidden_size, seed=prompt)
    positions = np.arange(total) + 5
    full = layer.forward(x, positions)  # (total, H)
    cache = layer.new_cache(page_size=page_size, banks=banks)
    bounds = [0, *cuts, prompt] + list(range(prompt + 1, total + 1))  # prefill chunks, then one-token steps
    pieces = [layer.forward(x[a:b], positions[a:b], cache) for a, b in zip(bounds, bounds[1:], strict=False)]
    assert cache.num_tokens == total and cache.num_pages == -(-total // page_size)
    assert rel_err(np.concatenate(pieces), full) <= 1e-4


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(9, 40), st.integers(2, 8), st.integers(1, 4), st.data())
def test_corrupted_block_table_gives_a_detectably_different_output(
    prompt: int, page_size: int, banks: int, data
) -> None:
    x = inputs(prompt + 1, TINY.config.hidden_size, seed=prompt)
    positions = np.arange(prompt + 1)
    cache = TINY.new_cache(page_size=page_size, banks=banks)
    TINY.forward(x[:prompt], positions[:prompt], cache)
    clean = cache.gather()
    good = TINY.forward(x[prompt:], positions[prompt:], cache.copy())
    page = data.draw(st.integers(0, cache.num_pages - 1))
    targets = [
        (b, s) for b in range(cache.banks) for s in range(cache.pages_per_bank) if (b, s) != cache.block_table[page]
    ]
    bank, slot = data.draw(st.sampled_from(targets))
    cache.set_block_table_entry(page, bank, slot)
    assert not np.array_equal(cache.gather()[0], clean[0])
    bad = TINY.forward(x[prompt:], positions[prompt:], cache)
    assert np.abs(bad - good).max() > 1e-3


def moe_reference(layer: Layer, x: np.ndarray) -> np.ndarray:
    """The MoE block written the slow, obvious way: a Python loop over tokens and their top-k experts."""
    c = layer.config
    out = np.zeros_like(x)
    for t in range(len(x)):
        logits = x[t] @ layer.weights["mlp.gate.weight"].T
        p = np.exp(logits - logits.max())
        p /= p.sum()
        top = np.argsort(-p)[: c.num_experts_per_tok]
        w = p[top] / p[top].sum() if c.norm_topk_prob else p[top]
        for e, we in zip(top, w, strict=True):
            g = layer.weights[f"mlp.experts.{e}.gate_proj.weight"] @ x[t]
            u = layer.weights[f"mlp.experts.{e}.up_proj.weight"] @ x[t]
            out[t] += we * (layer.weights[f"mlp.experts.{e}.down_proj.weight"] @ (g / (1 + np.exp(-g)) * u))
    return out


@pytest.mark.parametrize("norm_topk", [True, False])
def test_vectorised_moe_equals_per_token_loop(norm_topk: bool) -> None:
    layer = Layer(preset("tiny").scaled(norm_topk_prob=norm_topk), TINY.weights)
    x = inputs(37, layer.config.hidden_size, seed=9)
    idx, weight, _ = layer.route(x)
    np.testing.assert_allclose(layer.moe(x, idx, weight), moe_reference(layer, x), rtol=1e-4, atol=1e-5)
    if norm_topk:
        np.testing.assert_allclose(weight.sum(axis=1), 1.0, rtol=1e-6)
    else:
        assert np.all(weight.sum(axis=1) < 1.0)


def test_trace_reports_the_router_decision_and_matches_forward() -> None:
    c = TINY.config
    x = inputs(20, c.hidden_size, seed=2)
    y, trace = TINY.forward_traced(x, np.arange(20))
    np.testing.assert_array_equal(y, TINY.forward(x, np.arange(20)))
    assert trace.topk_idx.shape == (20, c.num_experts_per_tok) and trace.topk_weight.shape == (
        20,
        c.num_experts_per_tok,
    )
    assert trace.expert_counts.sum() == 20 * c.num_experts_per_tok
    assert all(len(set(row)) == c.num_experts_per_tok for row in trace.topk_idx.tolist())
    idx, _, _ = TINY.route(trace.h_norm)
    np.testing.assert_array_equal(idx, trace.topk_idx)
    np.testing.assert_array_equal(trace.active_experts, np.unique(trace.topk_idx))
    np.testing.assert_allclose(trace.y, trace.h + trace.mlp_out)
    _, dense_trace = DENSE.forward_traced(x, np.arange(20))
    assert dense_trace.topk_idx is None and len(dense_trace.active_experts) == 0


def test_first_token_attends_only_to_itself() -> None:
    # with one key, softmax is 1: attention output is that token's V projection, whatever q is
    layer, c = DENSE, DENSE.config
    x = inputs(1, c.hidden_size)
    _, trace = layer.forward_traced(x, np.array([7]))
    v = trace.x_norm @ layer.weights["self_attn.v_proj.weight"].T  # (1, n_kv*hd)
    expect = np.repeat(v.reshape(1, c.num_key_value_heads, 1, c.head_dim), c.gqa_group, axis=2).reshape(1, -1)
    np.testing.assert_allclose(trace.attn_out, expect, rtol=1e-5, atol=1e-6)


def test_positions_matter_through_rope() -> None:
    x = inputs(6, TINY.config.hidden_size)
    a = TINY.forward(x, np.arange(6))
    assert rel_err(TINY.forward(x, np.arange(6) * 3), a) > 1e-3  # other relative offsets: other scores
    # RoPE is relative: shifting every position by the same amount leaves the scores unchanged
    assert rel_err(TINY.forward(x, np.arange(6) + 100), a) < 1e-5


def test_random_is_seeded_and_sane() -> None:
    a, b = Layer.random(preset("tiny"), 11), Layer.random(preset("tiny"), 11)
    c = Layer.random(preset("tiny"), 12)
    name = "mlp.experts.5.up_proj.weight"
    np.testing.assert_array_equal(a.weights[name], b.weights[name])
    assert not np.array_equal(a.weights[name], c.weights[name])
    y = a.forward(inputs(8, 64), np.arange(8))
    assert np.all(np.isfinite(y)) and 0.3 < y.std() < 3


def test_weights_use_hub_names() -> None:
    names = set(TINY.weights)
    assert {
        "input_layernorm.weight",
        "self_attn.q_norm.weight",
        "mlp.gate.weight",
        "mlp.experts.31.down_proj.weight",
    } <= names
    assert "mlp.gate_proj.weight" in DENSE.weights and "mlp.gate.weight" not in DENSE.weights


def test_rms_norm_and_silu() -> None:
    x = np.array([[3.0, 4.0]], np.float32)
    np.testing.assert_allclose(rms_norm(x, np.ones(2, np.float32), 0.0), x / np.sqrt(12.5), rtol=1e-6)
    np.testing.assert_allclose(silu(np.array([0.0, 50.0])), [0.0, 50.0])


def test_bad_inputs_raise_value_error() -> None:
    with pytest.raises(ValueError, match="x must have shape"):
        TINY.forward(np.zeros((3, 5), np.float32), np.arange(3))
    with pytest.raises(ValueError, match="positions must be integers"):
        TINY.forward(np.zeros((3, 64), np.float32), np.arange(3.0))
    weights = dict(TINY.weights)
    del weights["self_attn.k_norm.weight"]
    with pytest.raises(ValueError, match="k_norm"):
        Layer(TINY.config, weights)
    weights["self_attn.k_norm.weight"] = np.ones(3, np.float32)
    with pytest.raises(ValueError, match=r"shape \(3,\), expected \(8,\)"):
        Layer(TINY.config, weights)
    with pytest.raises(ValueError, match="RoPE type 'yarn'"):
        Layer(TINY.config.scaled(rope_type="yarn"), TINY.weights)


def test_weight_edits_in_place_and_replacements_both_reach_the_output() -> None:
    layer = Layer.random(preset("tiny"), 5)
    x = inputs(16, 64, seed=1)
    base = layer.forward(x, np.arange(16))
    experts = np.unique(layer.forward_traced(x, np.arange(16))[1].topk_idx)
    gate = f"mlp.experts.{experts[0]}.gate_proj.weight"
    layer.weights[gate] *= 2.0  # in place: the fused gate|up matmul must see it
    edited = layer.forward(x, np.arange(16))
    assert rel_err(edited, base) > 1e-3
    layer.weights[gate] = layer.weights[gate] / 2.0  # a new array: the unfused path takes over
    np.testing.assert_allclose(layer.forward(x, np.arange(16)), base, rtol=1e-5, atol=1e-5)


def test_a_layer_built_from_another_layers_weights_shares_them() -> None:
    a = Layer.random(preset("tiny"), 6)
    b = Layer(a.config, dict(a.weights))
    for name in ("mlp.experts.2.gate_proj.weight", "mlp.experts.2.up_proj.weight", "self_attn.q_proj.weight"):
        assert np.shares_memory(a.weights[name], b.weights[name])
    x = inputs(5, 64)
    np.testing.assert_array_equal(a.forward(x, np.arange(5)), b.forward(x, np.arange(5)))
    # from C-ordered arrays (as a checkpoint gives them) the values are the same
    c = Layer(a.config, {n: np.ascontiguousarray(w) for n, w in a.weights.items()})
    np.testing.assert_allclose(c.forward(x, np.arange(5)), a.forward(x, np.arange(5)), rtol=1e-6, atol=1e-6)
