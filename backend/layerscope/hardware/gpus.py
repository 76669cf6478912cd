"""GPU presets: one record per GPU, with the public peak figures the cost model starts from (each with its source)
and the measured tables that price its kernels.

Peaks are vendor datasheet numbers (dense, i.e. without 2:4 sparsity). What a kernel actually
reaches is the cost model's business (hardware/cost.py), not this file's. The tables a record names must exist:
a GPU without them is refused by the measured cost model, never priced by the plain roofline in silence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TB = 1e12
GB = 1e9
MiB = 1024**2
GiB = 1024**3

# device_bytes: the total torch.cuda.mem_get_info() reports, which vLLM logs as total_gpu_memory. H100 SXM 80GB:
# 79.22 GiB (vLLM PR #10511's memory-profiling log). For the others no such log was at hand: nvidia-smi's totals
# (A100 80GB 81920 MiB, H200 143771 MiB, B200 183359 MiB) less the 0.43 GiB the H100 shows between nvidia-smi
# (81559 MiB) and torch: an estimate, labelled as such.
# nvlink_bw: NVLink per GPU per direction (half the datasheets' bidirectional figures): A100 NVLink 3 600 GB/s,
# H100/H200 NVLink 4 900 GB/s, B200 NVLink 5 1.8 TB/s.
# stream_eff: the fraction of peak HBM bandwidth a streaming kernel reaches, measured: the median achieved bandwidth
# of aiconfigurator-core's bf16 generation-attention rows that move >= 2 GB of KV (pure streams; hardware/data/aic,
# bench/README.md "Per-op validation against aiconfigurator-core"). The Vidur fit leaves hbm_eff at its bound of 1.0
# (its elementwise profiles are launch-bound), so the analytic model applies this on top of it; the calibration fits
# and the plain roofline do not (CostModel(measured=False)).
# all_reduce_table / all_reduce_scale: whose measured NCCL all-reduce (hardware/collectives.py) prices this GPU's, and
# by what bandwidth factor: H200 SXM has H100 SXM's NVLink 4 at 900 GB/s; B200's NVLink 5 is 2x NVLink 4 (NVIDIA
# Blackwell datasheet), scaled, not measured.

# The GPUs LayerScope prices: the one list of their names (the scenario's `gpu`, the settings form; GPUS holds a
# record for each, tests/hardware/test_gpus.py checks it).
GpuName = Literal["a100-80g-sxm", "h100-sxm", "h200", "b200"]


@dataclass(frozen=True)
class GPU:
    name: str
    bf16_flops: float  # dense tensor-core peak, FLOP/s
    fp8_flops: float | None  # dense tensor-core peak, FLOP/s; None = no fp8 tensor cores (falls back to bf16)
    fp32_flops: float  # non-tensor (CUDA core) fp32 peak: what norms, softmax and activations run on
    hbm_bw: float  # bytes/s
    hbm_bytes: float  # capacity
    l2_bytes: float
    sms: int
    l2_bw_factor: float = 3.0  # L2 bandwidth / HBM bandwidth; an assumption (microbenchmarks show ~2.5-4x)
    arch: str = "hopper"  # ampere | hopper | blackwell: which published attention kernel figures apply (cost.py)
    device_bytes: float = 0.0  # what the device reports (torch.cuda.mem_get_info total): vLLM's "total_gpu_memory"
    nvlink_bw: float = 0.0  # NVLink bandwidth per GPU per direction, bytes/s (0 = none)
    nvlink: int = 0  # NVLink generation
    tables: str = ""  # aiconfigurator-core's system folder under hardware/data/aic ("" = none: analytic pricing only)
    stream_eff: float = 1.0  # measured fraction of peak HBM bandwidth a streaming kernel reaches (see above)
    all_reduce_table: str = ""  # the GPU whose measured NCCL all-reduce table prices this one's (see above)
    all_reduce_scale: float = 1.0

    @property
    def memory_bytes(self) -> float:
        """The capacity vLLM's gpu_memory_utilization is a fraction of."""
        return self.device_bytes or self.hbm_bytes

    def peak_flops(self, dtype: str) -> float:
        """Tensor peak for a GEMM in `dtype`; int2/int4 weights are dequantized to bf16 before the MMA."""
        if dtype == "fp8":
            return self.fp8_flops if self.fp8_flops is not None else self.bf16_flops
        if dtype == "fp32":
            return self.fp32_flops
        return self.bf16_flops

    @property
    def ridge_flops_per_byte(self) -> float:
        return self.bf16_flops / self.hbm_bw


