"""Fit the Triton fused_moe kernel's two constants per architecture (cost.py FusedMoeConstants) to published
benchmark_moe timings, and report the residuals.

Data (FUSED_MOE_MEASURED): vLLM's benchmarks/kernels/benchmark_moe.py and SGLang's tuning_fused_moe_triton.py
time one whole fused_moe call (fused_topk, moe_align_block_size, fused_moe_kernel for gate_up, silu_and_mul,
fused_moe_kernel for down, moe_sum; fp8: the activations' quantization) as a CUDA graph of 10 calls, replayed,
with random gating (routing close to uniform). Each row here is one such figure at one batch size, as the PR that
published it printed it.

Fit: the plan's own kernels for that call (runtime/vllm.py `_moe`, without the router GEMM, which the
benchmark does not run) priced by the cost model with the stored FittedConstants; only the fused_moe_kernel's
setup_us and stream_eff vary. A grid search (0.1 us x 0.01) minimising the squared log error, deterministic.
None of these kernel timings is a serving measurement: bench/bench_validation.py's rows stay held out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from layerscope.deployment import DeploymentSpec, shard
from layerscope.hardware.cost import FUSED_MOE, CostModel, FusedMoeConstants, is_fused_moe
from layerscope.hardware.gpus import GB, GPU, gpu
from layerscope.model.config import PRESETS
from layerscope.runtime.vllm import VllmRuntime

# A100 PCIe 40GB: the A100 SXM's compute and SMs with 1,555 GB/s of HBM2 (NVIDIA A100 datasheet, PCIe 40GB column).
A100_PCIE_40GB = replace(gpu("a100-80g-sxm"), name="a100-pcie-40gb", hbm_bw=1555 * GB)


@dataclass(frozen=True)
class MoeBenchmark:
    source: str
    gpu: GPU
    model: str
    tp: int
    dtype: str
    times_us: dict[int, float]  # batch size (tokens) -> measured time of one fused_moe call


FUSED_MOE_MEASURED: dict[str, list[MoeBenchmark]] = {
    "ampere": [MoeBenchmark(
        "vLLM PR #19049 (benchmark_moe.py, default config, before the PR's tuning)", A100_PCIE_40GB,
        "qwen3-30b-a3b", 1, "bf16",
        {1: 109.21, 2: 159.81, 4: 268.89, 8: 403.13, 16: 611.19, 24: 730.19, 32: 808.53, 48: 885.97, 64: 917.45,
         96: 943.14})],
    "hopper": [
        MoeBenchmark("vLLM PR #24700 (benchmark_moe.py --dtype fp8_w8a8, the PR's default configs)", gpu("h100-sxm"),
                     "qwen3-30b-a3b", 1, "fp8",
                     {1: 40.44, 2: 56.15, 4: 78.10, 8: 118.64, 16: 164.64, 24: 193.48, 32: 210.07, 48: 230.59,
                      64: 237.26, 96: 244.33, 128: 247.67, 256: 262.38}),
        MoeBenchmark("SGLang PR #11730 (tuning_fused_moe_triton.py --tp-size 8 --dtype fp8_w8a8, untuned)",
                     gpu("h200"), "qwen3-235b-a22b", 8, "fp8",
                     {1: 31.70, 2: 36.56, 4: 49.67, 8: 66.87, 16: 92.36, 24: 117.38, 32: 124.99}),
    ],
    "blackwell": [MoeBenchmark(
        "vLLM PR #31448 (benchmark_moe.py, default config)", gpu("b200"), "qwen3-30b-a3b", 1, "bf16",
        {1: 39.61, 2: 51.87, 4: 73.18})],
}
SETUP_GRID = np.arange(0.0, 40.05, 0.1)
EFF_GRID = np.arange(0.30, 1.005, 0.01)


@dataclass(frozen=True)
class MoeFit:
    arch: str
    constants: FusedMoeConstants
    rows: list[dict]  # per measured point: source, batch, measured_us, simulated_us (stored constants), error


def call_kernels(b: MoeBenchmark, tokens: int) -> list:
    """The plan's kernels for one fused_moe call of `tokens` tokens on one GPU of tp b.tp (router GEMM left out)."""
    # sharded in bf16: the benchmarks' fp8_w8a8 is per-tensor fp8 (no 128x128 blocks, so no block-size check)
    model = shard(PRESETS[b.model], DeploymentSpec(tp=b.tp))
    ks = VllmRuntime()._moe(model, tokens, b.dtype)
    return [k for k in ks if not (k.stage == "router" and k.kind == "gemm")]


