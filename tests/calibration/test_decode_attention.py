"""The paged decode attention kernel: its grid (FlashAttention's split heuristic), its constants fitted to published
decode kernel timings, and how the cost model prices it."""

from __future__ import annotations

import pytest

from layerscope.calibration import decode_attention as fit
from layerscope.hardware.cost import (
    DECODE_ATTENTION,
    CostModel,
    decode_attention_ctas,
    is_paged_decode,
    num_splits_heuristic,
    plain_roofline,
)
from layerscope.hardware.gpus import gpu
from layerscope.hardware.kernel import CostEnv
from layerscope.model.config import preset
from layerscope.runtime.runtimes import get_runtime


@pytest.fixture(scope="module")
def fits() -> dict[str, fit.DecodeFit]:
    return fit.fit_all()


def test_stored_constants_are_what_a_refit_produces(fits: dict[str, fit.DecodeFit]) -> None:
    assert {a: f.constants for a, f in fits.items()} == {a: DECODE_ATTENTION[a] for a in fits}


def test_stored_constants_reproduce_the_measured_calls(fits: dict[str, fit.DecodeFit]) -> None:
    for arch, f in fits.items():
        assert max(abs(r["rel_error"]) for r in f.rows) < 0.10, arch
    first = fits["hopper"].rows[0]  # FA3, H100, batch 1, 1024 keys: 14.8 us, far above its 2 MB at peak (0.6 us)
    assert (first["context"], first["measured_us"]) == (1024, 14.8)
    assert first["simulated_us"] == pytest.approx(14.8, rel=0.1)


def test_split_heuristic_is_flash_attentions() -> None:
    # flash_api.cpp's own example: batch x heads = 48 on 108 SMs -> 2 splits (efficiency 0.89) beat 3 (0.67)
    assert num_splits_heuristic(48, 108, 64) == 2
    assert num_splits_heuristic(100, 108, 64) == 1  # >= 80% of the SMs already: no split
    assert num_splits_heuristic(4, 132, 8) == 8  # capped by the KV blocks there are


def test_grid_is_batch_x_kv_heads_x_splits() -> None:
    # one sequence, 4 KV heads, 1024 keys = 8 blocks of 128: at most 8 splits -> 32 CTAs, a quarter of an H100
    assert decode_attention_ctas(1, 4, 1024, 132, 1) == 32
    assert decode_attention_ctas(1, 4, 16384, 132, 1) >= 0.85 * 132  # long context: splits fill the SMs
    assert decode_attention_ctas(64, 8, 1024, 132, 1) == 512  # a big batch needs no split


def test_decode_attention_pays_setup_and_occupancy() -> None:
    qwen = preset("qwen3-30b-a3b")
    ks = get_runtime("vllm").decode_step(qwen, 1024, batch=1)
    attn = next(k for k in ks if k.name == "flash_fwd_splitkv_kernel")
    assert is_paged_decode(attn) and attn.attn.batch == 1 and attn.attn.kv_heads == qwen.num_key_value_heads
    h100 = gpu("h100-sxm")
    fitted, plain = CostModel(h100, measured=False), plain_roofline(h100)  # the model as fitted
    c = DECODE_ATTENTION["hopper"]
    assert fitted.launch_us(attn) == pytest.approx(fitted.constants.launch_us + c.setup_us)
    share = decode_attention_ctas(1, qwen.num_key_value_heads, 1024, h100.sms, c.ctas_per_sm) / h100.sms
    assert share < 0.5
    assert fitted.memory_us(attn, CostEnv())[0] == pytest.approx(attn.bytes / (h100.hbm_bw * c.stream_eff * share)
                                                                 * 1e6)
    assert plain.memory_us(attn, CostEnv())[0] == pytest.approx(attn.bytes / h100.hbm_bw * 1e6)
    assert plain.launch_us(attn) == 0.0


def test_a_prefill_is_not_a_paged_decode() -> None:
    ks = get_runtime("vllm").prefill_chunk(preset("qwen3-30b-a3b"), 512, 0)
    assert not any(is_paged_decode(k) for k in ks)
