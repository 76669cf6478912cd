"""Fit the paged decode attention kernel's two constants per architecture (cost.py DecodeAttentionConstants) to
published decode-attention kernel timings, and report the residuals.

Data (DECODE_ATTENTION_MEASURED): one decode call (one query per sequence over its paged KV cache, split-KV with
the library's own split count, and the combine of the splits) at several context lengths, as the PR or issue that
published it printed it. Fit: the plan's own kernel (runtime/vllm.py `paged_decode_kernel`) priced by the cost model
with the stored FittedConstants (launch cost, overlap) and the grid's occupancy (cost.decode_attention_ctas); only
setup_us and stream_eff vary. calibration/fused_moe.py's grid search (0.1 us x 0.01) minimising the squared log
error, with one kernel per point: deterministic.
None of these kernel timings is a serving measurement: bench/bench_validation.py's rows stay held out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerscope.calibration.fused_moe import best_on_grid, predict_grid
from layerscope.hardware.cost import DECODE_ATTENTION, CostModel, DecodeAttentionConstants
from layerscope.hardware.gpus import GPU, gpu
from layerscope.hardware.kernel import Kernel
from layerscope.runtime.vllm import paged_decode_kernel


@dataclass(frozen=True)
class DecodeBenchmark:
    source: str
    gpu: GPU
    batch: int
    q_heads: int
    kv_heads: int
    head_dim: int
    times_us: dict[int, float]  # keys per sequence -> measured time of one decode attention call


DECODE_ATTENTION_MEASURED: dict[str, list[DecodeBenchmark]] = {
    # FA3 (vLLM's fork) on an H100, batch 1, "qwen32b-tp2" (Qwen2.5-32B on 2 GPUs: 20 query heads, 4 KV heads),
    # bf16, page size 1; the "Main" table of the PR (before its single-warp-group change).
    "hopper": [DecodeBenchmark("vllm-project/flash-attention PR #63 (FA3, batch 1, Main)", gpu("h100-sxm"),
                               1, 20, 4, 128, {1024: 14.8, 2048: 15.6, 4096: 16.5, 8192: 19.1, 16384: 26.3})],
    # FA2's split-KV decode kernel timed by nvbench (GPU time) on an H100 SXM: Llama-3-70B's shape (64 query heads,
    # 8 KV heads), 64 sequences, page size 256. The kernel vLLM runs on Ampere; no A100 table was found.
    "ampere": [DecodeBenchmark("microsoft/onnxruntime PR #21414 (FA2 paged batch decode, nvbench, H100 SXM)",
                               gpu("h100-sxm"), 64, 64, 8, 128, {32: 21.135, 64: 22.958, 128: 28.780, 256: 43.563})],
}
SETUP_GRID = np.arange(0.0, 40.05, 0.1)
EFF_GRID = np.arange(0.20, 1.005, 0.01)


@dataclass(frozen=True)
class DecodeFit:
    arch: str
    constants: DecodeAttentionConstants
    rows: list[dict]  # per measured point: source, context, measured_us, simulated_us (stored constants), error


def call_kernel(b: DecodeBenchmark, context: int) -> Kernel:
    """The plan's own decode attention kernel for the benchmark's shape (bf16 KV)."""
    return paged_decode_kernel(b.batch, context, b.batch * context, b.q_heads, b.kv_heads, b.head_dim, 2.0)


def _terms(benches: list[DecodeBenchmark], ctas_per_sm: int) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                       np.ndarray, float]:
    """Per point: the launch cost, the compute time and the memory time at full bandwidth (with the grid's
    occupancy), the measured time; and the overlap constant."""
    fixed, comp, mem, meas = [], [], [], []
    for b in benches:
        unit = CostModel(b.gpu, decode_attention=DecodeAttentionConstants(0.0, 1.0, ctas_per_sm), measured=False)
        for ctx, us in sorted(b.times_us.items()):
            kc = unit.cost(call_kernel(b, ctx))
            fixed.append(kc.parts["launch_us"])
            comp.append(kc.parts["compute_us"])
            mem.append(kc.parts["memory_us"])
            meas.append(us)
    return np.array(fixed), np.array(comp), np.array(mem), np.array(meas), unit.constants.overlap


def _predict(fixed: np.ndarray, comp: np.ndarray, mem: np.ndarray, overlap: float, setup: np.ndarray,
             eff: np.ndarray) -> np.ndarray:
    """(points, setups, effs) predicted times: one kernel per point."""
    return predict_grid(fixed, comp[:, None], mem[:, None], overlap, 1, setup, eff)


def predict(benches: list[DecodeBenchmark], c: DecodeAttentionConstants) -> np.ndarray:
    fixed, comp, mem, _, overlap = _terms(benches, c.ctas_per_sm)
    return _predict(fixed, comp, mem, overlap, np.array([c.setup_us]), np.array([c.stream_eff]))[:, 0, 0]


def fit(benches: list[DecodeBenchmark], ctas_per_sm: int) -> DecodeAttentionConstants:
    fixed, comp, mem, meas, overlap = _terms(benches, ctas_per_sm)
    setup, eff = best_on_grid(_predict(fixed, comp, mem, overlap, SETUP_GRID, EFF_GRID), meas, SETUP_GRID, EFF_GRID)
    return DecodeAttentionConstants(setup_us=setup, stream_eff=eff, ctas_per_sm=ctas_per_sm)


def fit_all() -> dict[str, DecodeFit]:
    """Fitted constants per architecture, and the stored constants' error on every measured point."""
    out = {}
    for arch, benches in DECODE_ATTENTION_MEASURED.items():
        stored = DECODE_ATTENTION[arch]
        sim = predict(benches, stored)
        rows, i = [], 0
        for b in benches:
            for ctx, us in sorted(b.times_us.items()):
                rows.append({"source": b.source, "gpu": b.gpu.name, "batch": b.batch, "kv_heads": b.kv_heads,
                             "context": ctx, "measured_us": us, "simulated_us": round(float(sim[i]), 2),
                             "rel_error": round(float(sim[i]) / us - 1, 3)})
                i += 1
        out[arch] = DecodeFit(arch, fit(benches, stored.ctas_per_sm), rows)
    return out


def main() -> None:
    for arch, f in fit_all().items():
        print(arch, f.constants)
        for r in f.rows:
            print("  ", r)


if __name__ == "__main__":
    main()
