"""Fit the cost model's few constants to measured kernel timings and report how well it predicts.

Data: hardware/data/*.csv.gz, shipped in the package (Vidur's public profiles of Llama-2-7B's linear-layer ops
on A100 and H100; provenance and licence in data/README.md), or $LAYERSCOPE_CALIBRATION_DIR. Each row gives,
for one (num_tokens, TP), the median time of input_layernorm, attn_pre_proj (fused QKV GEMM), attn_rope,
attn_post_proj (o_proj), post_attention_layernorm, mlp_up_proj (fused gate+up GEMM), mlp_act, mlp_down_proj and add.
`emb` is skipped (a gather whose timing is dominated by the lookup pattern, not by the layer).

Fit: least squares on log(predicted / measured), a deterministic coordinate search over the
constants in log space (numpy only). Judged on rows the fit did not see: the other GPU, and the
other half of the token counts.
"""

from __future__ import annotations

import csv
import gzip
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TextIO

import numpy as np

from layerscope.hardware.cost import DEFAULT_ENV, FITTED, PLAIN, CostModel, FittedConstants
from layerscope.hardware.gpus import gpu
from layerscope.hardware.kernel import Kernel

CSV_GPU = {"a100": "a100-80g-sxm", "h100": "h100-sxm"}
OPS = (
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
BF16 = 2.0
DATA_DIR = Path(__file__).resolve().parent.parent / "hardware" / "data"  # shipped in the package: data/README.md


def calibration_dir() -> Path:
    env = os.environ.get("LAYERSCOPE_CALIBRATION_DIR")
    return Path(env) if env else DATA_DIR


# -- the measured ops as kernels ---------------------------------------------------------------------------
def _gemm(name: str, m: int, n: int, k: int) -> Kernel:
    return Kernel(name, name, "gemm", flops=2.0 * m * n * k, bytes=BF16 * (m * k + k * n + m * n), gemm=(m, n, k))


def op_kernel(op: str, tokens: int, tp: int, hidden: int, inter: int, head_dim: int) -> Kernel:
    """Kernel for one measured op. Vidur's norm, rope and activation kernels load element by element
    (vectorized=False); its RMSNorm reads the row twice (variance pass, then normalise pass)."""
    t, h = tokens, hidden
    if op in ("input_layernorm", "post_attention_layernorm"):
        return Kernel(op, op, "norm", flops=4.0 * t * h, bytes=BF16 * (3 * t * h + h), vectorized=False, ctas=t)
    if op == "attn_pre_proj":
        return _gemm(op, t, 3 * h // tp, h)
    if op == "attn_rope":  # q and k rotated in place, cos/sin looked up per token
        qk = 2 * t * (h // tp)
        return Kernel(
            op, op, "elementwise", flops=3.0 * qk, bytes=BF16 * (2 * qk + t * head_dim), vectorized=False, ctas=t
        )
    if op == "attn_post_proj":
        return _gemm(op, t, h, h // tp)
    if op == "mlp_up_proj":
        return _gemm(op, t, 2 * inter // tp, h)
    if op == "mlp_act":  # silu(gate) * up: read 2 x inter, write inter
        i = inter // tp
        return Kernel(op, op, "elementwise", flops=6.0 * t * i, bytes=BF16 * 3 * t * i, vectorized=False, ctas=t)
    if op == "mlp_down_proj":
        return _gemm(op, t, h, inter // tp)
    if op == "add":
        return Kernel(op, op, "elementwise", flops=1.0 * t * h, bytes=BF16 * 3 * t * h)
    raise ValueError(f"unknown op {op!r}")


@dataclass(frozen=True)
class Sample:
    gpu: str
    op: str
    tokens: int
    tp: int
    measured_us: float
    kernel: Kernel


def load_samples(folder: Path | None = None) -> list[Sample]:
    folder = folder or calibration_dir()
    files = sorted([*folder.glob("*.csv"), *folder.glob("*.csv.gz")])
    if not files:
        raise FileNotFoundError(f"no calibration CSVs in {folder} (set LAYERSCOPE_CALIBRATION_DIR)")
    out: list[Sample] = []
    for f in files:
        key = next((k for k in CSV_GPU if f"_{k}_" in f.name), None)
        if key is None:
            continue
        seen: set[tuple[int, int]] = set()
        with _open_text(f) as fh:
            for row in csv.DictReader(fh):
                tokens, tp = int(row["num_tokens"]), int(row["num_tensor_parallel_workers"])
                if (tokens, tp) in seen:  # a few (tokens, TP) rows are repeated: keep the first
                    continue
                seen.add((tokens, tp))
                hidden, inter = int(row["n_embd"]), int(row["n_expanded_embd"])
                head_dim = hidden // int(row["n_head"])
                for op in OPS:
                    ms = float(row[f"time_stats.{op}.median"])
                    k = op_kernel(op, tokens, tp, hidden, inter, head_dim)
                    out.append(Sample(CSV_GPU[key], op, tokens, tp, ms * 1000.0, k))
    return out


def _open_text(path: Path) -> TextIO:
    """A CSV file, plain or gzip-compressed (the shipped copies are compressed)."""
    return gzip.open(path, "rt", newline="") if path.suffix == ".gz" else path.open(newline="")


# -- a vectorized twin of CostModel.cost, so the fit evaluates thousands of rows at once ---------------------
@dataclass(frozen=True)
class Features:
    """Per-sample terms that do not depend on the constants (CostModel with every efficiency = 1)."""

    tensor_us: np.ndarray  # GEMM-shaped compute at gemm_eff = 1
    vector_us: np.ndarray  # CUDA-core compute (not scaled by any constant)
    mem_us: np.ndarray  # HBM time at eff = 1
    vectorized: np.ndarray  # bool
    launches: np.ndarray
    gemm_launches: np.ndarray
    measured_us: np.ndarray


_UNIT = FittedConstants(hbm_eff=1.0, scalar_eff=1.0, gemm_eff=1.0, launch_us=0.0, gemm_setup_us=0.0, overlap=0.0)


def features(samples: list[Sample]) -> Features:
    models: dict[str, CostModel] = {}
    rows = []
    for s in samples:
        m = models.setdefault(s.gpu, CostModel(gpu(s.gpu), _UNIT, measured=False))
        comp = m.compute_us(s.kernel)
        tensor = s.kernel.kind in ("gemm", "moe", "attention")
        mem, _ = m.memory_us(s.kernel, DEFAULT_ENV)
        gemms = s.kernel.count if s.kernel.gemm is not None and tensor else 0
        rows.append((comp if tensor else 0.0, 0.0 if tensor else comp, mem, s.kernel.vectorized, s.kernel.count, gemms))
    a = np.array(rows, dtype=float)
    return Features(
        a[:, 0], a[:, 1], a[:, 2], a[:, 3] > 0, a[:, 4], a[:, 5], np.array([s.measured_us for s in samples])
    )


def predict(f: Features, c: FittedConstants, tiled: bool = True) -> np.ndarray:
    compute = f.tensor_us / c.gemm_eff + f.vector_us
    memory = f.mem_us / np.where(f.vectorized, c.hbm_eff, c.scalar_eff)
    busy = np.maximum(compute, memory) + c.overlap * np.minimum(compute, memory)
    return f.launches * c.launch_us + f.gemm_launches * c.gemm_setup_us + busy


# -- the fit ---------------------------------------------------------------------------------------------------
BOUNDS: dict[str, tuple[float, float]] = {
    "hbm_eff": (0.3, 1.0),
    "scalar_eff": (0.1, 1.0),
    "gemm_eff": (0.3, 1.0),
    "launch_us": (0.5, 20.0),
    "gemm_setup_us": (0.0, 20.0),
    "overlap": (0.0, 1.0),
}


def loss(f: Features, c: FittedConstants) -> float:
    r = np.log(predict(f, c) / f.measured_us)
    return float(np.mean(r * r))


# A neutral starting point (not the stored constants), so a refit does not depend on what it should reproduce.
START = FittedConstants(hbm_eff=0.8, scalar_eff=0.5, gemm_eff=0.7, launch_us=2.0, gemm_setup_us=2.0, overlap=0.5)


def fit(f: Features, start: FittedConstants = START, rounds: int = 60) -> FittedConstants:
    """Coordinate search: try each constant x (1 +- step) (overlap: +- step), keep improvements, halve step."""
    cur = asdict(start)
    best = loss(f, FittedConstants(**cur))
    step = 0.25
    for _ in range(rounds):
        improved = False
        for name, (lo, hi) in BOUNDS.items():
            for sign in (1.0, -1.0):
                trial = dict(cur)
                v = cur[name] + sign * step if name == "overlap" else cur[name] * (1.0 + sign * step)
                trial[name] = min(hi, max(lo, v))
                val = loss(f, FittedConstants(**trial))
                if val < best - 1e-12:
                    best, cur, improved = val, trial, True
        if not improved:
            step /= 2
            if step < 1e-4:
                break
    return FittedConstants(**cur)


def errors(f: Features, c: FittedConstants) -> np.ndarray:
    """|predicted / measured - 1| per sample."""
    return np.abs(predict(f, c) / f.measured_us - 1.0)


def summary(err: np.ndarray) -> dict[str, float]:
    return {"median": float(np.median(err)), "p90": float(np.percentile(err, 90)), "n": int(err.size)}


def _split(samples: list[Sample], keep: Callable[[Sample], bool]) -> tuple[list[Sample], list[Sample]]:
    """(samples where keep is true, the rest)."""
    return [s for s in samples if keep(s)], [s for s in samples if not keep(s)]


def splits(samples: list[Sample]) -> dict[str, tuple[list[Sample], list[Sample]]]:
    """name -> (fit on, test on). "Half the token counts": every other value of the sorted distinct counts."""
    half = set(sorted({s.tokens for s in samples})[0::2])
    return {
        "fit a100 -> test h100": _split(samples, lambda s: s.gpu == "a100-80g-sxm"),
        "fit h100 -> test a100": _split(samples, lambda s: s.gpu == "h100-sxm"),
        "fit half tokens -> test other half": _split(samples, lambda s: s.tokens in half),
    }


@dataclass(frozen=True)
class Report:
    constants: FittedConstants  # fitted on all data
    stored: FittedConstants  # the literals in cost.py
    in_sample: dict[str, float]  # fitted constants on all data
    stored_in_sample: dict[str, float]
    plain: dict[str, float]  # plain roofline on all data
    held_out: dict[str, dict[str, float]]  # split -> test error of constants fitted on its training part
    held_out_constants: dict[str, FittedConstants]
    per_op: dict[str, dict[str, float]]  # op -> stored constants' error, and plain roofline's

    def to_dict(self) -> dict:
        return {
            "constants": asdict(self.constants),
            "stored": asdict(self.stored),
            "in_sample": self.in_sample,
            "stored_in_sample": self.stored_in_sample,
            "plain_roofline": self.plain,
            "held_out": self.held_out,
            "held_out_constants": {k: asdict(v) for k, v in self.held_out_constants.items()},
            "per_op": self.per_op,
        }


def calibrate(samples: list[Sample] | None = None) -> Report:
    samples = samples if samples is not None else load_samples()
    f_all = features(samples)
    fitted = fit(f_all)
    held, held_c = {}, {}
    for name, (train, test) in splits(samples).items():
        c = fit(features(train))
        held[name] = summary(errors(features(test), c))
        held_c[name] = c
    plain_err = _plain_errors(samples)
    stored_err = errors(f_all, FITTED)
    per_op = {}
    ops = np.array([s.op for s in samples])
    for op in OPS:
        sel = ops == op
        per_op[op] = {
            "median": float(np.median(stored_err[sel])),
            "p90": float(np.percentile(stored_err[sel], 90)),
            "plain_median": float(np.median(plain_err[sel])),
        }
    return Report(
        fitted, FITTED, summary(errors(f_all, fitted)), summary(stored_err), summary(plain_err), held, held_c, per_op
    )


def _plain_errors(samples: list[Sample]) -> np.ndarray:
    models: dict[str, CostModel] = {}
    pred = []
    for s in samples:
        m = models.setdefault(s.gpu, CostModel(gpu(s.gpu), PLAIN, tiled=False, measured=False))
        pred.append(m.cost(s.kernel).time_us)
    meas = np.array([s.measured_us for s in samples])
    return np.abs(np.array(pred) / meas - 1.0)


def constants_literal(c: FittedConstants) -> str:
    return "FittedConstants(" + ", ".join(f"{fl.name}={getattr(c, fl.name):.4g}" for fl in fields(c)) + ")"