# A100 SXM4 80GB. NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web):
# BF16 tensor 312 TFLOPS dense (624 sparse), FP32 19.5 TFLOPS, HBM2e 2,039 GB/s, 80 GB.
# NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs, 40 MB L2.
# Ampere has no FP8 tensor cores: fp8 GEMMs fall back to the bf16 rate (fp8_flops=None).
A100_80G_SXM = GPU(
    name="a100-80g-sxm",
    bf16_flops=312 * TB,
    fp8_flops=None,
    fp32_flops=19.5 * TB,
    hbm_bw=2039 * GB,
    hbm_bytes=80 * GB,
    l2_bytes=40 * MiB,
    sms=108,
    device_bytes=81920 * MiB - 0.43 * GiB,
    nvlink_bw=300 * GB,
    arch="ampere",
    nvlink=3,
    tables="a100_sxm",
    stream_eff=0.77,
    all_reduce_table="a100-80g-sxm",
)

# H100 SXM5 80GB. NVIDIA H100 Tensor Core GPU datasheet (2023): BF16 1,979 TFLOPS and FP8 3,958 TFLOPS
# *with sparsity*, so 989.4 / 1,978.9 dense; FP32 67 TFLOPS; HBM3 3.35 TB/s, 80 GB.
# NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): 132 SMs on SXM5, 50 MB L2.
H100_SXM = GPU(
    name="h100-sxm",
    bf16_flops=989.4 * TB,
    fp8_flops=1978.9 * TB,
    fp32_flops=67 * TB,
    hbm_bw=3350 * GB,
    hbm_bytes=80 * GB,
    l2_bytes=50 * MiB,
    sms=132,
    device_bytes=79.22 * GiB,
    nvlink_bw=450 * GB,
    arch="hopper",
    nvlink=4,
    tables="h100_sxm",
    stream_eff=0.93,
    all_reduce_table="h100-sxm",
)

# H200 SXM 141GB. NVIDIA H200 Tensor Core GPU datasheet (2024): same compute as H100 SXM (BF16 1,979 /
# FP8 3,958 TFLOPS with sparsity -> 989.4 / 1,978.9 dense, FP32 67 TFLOPS), HBM3e 4.8 TB/s, 141 GB.
# Same GH100 die as H100 SXM: 132 SMs, 50 MB L2 (Hopper whitepaper).
H200 = GPU(
    name="h200",
    bf16_flops=989.4 * TB,
    fp8_flops=1978.9 * TB,
    fp32_flops=67 * TB,
    hbm_bw=4800 * GB,
    hbm_bytes=141 * GB,
    l2_bytes=50 * MiB,
    sms=132,
    device_bytes=143771 * MiB - 0.43 * GiB,
    nvlink_bw=450 * GB,
    arch="hopper",
    nvlink=4,
    tables="h200_sxm",
    stream_eff=0.90,
    all_reduce_table="h100-sxm",
)

# B200 (HGX B200, 1,000 W). NVIDIA HGX B200 datasheet / Blackwell architecture technical brief (2024):
# BF16 4.5 PFLOPS and FP8 9 PFLOPS with sparsity -> 2.25 / 4.5 PFLOPS dense; FP32 80 TFLOPS;
# HBM3e 8 TB/s, 180 GB per GPU as shipped in HGX/DGX B200 (1,440 GB per 8 GPUs).
# SMs: 148 (2 dies x 74 enabled SMs; CUDA deviceQuery, Chips and Cheese "Nvidia's B200", 2025).
# L2: 126 MB, the figure device queries and press coverage of Blackwell's memory hierarchy report; NVIDIA's
# datasheet gives no L2 size, so treat it as approximate (it only decides what counts as L2-resident).
B200 = GPU(
    name="b200",
    bf16_flops=2250 * TB,
    fp8_flops=4500 * TB,
    fp32_flops=80 * TB,
    hbm_bw=8000 * GB,
    hbm_bytes=180 * GB,
    l2_bytes=126 * MiB,
    sms=148,
    device_bytes=183359 * MiB - 0.43 * GiB,
    nvlink_bw=900 * GB,
    arch="blackwell",
    nvlink=5,
    tables="b200_sxm",
    stream_eff=0.87,
    all_reduce_table="h100-sxm",
    all_reduce_scale=2.0,
)

GPUS: dict[str, GPU] = {g.name: g for g in (A100_80G_SXM, H100_SXM, H200, B200)}


def gpu(name: str) -> GPU:
    try:
        return GPUS[name]
    except KeyError:
        raise ValueError(f"unknown GPU {name!r}; choose one of {', '.join(GPUS)}") from None