def _terms(benches: list[MoeBenchmark]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, int]:
    """Per point: the fixed part (every other kernel, and the fused kernels' launch + GEMM setup), and per fused
    kernel its compute time and its memory time at full bandwidth; plus (overlap, number of fused kernels)."""
    fixed, comp, mem, meas = [], [], [], []
    n_fused = 0
    for b in benches:
        plain = CostModel(b.gpu, fused_moe=FusedMoeConstants(setup_us=0.0, stream_eff=1.0), measured=False)
        for tokens, us in sorted(b.times_us.items()):
            f, c, m = 0.0, [], []
            for k in call_kernels(b, tokens):
                kc = plain.cost(k)
                if is_fused_moe(k):
                    f += kc.parts["launch_us"]
                    c.append(kc.parts["compute_us"])
                    m.append(kc.parts["memory_us"])
                else:
                    f += kc.time_us
            n_fused = len(c)
            fixed.append(f)
            comp.append(c)
            mem.append(m)
            meas.append(us)
    return np.array(fixed), np.array(comp), np.array(mem), np.array(meas), plain.constants.overlap, n_fused


def predict(benches: list[MoeBenchmark], c: FusedMoeConstants) -> np.ndarray:
    fixed, comp, mem, _, overlap, n = _terms(benches)
    return predict_grid(fixed, comp, mem, overlap, n, np.array([c.setup_us]), np.array([c.stream_eff]))[:, 0, 0]


def predict_grid(fixed: np.ndarray, comp: np.ndarray, mem: np.ndarray, overlap: float, n: int, setup: np.ndarray,
                 eff: np.ndarray) -> np.ndarray:
    """(points, setups, effs) predicted times of `n` kernels per point, each with a setup cost and its compute and
    full-bandwidth memory times (comp, mem: (points, n)) overlapped as the cost model overlaps them, beside `fixed`."""
    m = mem[:, :, None] / eff[None, None, :]  # (points, kernels, effs)
    c = comp[:, :, None]
    busy = (np.maximum(c, m) + overlap * np.minimum(c, m)).sum(axis=1)  # (points, effs)
    return fixed[:, None, None] + n * setup[None, :, None] + busy[:, None, :]


def best_on_grid(pred: np.ndarray, meas: np.ndarray, setup: np.ndarray, eff: np.ndarray) -> tuple[float, float]:
    """The (setup_us, stream_eff) of the grid minimising the squared log error over the measured points."""
    loss = (np.log(pred / meas[:, None, None]) ** 2).sum(axis=0)
    i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
    return round(float(setup[i]), 1), round(float(eff[j]), 2)


def fit(benches: list[MoeBenchmark]) -> FusedMoeConstants:
    fixed, comp, mem, meas, overlap, n = _terms(benches)
    setup, eff = best_on_grid(predict_grid(fixed, comp, mem, overlap, n, SETUP_GRID, EFF_GRID), meas, SETUP_GRID,
                              EFF_GRID)
    return FusedMoeConstants(setup_us=setup, stream_eff=eff)


def fit_all() -> dict[str, MoeFit]:
    """Fitted constants per architecture, and the stored constants' error on every measured point."""
    out = {}
    for arch, benches in FUSED_MOE_MEASURED.items():
        stored = predict(benches, FUSED_MOE[arch])
        rows, i = [], 0
        for b in benches:
            for tokens, us in sorted(b.times_us.items()):
                rows.append({"source": b.source, "gpu": b.gpu.name, "model": b.model, "tp": b.tp, "dtype": b.dtype,
                             "batch": tokens, "measured_us": us, "simulated_us": round(float(stored[i]), 2),
                             "rel_error": round(float(stored[i]) / us - 1, 3)})
                i += 1
        out[arch] = MoeFit(arch, fit(benches), rows)
    return out


def median_abs_error(rows: list[dict]) -> float:
    errs = sorted(abs(r["rel_error"]) for r in rows)
    return errs[len(errs) // 2] if len(errs) % 2 else (errs[len(errs) // 2 - 1] + errs[len(errs) // 2]) / 2
