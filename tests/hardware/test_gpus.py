"""GPU presets: the public figures are in the right ranges and relate to each other as the datasheets say."""

from __future__ import annotations

from dataclasses import replace
from typing import get_args

import pytest

from layerscope.hardware import tables
from layerscope.hardware.collectives import all_reduce_us
from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import GPUS, GpuName, gpu
from layerscope.hardware.kernel import GemmOp, Kernel


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


def test_every_gpu_name_comes_from_the_one_list_and_each_record_holds_its_tables() -> None:
    assert tuple(GPUS) == get_args(GpuName)
    for g in GPUS.values():
        assert tables.price(g.name, GemmOp(1024, 4096, 4096)) is not None  # the record's own measured tables
        assert all_reduce_us(g, 8, 1 << 20).source.startswith(("measured", "vLLM custom", "h100-sxm NCCL"))
        assert 0.7 < g.stream_eff < 1.0


def test_a_gpu_without_tables_is_refused_by_the_measured_cost_model() -> None:
    bare = replace(gpu("h100-sxm"), name="h100-pcie", tables="")
    with pytest.raises(ValueError, match="'h100-pcie' has no measured kernel tables"):
        CostModel(bare)
    copy = Kernel("copy", "x", "memory", 0.0, 8e9)
    assert CostModel(bare, measured=False).cost(copy).source == "analytic"  # the fits' plain model: asked for
