"""The article's numeric tricks: each path works, and each error function returns sensible measured values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from layerscope.model import Layer, preset
from layerscope.model import numerics as nx

RNG = np.random.default_rng(0)
W = (RNG.standard_normal((96, 256)) / 16).astype(np.float32)
OFFSET = RNG.standard_normal(256).astype(np.float32)
X = RNG.standard_normal((128, 256)).astype(np.float32) + OFFSET
CALIB = RNG.standard_normal((128, 256)).astype(np.float32) + OFFSET


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_pack_unpack_round_trip(bits: int) -> None:
    q = RNG.integers(0, 1 << bits, (5, 64))
    packed = nx.pack_codes(q, bits)
    assert packed.dtype == np.uint8 and packed.shape == (5, 64 * bits // 8)
    np.testing.assert_array_equal(nx.unpack_codes(packed, bits), q)


def test_2bit_storage_layout() -> None:
    qw = nx.quantize(W, bits=2, group_size=64)
    assert qw.codes.dtype == np.uint8 and qw.codes.shape == (96, 64)  # 4 codes per byte
    assert qw.scale.dtype == np.float16 and qw.scale.shape == (96, 4) and qw.zero.shape == (96, 4)
    assert qw.dequantize().shape == W.shape
    # each group takes at most 4 distinct values, and its min and max are nearly exact
    deq = qw.dequantize().reshape(96, 4, 64)
    assert max(len(np.unique(g)) for g in deq.reshape(-1, 64)) <= 4
    np.testing.assert_allclose(deq.min(-1), W.reshape(96, 4, 64).min(-1), atol=2e-3)


def test_quantization_pads_a_short_input_axis() -> None:
    w = W[:, :40]
    qw = nx.quantize(w, bits=2, group_size=64)
    assert qw.dequantize().shape == (96, 40)
    assert nx.quant_error(w, X[:, :40], 2, 64)["rel_error"] < 1.0


def test_error_grows_as_bits_shrink_and_compensation_removes_the_bias() -> None:
    e2, e4, e8 = (nx.quant_error(W, X, b, 64, CALIB) for b in (2, 4, 8))
    assert 0 < e8["rel_error"] < e4["rel_error"] < e2["rel_error"] < 1.0
    assert e2["mean_error_compensated"] < 0.5 * e2["mean_error"]
    assert e2["rel_error_compensated"] < e2["rel_error"]
    assert e2["bytes_ratio"] == pytest.approx((2 / 8 + 2 * 2 / 64) / 4)


def test_compensation_is_the_expected_output_error() -> None:
    qw = nx.quantize(W, 2, 64)
    comp = nx.compensate(qw, W, X.mean(0))
    err = nx.quantized_matmul(X, comp) - X @ W.T  # (T, out)
    np.testing.assert_allclose(err.mean(0), 0.0, atol=1e-4)


def test_flipped_scale_exponent_reaches_the_output_as_nan_or_inf() -> None:
    layer = Layer.random(preset("tiny"), 1)
    q = nx.quantize_layer(layer, bits=2, group_size=64)
    x = RNG.standard_normal((4, 64)).astype(np.float32)
    assert np.all(np.isfinite(q.forward(x, np.arange(4))))
    scale = q.weights["self_attn.v_proj.weight"].storage()["scale"]
    scale.view(np.uint16)[0, 0] |= 0x7C00  # all exponent bits set: inf or NaN
    y = q.forward(x, np.arange(4))
    assert not np.all(np.isfinite(y))


def test_quantize_layer_runs_every_linear_through_the_packed_path() -> None:
    layer = Layer.random(preset("tiny"), 2)
    calib = RNG.standard_normal((48, 64)).astype(np.float32)
    q = nx.quantize_layer(layer, 2, 64, calib_x=calib)
    assert q.config.weight_dtype == "int2" and q.config.quant_group_size == 64
    assert isinstance(q.weights["mlp.experts.0.down_proj.weight"], nx.QuantizedWeight)
    assert isinstance(q.weights["mlp.gate.weight"], np.ndarray)  # router stays fp32
    assert q.weights["self_attn.q_proj.weight"].bias_comp is not None
    x = RNG.standard_normal((16, 64)).astype(np.float32)
    exact, q2 = layer.forward(x, np.arange(16)), q.forward(x, np.arange(16))
    q4 = nx.quantize_layer(layer, 4, 64, calib_x=calib).forward(x, np.arange(16))
    err2 = np.linalg.norm(q2 - exact) / np.linalg.norm(exact)
    err4 = np.linalg.norm(q4 - exact) / np.linalg.norm(exact)
    assert 0 < err4 < err2 < 2


def test_dense_article_shaped_layer_quantizes() -> None:
    cfg = preset("article").scaled(
        hidden_size=128, num_attention_heads=4, num_key_value_heads=4, head_dim=32, intermediate_size=352
    )
    layer = Layer.random(cfg, 0)
    q = nx.quantize_layer(layer, 2, 64, calib_x=RNG.standard_normal((8, 128)).astype(np.float32))
    assert isinstance(q.weights["mlp.down_proj.weight"], nx.QuantizedWeight)
    assert np.all(np.isfinite(q.forward(RNG.standard_normal((3, 128)).astype(np.float32), np.arange(3))))


def test_packed_embedding() -> None:
    table = (RNG.standard_normal((50, 40)) * 0.02).astype(np.float32)
    packed = nx.pack_embedding(table)
    assert packed.words.dtype == np.int64 and packed.words.shape == (50, 3)  # 16 values per word
    ids = np.array([0, 49, 7, 7])
    rows = packed.lookup(ids)
    assert rows.shape == (4, 40)
    step = packed.scale[ids].astype(np.float32)[:, None]
    assert np.all(np.abs(rows - table[ids]) <= 0.51 * step + 1e-4)  # within half a step (+ fp16 zero rounding)
    err = nx.embedding_error(table, ids)
    assert 0 < err["rel_error"] < 0.2 and err["bytes_ratio"] < 0.2


def test_sigmoid_lut() -> None:
    x = np.array([-100.0, -10.0, 0.0, 0.3, 10.0, 100.0, np.nan])
    y = nx.sigmoid_lut(x)
    assert y[2] == pytest.approx(0.5, abs=1e-6) and y[0] == y[1] and y[4] == y[5] and math.isnan(y[6])
    err = nx.sigmoid_lut_error()
    assert 0 < err["max_abs_error_in_range"] < 1e-5  # linear interpolation on a 0.01 grid
    assert err["max_abs_error_in_range"] <= err["max_abs_error"] < 1e-3  # saturation dominates outside ±10
    assert err["mean_abs_error"] < err["max_abs_error"]


def test_shared_stats_rmsnorm() -> None:
    w = np.ones(256, np.float32)
    same = nx.shared_stats_error(X, X, w)
    assert same["rel_error"] < 0.1
    shifted = nx.shared_stats_error(X, 3 * X, w)  # decode tokens 3x louder than prefill: error 2x
    assert shifted["rel_error"] == pytest.approx(2.0, rel=0.1)


def test_precision_bridge() -> None:
    wg, wu = W[:64], W[32:]
    wd = (RNG.standard_normal((256, 64)) / 8).astype(np.float32)
    err = nx.precision_bridge_error(X[:32], wg, wu, wd)
    assert 0 < err["bridge_rel_error"] < 0.05 and 0 < err["bf16_rel_error"] < 0.05
    assert nx.bf16(np.float32(1 + 2**-9)) == 1.0


def test_measure_all_is_finite_deterministic_and_sensible() -> None:
    a, b = nx.measure_all(0), nx.measure_all(0)
    assert a == b and set(a) == set(nx.CLAIMS)
    assert all(math.isfinite(v) and v >= 0 for v in a.values())
    assert a["int4_rel_error"] < a["int2_rel_error"]
    assert a["int2_comp_mean_error"] < a["int2_mean_error"]
    assert a["sigmoid_lut_max_abs_error_in_range"] < 1e-5
    assert a["swiglu_bridge_rel_error"] < a["swiglu_bf16_rel_error"]


def test_bf16_rounds_as_ml_dtypes_does() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")  # a dependency: the reference the numpy bit rounding must match
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.standard_normal(100_000).astype(np.float32) * np.float32(10.0) ** rng.integers(-40, 38, 100_000),
        np.array([0.0, -0.0, np.inf, -np.inf, 3.3895314e38, -3.3895314e38, 1e-45, -1e-45, 1.00390625, 1.01171875],
                 np.float32),  # zeros, infinities, overflow to inf, denormals, ties to even both ways
    ])
    ours, theirs = nx.bf16(x), x.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert ours.dtype == np.float32 and np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))
    assert np.isnan(nx.bf16(np.array([np.nan, -np.nan], np.float32))).all()
