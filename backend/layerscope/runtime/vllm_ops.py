"""The small kernels every vLLM plan of a layer is built from (runtime/vllm.py, runtime/vllm_moe.py): a linear layer as
vLLM runs it (cuBLAS, or block-fp8's input quantization and CUTLASS GEMM), the activation, the fp8 input quantization,
and the grouping of kernels one measured op times together."""

from __future__ import annotations

from layerscope.hardware.kernel import GemmOp, Kernel, MoeOp, OpPart
from layerscope.model.config import DTYPE_BYTES
from layerscope.runtime.plan import ACT_BYTES, gemm_kernel

FP8_GROUP = 128  # activation quantization group along K, matching the checkpoint's 128x128 weight blocks
GEMM_NAMES = {
    "bf16": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"
    "_kernel__5x_cublas",
    "fp8": "cutlass_3x_gemm_sm90_fp8_e4m3_scaled_mm",
}


def measured_together(op: GemmOp | MoeOp, kernels: list[Kernel]) -> list[Kernel]:
    """Kernels one measured op times together: each carries the op and its place among them (hardware/kernel.py
    OpPart); a single kernel carries the op itself."""
    if len(kernels) == 1:
        return [kernels[0].evolve(op=op)]
    group = tuple(kernels)
    return [k.evolve(op=OpPart(op, group, i)) for i, k in enumerate(kernels)]


def linear(w: str, stage: str, t: int, n: int, k: int) -> list[Kernel]:
    """x[t, k] @ W[k, n] as vLLM runs it: one cuBLAS GEMM for bf16 weights; for block-fp8 weights the input's
    quantization and the CUTLASS/DeepGEMM GEMM, which aiconfigurator-core's fp8_block rows time together."""
    gemm = gemm_kernel(GEMM_NAMES[gemm_key(w)], stage, t, n, k, w)
    op = GemmOp(t, n, k, "fp8_block" if w == "fp8" else "bf16")
    return measured_together(op, [*act_quant(w, stage, t, k), gemm])


def act_and_mul(stage: str, rows: int, inter: int) -> Kernel:
    return Kernel(
        "act_and_mul_kernel<silu>",
        stage,
        "elementwise",
        6.0 * rows * inter,
        3 * ACT_BYTES * rows * inter,
        shapes=f"silu(x[{rows},{inter}]) * up[{rows},{inter}]",
        ctas=rows,
    )


def act_quant(w: str, stage: str, rows: int, k: int) -> list[Kernel]:
    """fp8 weights with 128x128 block scales take fp8 activations with a scale per 1x128 group: vLLM quantizes
    the input of every such GEMM in its own kernel first (fp8_utils.apply_w8a8_block_fp8_linear and the fused MoE's
    moe_kernel_quantize_input both call per_token_group_quant_fp8). Nothing for bf16 weights."""
    if w != "fp8":
        return []
    groups = rows * max(1, k // FP8_GROUP)
    return [Kernel(
        "per_token_group_quant_fp8",
        stage,
        "elementwise",
        3.0 * rows * k,  # abs-max, scale, cast per element
        ACT_BYTES * rows * k + rows * k * DTYPE_BYTES["fp8"] + 4.0 * groups,  # bf16 in, fp8 out, fp32 scales
        shapes=f"x[{rows},{k}] bf16 -> fp8, one scale per 1x{FP8_GROUP}",
        ctas=groups,
    )]


def gemm_key(w: str) -> str:
    return "fp8" if w == "fp8" else "bf16"
