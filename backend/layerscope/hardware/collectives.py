"""Collectives priced from measured NCCL all-reduce timings (hardware/data/collectives, Vidur's DGX profiles).

    all_reduce_us(gpu, n, bytes, cuda_graphs) -> CollectiveCost(time_us, algorithm, source)

- NCCL: the measured median at n GPUs on one node (2, 4, 8), interpolated in log(size) and log(time) between the
  measured sizes (2 KB .. 64 MB, smoothed: medians per quarter-octave, then made non-decreasing). Past 64 MB the
  time grows at the NVLink bus bandwidth the largest messages reached; below 2 KB it is the floor.
- vLLM's custom all-reduce (csrc/custom_all_reduce.cuh: one-shot for small messages, two-shot above; used for
  messages up to 8 MiB on NVLink, inside CUDA graphs): faster than NCCL's floor. Modelled from the latencies SGLang
  PR #2904 measured for vLLM's kernel on H100 (tp 2/4/8, 512 B .. 1 MiB), interpolated the same way, and never
  slower than NCCL. Without CUDA graphs vLLM falls back to NCCL (the custom kernel's buffers are registered at
  capture) -- a simplification: eager vLLM can use it too, with a copy into its IPC buffer. Hopper only (the
  measurements are H100's); A100 pays NCCL.
- H200 has H100's NVLink 4 (same table). A100 uses its own measured table. B200 (NVLink 5, twice NVLink 4's
  bandwidth): H100's table with the bytes halved, i.e. the same latency floor and twice the bandwidth; labelled
  "scaled" wherever shown.
"""

from __future__ import annotations

import bisect
import csv
import gzip
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from layerscope.hardware.gpus import GPU

DATA = Path(__file__).parent / "data" / "collectives"
# the measured all-reduce tables, by the GPU they were measured on (GPU.all_reduce_table names one per GPU)
TABLES = {"a100-80g-sxm": "vidur_a100_dgx_all_reduce.csv.gz", "h100-sxm": "vidur_h100_dgx_all_reduce.csv.gz"}
CUSTOM_AR_MAX_BYTES = 8 * 1024**2  # vLLM CustomAllreduce max_size default (8 MiB)
# vLLM's custom all-reduce on H100, microseconds, by tp, at 512 B, 4 KiB, 32 KiB, 256 KiB, 512 KiB, 1 MiB
# (SGLang PR #2904, "unit test performance in H100", the vllm rows).
CUSTOM_AR_SIZES = (512, 4096, 32768, 262144, 524288, 1048576)
CUSTOM_AR_US = {
    2: (9.5, 8.8, 8.7, 12.9, 17.7, 26.6),
    4: (9.1, 8.5, 9.2, 20.6, 26.9, 40.2),
    8: (10.1, 9.3, 11.8, 24.1, 30.4, 45.0),
}
BUCKETS_PER_OCTAVE = 4


@dataclass(frozen=True)
class CollectiveCost:
    time_us: float
    algorithm: str  # "nccl ring" | "vllm custom"
    source: str  # where the figure comes from, as the UI shows it


@dataclass(frozen=True)
class Curve:
    """A non-decreasing time(size) curve in log-log space."""

    log_sizes: tuple[float, ...]
    log_us: tuple[float, ...]

    def __call__(self, nbytes: float) -> float:
        xs, ys = self.log_sizes, self.log_us
        x = math.log(max(nbytes, 1.0))
        if x <= xs[0]:
            return math.exp(ys[0])
        if x >= xs[-1]:  # bandwidth-bound: time grows linearly with bytes past the last measured size
            return math.exp(ys[-1]) * nbytes / math.exp(xs[-1])
        i = bisect.bisect_right(xs, x)
        f = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
        return math.exp(ys[i - 1] + f * (ys[i] - ys[i - 1]))


