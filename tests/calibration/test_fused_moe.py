"""The Triton fused_moe kernel's constants: fitted to published benchmark_moe tables, and used by the cost model."""

from __future__ import annotations

import pytest

from layerscope.calibration import fused_moe as fit
from layerscope.hardware.cost import FUSED_MOE, CostModel, is_fused_moe, plain_roofline
from layerscope.hardware.gpus import gpu
from layerscope.hardware.kernel import CostEnv
from layerscope.model.config import preset
from layerscope.runtime.runtimes import get_runtime


@pytest.fixture(scope="module")
def fits() -> dict[str, fit.MoeFit]:
    return fit.fit_all()


def test_stored_constants_are_what_a_refit_produces(fits: dict[str, fit.MoeFit]) -> None:
    assert {a: f.constants for a, f in fits.items()} == FUSED_MOE


def test_stored_constants_reproduce_the_measured_calls(fits: dict[str, fit.MoeFit]) -> None:
    for arch, f in fits.items():
        assert fit.median_abs_error(f.rows) < 0.10, arch
    a100_batch1 = fits["ampere"].rows[0]  # A100 PCIe, Qwen3-30B-A3B, one token: 109.21 us measured
    assert a100_batch1["batch"] == 1 and a100_batch1["measured_us"] == 109.21
    assert a100_batch1["simulated_us"] == pytest.approx(109.21, rel=0.05)


def test_the_call_is_the_plans_moe_without_the_router_gemm() -> None:
    b = fit.FUSED_MOE_MEASURED["hopper"][1]  # Qwen3-235B on H200, tp 8
    names = [k.name for k in fit.call_kernels(b, 4)]
    assert names == ["topkGatingSoftmax", "moe_align_block_size_kernel", "per_token_group_quant_fp8",
                     "fused_moe_kernel", "act_and_mul_kernel<silu>", "per_token_group_quant_fp8", "fused_moe_kernel",
                     "moe_sum_kernel"]


def test_fused_moe_kernel_pays_its_setup_and_streams_below_peak() -> None:
    qwen = preset("qwen3-30b-a3b")
    ks = get_runtime("vllm").decode_step(qwen, 1024, batch=1)
    gate_up = next(k for k in ks if is_fused_moe(k))
    a100 = gpu("a100-80g-sxm")
    fitted, plain = CostModel(a100), plain_roofline(a100)
    c = FUSED_MOE["ampere"]
    assert fitted.launch_us(gate_up) == pytest.approx(fitted.constants.launch_us + fitted.constants.gemm_setup_us
                                                      + c.setup_us)
    assert fitted.memory_us(gate_up, CostEnv())[0] == pytest.approx(gate_up.bytes / (a100.hbm_bw * c.stream_eff) * 1e6)
    assert plain.memory_us(gate_up, CostEnv())[0] == pytest.approx(gate_up.bytes / a100.hbm_bw * 1e6)
    router = next(k for k in ks if k.stage == "router" and k.kind == "gemm")
    assert not is_fused_moe(router)
    assert fitted.launch_us(router) == pytest.approx(fitted.constants.launch_us + fitted.constants.gemm_setup_us)
