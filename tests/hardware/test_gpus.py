"""GPU presets: the public figures are in the right ranges and relate to each other as the datasheets say."""

from __future__ import annotations

import pytest

from layerscope.hardware.gpus import GPUS, gpu


def test_four_presets_with_sane_figures() -> None:
    assert set(GPUS) == {"a100-80g-sxm", "h100-sxm", "h200", "b200"}
    for g in GPUS.values():
        assert 100e12 < g.bf16_flops < 5e15
        assert 1e12 < g.hbm_bw < 10e12
        assert 40e9 <= g.hbm_bytes <= 200e9
        assert 10 * 2**20 <= g.l2_bytes <= 200 * 2**20 < g.hbm_bytes
        assert 100 <= g.sms <= 160
        assert 50 < g.ridge_flops_per_byte < 500  # FLOPs per byte where compute and bandwidth balance


def test_generations_order_and_fp8() -> None:
    a100, h100, h200, b200 = (gpu(n) for n in ("a100-80g-sxm", "h100-sxm", "h200", "b200"))
    assert a100.bf16_flops < h100.bf16_flops == h200.bf16_flops < b200.bf16_flops
    assert a100.hbm_bw < h100.hbm_bw < h200.hbm_bw < b200.hbm_bw
    assert h200.hbm_bytes > h100.hbm_bytes
    for g in (h100, h200, b200):
        assert g.peak_flops("fp8") == pytest.approx(2 * g.bf16_flops, rel=1e-3)
    # Ampere has no fp8 tensor cores: fp8 GEMMs run at the bf16 rate
    assert a100.fp8_flops is None and a100.peak_flops("fp8") == a100.bf16_flops


def test_unknown_gpu_names_the_choices() -> None:
    with pytest.raises(ValueError, match="h100-sxm") as e:
        gpu("v100")
    assert "v100" in str(e.value)