def _curve(points: list[tuple[float, float]]) -> Curve:
    """Medians per quarter-octave of size, then a running minimum from the largest size down (non-decreasing)."""
    buckets: dict[int, list[tuple[float, float]]] = {}
    for size, us in points:
        buckets.setdefault(int(math.log2(size) * BUCKETS_PER_OCTAVE), []).append((size, us))
    xs, ys = [], []
    for b in sorted(buckets):
        sizes = sorted(s for s, _ in buckets[b])
        times = sorted(t for _, t in buckets[b])
        xs.append(math.log(sizes[len(sizes) // 2]))
        ys.append(math.log(times[len(times) // 2]))
    for i in range(len(ys) - 2, -1, -1):
        ys[i] = min(ys[i], ys[i + 1])
    return Curve(tuple(xs), tuple(ys))


@lru_cache(maxsize=8)
def nccl_curves(table_gpu: str) -> dict[int, Curve]:
    """Per GPU count on one node: the measured all-reduce curve (rank 0's medians, ms -> us)."""
    points: dict[int, list[tuple[float, float]]] = {}
    with gzip.open(DATA / TABLES[table_gpu], "rt") as f:
        for row in csv.DictReader(f):
            n = int(row["num_workers"])
            if row["rank"] != "0" or int(row["devices_per_node"]) != n:
                continue
            points.setdefault(n, []).append((float(row["size"]), float(row["time_stats.all_reduce.median"]) * 1e3))
    return {n: _curve(p) for n, p in sorted(points.items())}


@lru_cache(maxsize=4)
def custom_curves() -> dict[int, Curve]:
    return {n: _curve(list(zip(CUSTOM_AR_SIZES, us, strict=True))) for n, us in CUSTOM_AR_US.items()}


def _table(gpu: GPU) -> tuple[str, float, str]:
    """(measured table, bandwidth factor, label) for a GPU: its record's all_reduce_table (hardware/gpus.py)."""
    base, factor = gpu.all_reduce_table, gpu.all_reduce_scale
    if base not in TABLES:
        raise ValueError(f"no collective timings for GPU {gpu.name!r}")
    if base == gpu.name:
        return base, 1.0, f"measured NCCL all-reduce, {gpu.name} DGX"
    if factor == 1.0:
        return base, 1.0, f"measured NCCL all-reduce, {base} DGX (same NVLink {gpu.nvlink})"
    return base, factor, f"{base} NCCL all-reduce scaled x{factor:g} by NVLink {gpu.nvlink} bandwidth (not measured)"


def all_reduce_us(gpu: GPU, n: int, nbytes: float, cuda_graphs: bool = True) -> CollectiveCost:
    """One all-reduce of `nbytes` over `n` GPUs of one NVLink node."""
    if n <= 1:
        return CollectiveCost(0.0, "none", "one GPU: no collective")
    base, factor, label = _table(gpu)
    curves = nccl_curves(base)
    if n not in curves:
        raise ValueError(f"no measured all-reduce for {n} GPUs (measured: {', '.join(map(str, curves))})")
    nccl = curves[n](nbytes / factor)
    if cuda_graphs and base == "h100-sxm" and nbytes <= CUSTOM_AR_MAX_BYTES and n in CUSTOM_AR_US:
        custom = custom_curves()[n](nbytes / factor)
        if custom < nccl:
            scaled = " scaled by NVLink 5 bandwidth" if factor != 1.0 else ""
            source = f"vLLM custom all-reduce, H100 measured (SGLang PR #2904){scaled}"
            return CollectiveCost(custom, "vllm custom", source)
    return CollectiveCost(nccl, "nccl ring", label)


def all_gather_us(gpu: GPU, n: int, out_bytes: float, cuda_graphs: bool = True) -> CollectiveCost:
    """An all-gather moves (n-1)/n of the output per GPU, half an all-reduce's ring traffic: priced as an
    all-reduce of half the bytes (same latency floor), a ring-algorithm approximation."""
    c = all_reduce_us(gpu, n, out_bytes / 2, cuda_graphs=False)
    return CollectiveCost(c.time_us, "nccl ring", c.source + ", all-gather as half an all-reduce")
