"""Kernel (FLOPs, bytes, shape) + GPU -> time, bound, HBM utilisation, L2 hit rate: measured where a measured table
covers the kernel, a calibrated roofline elsewhere.

Measured: a kernel whose plan gives it an op spec (Kernel.op: a GEMM, the routed experts, context or decode
attention, an all-reduce, an all-to-all) is priced from aiconfigurator-core's measured table of its GPU and engine
where the table covers the shape (hardware/tables), KernelCost.source = "measured" and .table naming the table;
kernels an op times together (OpPart) share its time in proportion to their analytic times. Everything else, and
every op no table covers on that GPU, is priced by the roofline below, source = "analytic".

    time = launch (+ gemm_setup for a GEMM) + max(compute, memory) + overlap * min(compute, memory)
           and at least, per launch, the GPU's shortest measured kernel (a trivial GEMM as a node of a replayed CUDA
           graph: tables.graph_kernel_floor_us; a flash prefill call its own measured floor), where tables exist

    memory  = HBM bytes / (peak BW * eff)  +  L2-resident bytes / (L2 BW * eff)
              eff = hbm_eff for vectorized kernels, scalar_eff for element-by-element ones, and the
              architecture's FUSED_MOE stream_eff for vLLM's Triton fused_moe kernel (which also pays
              FUSED_MOE setup_us per launch), and DECODE_ATTENTION stream_eff for the paged split-KV decode
              (which pays DECODE_ATTENTION setup_us per call, its grid sized by FlashAttention's split heuristic);
              a grid of fewer CTAs than SMs streams with only its SMs' share of the bandwidth
    compute = GEMM-shaped work: FLOPs x tile padding x wave quantization / (tensor peak x gemm_eff)
              (tile quantization: M and N round up to 128x128 tiles, M to 64 or 16 rows in the small-M
              regime; a grouped GEMM (the fused MoE) pays the expected tiles over its experts' rows, not the
              mean's; wave quantization: tiles x split-K slices round up to a multiple of the SM count)
              attention (flash kernels): FLOPs / (tensor peak x attention efficiency), the efficiency read
              from the published FlashAttention-2/3/4 benchmarks for the GPU's architecture, head_dim, causal
              mask and sequence length (attention_efficiency below), not the GEMM efficiency
              other work (norms, activations, softmax): FLOPs / fp32 CUDA-core peak

Only FittedConstants, FUSED_MOE and DECODE_ATTENTION below are fitted; everything else is a public figure
(hardware/gpus.py) or shape arithmetic. The fits and their errors: calibration/gemm.py (`layerscope calibrate`,
Vidur's GEMM and elementwise profiles), calibration/fused_moe.py (published benchmark_moe timings of the fused_moe
call) and calibration/decode_attention.py (published decode attention kernel timings).
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

from layerscope.hardware import tables
from layerscope.hardware.gpus import GPU
from layerscope.hardware.kernel import AttentionShape, Bound, ContextAttentionOp, CostEnv, Kernel, KernelCost, OpPart

TENSOR_KINDS = ("gemm", "moe", "attention")
TILE_N = 128  # output tile width of the sm80/sm90 cuBLAS kernels profiles show (tilesize128x128x64)
TILE_M = 128
SMALL_M_TILE = 64  # cuBLAS drops to 64-row tiles when M is small
GEMV_M_TILE = 16  # and to GEMV-like kernels (16-row MMA fragments) for a handful of rows
MAX_SPLIT_K = 8  # K slices a library may use to fill idle SMs (split-K / stream-K)
K_STEP = 64  # the K depth of one mainloop step: no slice is shallower
DEFAULT_ENV = CostEnv()  # frozen, so one shared default is safe
ANALYTIC_MEMO = 65536  # analytic prices kept per CostModel for measured ops' shares (a serving run needs ~1000s)


@dataclass(frozen=True)
class FittedConstants:
    """The few constants the calibration fits; each is a physical efficiency, not a fudge per kernel.

    Produced by: `layerscope calibrate` (calibration/gemm.py, both GPUs, all token counts and TP degrees).
    """

    hbm_eff: float  # fraction of peak HBM bandwidth a vectorized streaming kernel (GEMM weights, add) reaches
    scalar_eff: float  # the same for kernels that load element by element (Kernel.vectorized=False)
    gemm_eff: float  # fraction of tensor-core peak a large GEMM sustains per SM while a tile is busy
    launch_us: float  # per-launch fixed cost: launch, ramp-up, tail
    gemm_setup_us: float  # extra per GEMM launch: filling the tile pipeline from DRAM, epilogue, split-K reduce
    overlap: float  # 0 = compute and memory overlap perfectly (max); 1 = they serialize (sum)


# Plain roofline: peak everything, no launch cost, perfect overlap. The baseline the fit is judged against.
PLAIN = FittedConstants(hbm_eff=1.0, scalar_eff=1.0, gemm_eff=1.0, launch_us=0.0, gemm_setup_us=0.0, overlap=0.0)

# Fitted by `layerscope calibrate` (calibration/gemm.py: both GPUs, every token count and TP, start START,
# least squares on log(predicted/measured)); held-out medians: 9.0% (fit A100 -> H100), 8.9% (H100 -> A100),
# 8.5% (other half of the token counts); plain roofline 45.5%. hbm_eff sits at its bound of 1.0: the data
# leaves no room for a bandwidth shortfall on streaming kernels once launch and GEMM setup are paid.
FITTED = FittedConstants(
    hbm_eff=1.0, scalar_eff=0.5408, gemm_eff=0.8106, launch_us=1.41, gemm_setup_us=3.828, overlap=0.5549
)


@dataclass(frozen=True)
class FusedMoeConstants:
    """vLLM's Triton fused_moe_kernel (one launch per expert GEMM, all experts) at decode sizes, per architecture.

    At a few rows per expert each CTA streams a thin slice of one expert's weights through a serial K loop: the
    kernel neither reaches the streaming bandwidth of a vectorized copy nor behaves as the cuBLAS GEMMs the
    FittedConstants come from. Two constants per architecture, fitted by calibration/fused_moe.py to published
    benchmark_moe timings of whole fused_moe calls (FUSED_MOE_MEASURED there)."""

    setup_us: float  # extra fixed time per fused_moe_kernel launch (pipeline fill of the K loop, tail)
    stream_eff: float  # fraction of peak HBM bandwidth its weight stream reaches


# Fitted by calibration/fused_moe.py (least squares on log time over the measured batch sizes 1..256; the
# residuals: `fit_all`, and bench/README.md "Decode step breakdown"). Ampere: A100 PCIe 40GB, Qwen3-30B-A3B bf16
# (vLLM PR #19049). Hopper: H100 SXM Qwen3-30B-A3B fp8 (vLLM PR #24700) and H200 Qwen3-235B-A22B fp8 tp 8 (SGLang PR
# #11730); no bf16 table was found for Hopper, so bf16 uses the same figures. Blackwell: B200 Qwen3-30B-A3B bf16,
# batch 1-4 only (vLLM PR #31448).
FUSED_MOE: dict[str, FusedMoeConstants] = {
    "ampere": FusedMoeConstants(setup_us=18.3, stream_eff=0.94),
    "hopper": FusedMoeConstants(setup_us=4.4, stream_eff=0.84),
    "blackwell": FusedMoeConstants(setup_us=5.1, stream_eff=0.77),
}


# Unloaded DRAM latency per architecture, for a stream whose loads in flight are few (Kernel.inflight_bytes): such a
# grid waits one latency per round of loads, so it streams inflight_bytes / latency at most (Little's law). Pointer-
# chase figures of markdewing/AI_kernels latency/README.md (main memory, SM cycles): B200 860 cycles, GH200 690, at
# the 1,980 MHz boost of the H100 SXM (NVIDIA's datasheet; Chips and Cheese's B200 article: "clock speeds are similar
# to the H100's high power SXM5 variant"). No A100 figure is in that table: GH200's cycles at the A100's 1,410 MHz
# boost, an assumption.
DRAM_LATENCY_S: dict[str, float] = {
    "blackwell": 860 / 1.98e9,
    "hopper": 690 / 1.98e9,
    "ampere": 690 / 1.41e9,
}


@dataclass(frozen=True)
class DecodeAttentionConstants:
    """The paged split-KV decode attention kernel (flash_fwd_splitkv_kernel: one query per sequence over its paged
    KV), per architecture. The Vidur GEMM fit has no attention kernel, and a decode kernel neither streams like a
    vectorized copy nor fills the GPU at small batch x short context: a fixed cost per call (the split kernel's
    prologue and epilogue, the split-combine kernel, the scheduler-metadata kernel) and a KV stream below peak.
    Fitted by calibration/decode_attention.py to published decode-attention kernel timings."""

    setup_us: float  # extra fixed time per call, beyond the fitted launch cost
    stream_eff: float  # fraction of peak HBM bandwidth the KV stream reaches once the grid covers every SM
    ctas_per_sm: int  # the SM count num_splits_heuristic is given: FA2 passes 2 x SMs, FA3 the SM count


# FA2 (flash-attention csrc/flash_attn/flash_api.cpp set_params_splitkv) and FA3 (hopper/flash_api.cpp
# get_num_splits) size the split count with num_splits_heuristic over KV blocks of this many keys (head_dim 128).
SPLIT_KV_BLOCK_N = 128
MAX_SPLITS = 128  # both cap it at 128 splits
# Fitted by calibration/decode_attention.py (least squares on log time). Hopper: FA3 in vLLM's flash-attention fork
# on an H100 (vllm-project/flash-attention PR #63, "Main" table, batch 1, 4 KV heads, head_dim 128, 1k-16k keys).
# Ampere: the FA2 split-KV kernel vLLM runs on Ampere, timed by nvbench on an H100 (microsoft/onnxruntime PR
# #21414, Llama-3-70B shape, 64 sequences of 32-256 keys); no A100 table was found: its setup and its fraction of
# peak are applied to the A100. Blackwell: no table found; Hopper's figures (FA3 runs on Blackwell through vLLM's
# fork until FA4/trtllm-gen), an assumption.
DECODE_ATTENTION: dict[str, DecodeAttentionConstants] = {
    "hopper": DecodeAttentionConstants(setup_us=10.6, stream_eff=0.73, ctas_per_sm=1),
    "ampere": DecodeAttentionConstants(setup_us=13.4, stream_eff=0.81, ctas_per_sm=2),
}
DECODE_ATTENTION["blackwell"] = DECODE_ATTENTION["hopper"]

# A prefill attention call's floor: the fastest measured context-attention call per architecture (batch 1, 16 tokens,
# 64 query / 4 KV heads, head_dim 128: prologue, epilogue, one tile; aiconfigurator-core, hardware/data/aic): Hopper
# FA3 14.1 us (H100 and H200 alike), Blackwell FlashInfer TRT-LLM 12.1 us, Ampere FA2 11.9 us.
PREFILL_ATTENTION_FLOOR_US = {"hopper": 14.1, "blackwell": 12.1, "ampere": 11.9}


def is_paged_decode(k: Kernel) -> bool:
    return k.kind == "attention" and k.attn is not None and k.attn.kv_heads > 0


@functools.lru_cache(maxsize=4096)  # pure; a serving run asks again for each step's batch x context
def num_splits_heuristic(blocks: int, num_sms: int, num_n_blocks: int, max_splits: int = MAX_SPLITS) -> int:
    """FlashAttention's split count (flash_api.cpp num_splits_heuristic): 1 when batch x heads already nearly fills
    the SMs; else the smallest split count whose wave efficiency is within 85% of the best (each extra split costs
    HBM traffic for its partial output)."""
    if blocks >= 0.8 * num_sms:
        return 1
    max_splits = min(max_splits, num_sms, num_n_blocks)

    def eligible(s: int) -> bool:  # 11 splits of 64 blocks are 10 of 6.4: the same as 11 of them
        return s == 1 or math.ceil(num_n_blocks / s) != math.ceil(num_n_blocks / (s - 1))

    effs = {}
    for s in range(1, max_splits + 1):
        if eligible(s):
            waves = blocks * s / num_sms
            effs[s] = waves / math.ceil(waves)
    best = max(effs.values(), default=1.0)
    return next((s for s, e in effs.items() if e >= 0.85 * best), 1)


def decode_attention_ctas(batch: int, kv_heads: int, context: int, sms: int, ctas_per_sm: int) -> int:
    """Thread blocks of a split-KV decode: batch x KV heads (the query heads of one KV head share a block: FA3's
    PackGQA, FA2's seqlenq_ngroups_swapped) x splits."""
    blocks = max(1, batch * kv_heads)
    n_blocks = max(1, math.ceil(context / SPLIT_KV_BLOCK_N))
    return blocks * num_splits_heuristic(blocks, sms * ctas_per_sm, n_blocks)


def is_fused_moe(k: Kernel) -> bool:
    """The grouped expert GEMM (fused_moe_kernel): MoE work with a GEMM shape."""
    return k.kind == "moe" and k.gemm is not None


@functools.lru_cache(maxsize=4096)
def expected_row_tiles(mean_rows: int, tile: int) -> float:
    """E[ceil(X / tile)] over one expert's rows X when a grouped GEMM's experts hold `mean_rows` on average.

    Each token picks an expert independently of the others (probability top_k / E under uniform routing), so the
    rows of an expert that is read at all are 1 + Poisson(mean_rows - 1) (the binomial count of the other tokens,
    conditioned on the expert being hit; a skewed routing only spreads them more). The mean's own tile count
    ceil(mean / tile) under-prices a mean just under a tile boundary and over-prices one just above it."""
    lam = float(mean_rows - 1)
    if lam <= 0.0:
        return 1.0
    spread = 10.0 * math.sqrt(lam) + 10.0  # the pmf beyond 10 standard deviations is below 1e-20
    lo, hi = max(0, int(lam - spread)), int(lam + spread) + 1
    log_lam, total, mass = math.log(lam), 0.0, 0.0
    for x in range(lo, hi + 1):
        pmf = math.exp(x * log_lam - lam - math.lgamma(x + 1))
        total += pmf * math.ceil((x + 1) / tile)
        mass += pmf
    return total / mass


# pure; a serving run's GEMMs ask for ~300 distinct (tiles, K, SMs) ~3000 times (a cold 500-request bench). An
# int tile count and the equal float share a memo entry: both give the same floats here
@functools.lru_cache(maxsize=4096)
def wave_quantization(tiles: float, k: int, sms: int) -> float:
    """Time of `tiles` output tiles on `sms` SMs relative to perfect balance (>= 1).

    A partial last wave costs a full one; libraries soften that by splitting K into s slices
    (split-K / stream-K, s <= MAX_SPLIT_K, each slice at least K_STEP deep) so that tiles x s work units
    fill the waves better. The best s is taken, as a tuned library would.
    """
    ideal = tiles / sms
    best = min(math.ceil(tiles * s / sms) / s for s in range(1, MAX_SPLIT_K + 1) if s == 1 or k / s >= K_STEP)
    return best / ideal


class CostModel:
    def __init__(self, gpu: GPU, constants: FittedConstants = FITTED, tiled: bool = True,
                 fused_moe: FusedMoeConstants | None = None, decode_attention: DecodeAttentionConstants | None = None,
                 measured: bool = True) -> None:
        self.gpu = gpu
        # False: the analytic model as fitted, no measured table, no stream_eff (the calibration fits, the "before")
        self.measured = measured
        if measured and not gpu.tables:
            raise ValueError(f"GPU {gpu.name!r} has no measured kernel tables: price it with measured=False")
        self.stream_eff = gpu.stream_eff if measured and tiled else 1.0
        self.prefill_floor_us = PREFILL_ATTENTION_FLOOR_US[gpu.arch] if measured and tiled else 0.0
        # no kernel is shorter than the shortest its GPU's tables measured (tables.graph_kernel_floor_us)
        self.kernel_floor_us = tables.graph_kernel_floor_us(gpu.tables) if measured and tiled else 0.0
        self._analytic: dict[Kernel, KernelCost] = {}  # an OpPart's siblings, priced once
        self._group_shares: dict[int, tuple[tuple[Kernel, ...], list[float]]] = {}  # id(OpPart.kernels) -> shares
        self.constants = constants
        self.tiled = tiled  # False: plain FLOPs / peak (the naive roofline)
        # the Triton fused_moe kernel's own figures; the plain roofline prices it as any GEMM
        self.fused_moe = fused_moe if fused_moe is not None or not tiled else FUSED_MOE[gpu.arch]
        # the paged decode kernel's own figures (grid occupancy, setup, KV stream); the plain roofline has none
        self.decode_attention = (decode_attention if decode_attention is not None or not tiled
                                 else DECODE_ATTENTION[gpu.arch])

    # -- the two sides of the roofline -------------------------------------------------------------
    def compute_us(self, k: Kernel) -> float:
        g, c = self.gpu, self.constants
        if k.kind not in TENSOR_KINDS:
            return k.flops / g.fp32_flops * 1e6
        peak = g.peak_flops(k.dtype)
        if k.kind == "attention" and k.attn is not None and self.tiled:
            return k.flops / (peak * attention_efficiency(g.arch, k.attn)) * 1e6
        if k.gemm is None or not self.tiled:
            return k.flops / (peak * c.gemm_eff) * 1e6
        m, n, kk = k.gemm
        if m * n * kk <= 0:
            return 0.0
        tile_m = GEMV_M_TILE if m <= GEMV_M_TILE else SMALL_M_TILE if m <= SMALL_M_TILE else TILE_M
        # a grouped GEMM's M is the mean of its problems' rows (the fused MoE's rows per expert), which vary:
        # each problem rounds its own rows up to tiles, so the expected tile count, not the mean's, is paid
        m_tiles = expected_row_tiles(m, tile_m) if k.groups > 1 else math.ceil(m / tile_m)
        tiles = k.groups * m_tiles * math.ceil(n / TILE_N)
        # tile quantization: M and N round up to the tile. `flops` stays authoritative (a fused kernel may do
        # more than its first GEMM); the shape only says how much of the tensor cores' work is padding.
        padding = (tiles * tile_m * TILE_N) / (k.groups * m * n)
        return k.flops * padding * wave_quantization(tiles, kk, g.sms) / (peak * c.gemm_eff) * 1e6

    def l2_served(self, k: Kernel, env: CostEnv) -> float:
        """Bytes served from L2: the resident part of the data, if warm and if it fits."""
        if not env.l2_warm or k.l2_bytes <= 0:
            return 0.0
        fits = min(1.0, self.gpu.l2_bytes / k.l2_bytes)
        return min(k.l2_bytes * fits, k.bytes)

    def memory_us(self, k: Kernel, env: CostEnv) -> tuple[float, float]:
        """(time, HBM bytes)."""
        return self._memory_us(k, env, self.fused_moe is not None and is_fused_moe(k),
                               self.decode_attention is not None and is_paged_decode(k))

    def _memory_us(self, k: Kernel, env: CostEnv, fused: bool, paged: bool) -> tuple[float, float]:
        """memory_us, told whether k is the fused MoE kernel and the paged decode this model has figures for."""
        g = self.gpu
        eff = (self.constants.hbm_eff if k.vectorized else self.constants.scalar_eff) * self.stream_eff
        if fused and self.fused_moe is not None:
            eff = self.fused_moe.stream_eff
        ctas = k.ctas
        d, a = self.decode_attention, k.attn
        if paged and d is not None and a is not None:
            # the fitted short-context figure, or the long-KV stream rate the measured tables reach (GPU.stream_eff)
            eff = max(d.stream_eff, self.stream_eff) if self.stream_eff < 1.0 else d.stream_eff
            ctas = decode_attention_ctas(a.batch, a.kv_heads, a.context_before + 1, g.sms, d.ctas_per_sm)
        l2 = self.l2_served(k, env)
        hbm = k.bytes - l2 + env.extra_bytes
        share = min(1.0, ctas / g.sms) if ctas > 0 else 1.0  # a small grid only has its SMs' load units
        t = (hbm / (g.hbm_bw * eff * env.hbm_bw_scale) + l2 / (g.hbm_bw * g.l2_bw_factor * eff)) / share
        if k.inflight_bytes > 0 and self.tiled:  # few loads in flight: one DRAM latency per round of them
            t = max(t, hbm * DRAM_LATENCY_S[g.arch] / k.inflight_bytes)
        return t * 1e6, hbm

    def launch_us(self, k: Kernel) -> float:
        if not k.own_launch:
            return 0.0
        setup = self.constants.gemm_setup_us if k.gemm is not None and k.kind in TENSOR_KINDS else 0.0
        if self.fused_moe is not None and is_fused_moe(k):
            setup += self.fused_moe.setup_us
        if self.decode_attention is not None and is_paged_decode(k):
            setup += self.decode_attention.setup_us
        return (self.constants.launch_us + setup) * k.count

    def floor_us(self, k: Kernel) -> float:
        """The least a kernel lasts: a flash-attention prefill call (vLLM's: the article's kernels are its own) its
        measured floor; any other launch the measured shortest kernel of the GPU, once per launch."""
        if isinstance(k.op, ContextAttentionOp):
            return max(self.prefill_floor_us, self.kernel_floor_us)
        return self.kernel_floor_us * k.count if k.own_launch else 0.0

    # -- the kernel's time -----------------------------------------------------------------------------
    def cost(self, kernel: Kernel, env: CostEnv = DEFAULT_ENV) -> KernelCost:
        time_us, bound, hbm_util, l2_hit, parts, hbm = self._analytic_terms(kernel, env)
        hit = tables.price_on(self.gpu.tables, kernel.op.op if isinstance(kernel.op, OpPart) else kernel.op) \
            if self.measured and kernel.op is not None else None
        if hit is None:
            return KernelCost(kernel, time_us, bound, hbm_util, l2_hit, parts)
        part = kernel.op if isinstance(kernel.op, OpPart) else None
        us, parts = hit.us, {**parts, "analytic_us": time_us, **hit.parts}
        if part is not None:
            share = self._shares(part.kernels)[part.index]
            us *= share
            parts["share"] = share
        # contention, cold L2: the analytic model's slowdown applied to the measured time (identity first: the
        # default is one shared object)
        if env is not DEFAULT_ENV and env != DEFAULT_ENV:
            plain = self._analytic_plain(kernel).time_us
            us *= time_us / plain if plain > 0 else 1.0
        # a collective's fixed_us is its analytic price; any other kernel's is a cost the plan adds on top
        measured_us = us + env.extra_us + (0.0 if kernel.kind == "collective" else kernel.fixed_us)
        util = hbm / (measured_us * 1e-6) / self.gpu.hbm_bw if measured_us > 0 else 0.0
        return KernelCost(kernel, measured_us, bound, min(1.0, max(0.0, util)), l2_hit, parts, "measured", hit.table)

    def _shares(self, kernels: tuple[Kernel, ...]) -> list[float]:
        """Each kernel's share of the op that times them together: its analytic time over theirs. Memoised by the
        group (its OpParts share one tuple), so siblings are priced once, not once per sibling."""
        hit = self._group_shares.get(id(kernels))
        if hit is None or hit[0] is not kernels:
            times = [self._analytic_plain(k).time_us for k in kernels]
            total = sum(times)
            shares = [t / total for t in times] if total > 0 else [1.0 / len(times)] * len(times)
            if len(self._group_shares) >= ANALYTIC_MEMO:  # bounded, as the analytic prices
                self._group_shares.clear()
            hit = self._group_shares[id(kernels)] = (kernels, shares)  # holds the group: its id is not reused
        return hit[1]

    def _analytic_plain(self, k: Kernel) -> KernelCost:
        c = self._analytic.get(k)
        if c is None:
            if len(self._analytic) >= ANALYTIC_MEMO:  # bounded: a long run's distinct shapes start it afresh
                self._analytic.clear()
            c = self._analytic[k] = self.analytic_cost(k, DEFAULT_ENV)
        return c

    def analytic_cost(self, kernel: Kernel, env: CostEnv = DEFAULT_ENV) -> KernelCost:
        """The roofline's price, whatever tables exist (source "analytic")."""
        return self._analytic_and_hbm(kernel, env)[0]

    def _analytic_and_hbm(self, kernel: Kernel, env: CostEnv) -> tuple[KernelCost, float]:
        """analytic_cost and the HBM bytes it streams (a measured price's HBM utilisation reads them too)."""
        time_us, bound, hbm_util, l2_hit, parts, hbm = self._analytic_terms(kernel, env)
        return KernelCost(kernel, time_us, bound, hbm_util, l2_hit, parts), hbm

    def _analytic_terms(self, kernel: Kernel, env: CostEnv) -> tuple[float, Bound, float, float, dict[str, float],
                                                                          float]:
        """The roofline price's (time, bound, HBM utilisation, L2 hit rate, parts) and its HBM bytes, without a
        KernelCost (a measured price reads them and builds its own). launch_us and floor_us inlined and the kernel's
        class (fused MoE, paged decode) worked out once for memory_us and launch_us, the same arithmetic (a serving
        run prices ~14k kernels: tests/hardware/test_cost.py checks them against the methods)."""
        c, kind, fused_moe, decode = self.constants, kernel.kind, self.fused_moe, self.decode_attention
        fused = fused_moe is not None and kind == "moe" and kernel.gemm is not None  # is_fused_moe
        paged = decode is not None and kind == "attention" and kernel.attn is not None \
            and kernel.attn.kv_heads > 0  # is_paged_decode
        compute = self.compute_us(kernel)
        memory, hbm_bytes = self._memory_us(kernel, env, fused, paged)
        busy = max(compute, memory) + c.overlap * min(compute, memory)
        if kernel.own_launch:  # launch_us
            setup = c.gemm_setup_us if kernel.gemm is not None and kind in TENSOR_KINDS else 0.0
            if fused and fused_moe is not None:
                setup += fused_moe.setup_us
            if paged and decode is not None:
                setup += decode.setup_us
            launch = (c.launch_us + setup) * kernel.count
        else:
            launch = 0.0
        if isinstance(kernel.op, ContextAttentionOp):  # floor_us
            floor = max(self.prefill_floor_us, self.kernel_floor_us)
        else:
            floor = self.kernel_floor_us * kernel.count if kernel.own_launch else 0.0
        launch = max(launch, floor - busy)
        fixed, extra_us = kernel.fixed_us, env.extra_us
        time_us = launch + busy + fixed + extra_us
        bound: Bound
        if launch + fixed > busy:
            bound = "latency"
        else:
            bound = "compute" if compute >= memory else "memory"
        total = kernel.bytes + env.extra_bytes
        hbm_util = hbm_bytes / (time_us * 1e-6) / self.gpu.hbm_bw if time_us > 0 else 0.0
        parts = {"compute_us": compute, "memory_us": memory, "launch_us": launch, "fixed_us": fixed,
                 "extra_us": extra_us}
        return (time_us, bound, min(1.0, max(0.0, hbm_util)), (total - hbm_bytes) / total if total > 0 else 0.0,
                parts, hbm_bytes)

    def total_us(self, kernels: list[Kernel], env: CostEnv = DEFAULT_ENV) -> float:
        return sum(self.cost(k, env).time_us for k in kernels)


def plain_roofline(gpu: GPU) -> CostModel:
    """FLOPs / peak vs bytes / peak bandwidth, nothing else: the baseline a calibrated model must beat."""
    return CostModel(gpu, PLAIN, tiled=False, measured=False)


# -- expected distinct experts ---------------------------------------------------------------------------
def expected_distinct_experts(n_tokens: int, num_experts: int, top_k: int) -> float:
    """Experts touched by n tokens when every expert is equally likely: E * (1 - (1 - k/E)^n).

    Each token picks k of E experts; a given expert is missed by one token with probability 1 - k/E,
    by all n with (1 - k/E)^n. 1 token -> k, many tokens -> E.
    """
    if num_experts <= 0 or n_tokens <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** n_tokens)


def zipf_popularity(num_experts: int, s: float) -> list[float]:
    """Routing probability per expert under a Zipf law p_i ~ 1 / i^s (s = 0: balanced)."""
    w = [1.0 / (i + 1) ** s for i in range(num_experts)]
    total = sum(w)
    return [x / total for x in w]


def expected_distinct_experts_skewed(n_tokens: int, num_experts: int, top_k: int, s: float = 1.0) -> float:
    """Distinct experts when popularity is skewed (Zipf exponent s; real routers are skewed, s ~ 0.5-1).

    A token's top-k hits expert i with probability min(1, k * p_i); the expected number of experts
    hit at least once by n tokens is the sum over experts of 1 - (1 - min(1, k p_i))^n. Fewer than the
    balanced figure for the same n: popular experts absorb tokens that would otherwise spread out.
    """
    if num_experts <= 0 or n_tokens <= 0:
        return 0.0
    return sum(1.0 - (1.0 - min(1.0, top_k * p)) ** n_tokens for p in zipf_popularity(num_experts, s))


# -- attention work ------------------------------------------------------------------------------------------
def attention_flops(q_tokens: int, context_before: int, num_heads: int, head_dim: int, causal: bool = True) -> float:
    """QK^T and PV FLOPs for q_tokens new queries over context_before cached + the new keys.

    Causal: each new query sees the cached context plus the new tokens up to itself, so the new x new
    block costs half of the full square (q_tokens^2 / 2) and the cached block is full.
    """
    keys_seen = q_tokens * context_before + (q_tokens * (q_tokens + 1) / 2 if causal else q_tokens * q_tokens)
    return 4.0 * num_heads * head_dim * keys_seen  # 2 FLOPs per MAC x (QK^T + PV)


def flash_prefill_bytes(
    q_tokens: int, context_before: int, q_dim: int, kv_dim: int, elem_bytes: float, kv_elem_bytes: float
) -> float:
    """Flash attention moves Q and O once and K, V once per pass (scores never leave the SM)."""
    kv_tokens = context_before + q_tokens
    return 2 * q_tokens * q_dim * elem_bytes + 2 * kv_tokens * kv_dim * kv_elem_bytes


def decode_attention_bytes(batch: int, context_len: int, q_dim: int, kv_dim: int, kv_elem_bytes: float) -> float:
    """One new token per sequence reads the whole KV cache of its sequence: the cache read dominates."""
    return batch * (2 * context_len * kv_dim * kv_elem_bytes + 2 * q_dim * 2.0)


# -- attention efficiency -----------------------------------------------------------------------------------
# Published forward-pass throughput of flash attention, BF16, TFLOP/s at sequence lengths 512, 1k, 2k, 4k, 8k,
# 16k (batch x seqlen = 16k tokens, hidden 2048), keyed (causal, head_dim). Causal FLOPs count half the square,
# as attention_flops does, so the figures divide by the same FLOPs.
ATTN_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
# Hopper: FlashAttention-3 on H100 SXM5 (Shah et al. 2024, arXiv:2407.08608, Fig. 5: non-causal head_dim 64
# and 128, causal head_dim 128 and 256), against the H100's 989.4 TFLOP/s dense BF16 peak: 65% at head_dim 128,
# 16k, non-causal; the paper's "up to 75%" is head_dim 256 non-causal.
FA3_H100 = {
    (False, 64): (333, 392, 460, 476, 496, 497),
    (False, 128): (467, 565, 625, 638, 646, 648),
    (True, 128): (292, 423, 521, 579, 602, 616),
    (True, 256): (286, 427, 537, 612, 628, 642),
}
H100_BF16_TFLOPS = 989.4
# Ampere: FlashAttention-2 (Dao 2023, arXiv:2307.08691) reaches up to 73% of the A100's 312 TFLOP/s in the
# forward pass (head_dim 128, long sequences; "50-73% of the theoretical maximum"). The curves' shape over
# sequence length and mask is FA2's own as FA3's Fig. 5 measures it on H100 (head_dim 128: non-causal 309..370,
# causal 191..335; head_dim 64 non-causal 282..324; head_dim 256 causal 208..298), scaled so that
# non-causal head_dim 128 at 16k is 73%.
FA2_SHAPE = {
    (False, 64): (282, 306, 318, 321, 322, 324),
    (False, 128): (309, 350, 362, 368, 370, 370),
    (True, 128): (191, 260, 298, 319, 333, 335),
    (True, 256): (208, 251, 278, 293, 297, 298),
}
FA2_A100_PEAK_SHARE = 0.73
# Blackwell: FlashAttention-4 on B200 reaches up to 1613 TFLOP/s BF16 forward, 71% of 2.25 PFLOP/s (Zadouri,
# Dao et al. 2026, "FlashAttention-4: algorithm and kernel pipelining co-design for asymmetric hardware
# scaling"; Together AI blog, 1605 TFLOP/s). Only the peak is published per configuration we use: the shape
# is FA3's, scaled so that non-causal head_dim 128 at 16k is 71%.
FA4_B200_PEAK_SHARE = 0.71


def _share_curves(table: Mapping[tuple[bool, int], tuple[int, ...]], scale: float) -> dict[tuple[bool, int], tuple]:
    return {key: tuple(v * scale for v in row) for key, row in table.items()}


ATTN_EFFICIENCY: dict[str, dict[tuple[bool, int], tuple[float, ...]]] = {
    "hopper": _share_curves(FA3_H100, 1.0 / H100_BF16_TFLOPS),
    "ampere": _share_curves(FA2_SHAPE, FA2_A100_PEAK_SHARE / FA2_SHAPE[(False, 128)][-1]),
    "blackwell": _share_curves(FA3_H100, FA4_B200_PEAK_SHARE / FA3_H100[(False, 128)][-1]),
}


@functools.cache  # pure in (arch, mask, head_dim): a serving run prices attention thousands of times
def _curve(arch: str, causal: bool, head_dim: int) -> tuple[float, ...]:
    """The published curve nearest in head_dim for this mask; a (mask, head_dim) pair no paper plots takes the
    other mask's curve at that head_dim times the causal/non-causal ratio measured at head_dim 128."""
    try:
        table = ATTN_EFFICIENCY[arch]
    except KeyError:
        known = ", ".join(ATTN_EFFICIENCY)
        raise ValueError(f"no attention figures for architecture {arch!r}; known: {known}") from None
    dims = sorted({d for _, d in table}, key=lambda d: (abs(math.log2(d / max(1, head_dim))), d))
    d = dims[0]
    if (causal, d) in table:
        return table[(causal, d)]
    ratio = [c / n for c, n in zip(table[(True, 128)], table[(False, 128)], strict=True)]
    other = table[(not causal, d)]
    return tuple(v * (r if causal else 1 / r) for v, r in zip(other, ratio, strict=True))


def _at_seqlen(curve: tuple[float, ...], seqlen: float) -> float:
    """Log-linear between the published lengths; flat past 16k. Below 512 a tile's fixed cost (prologue,
    epilogue, softmax rescale) is amortised over fewer keys: eff ~ L / (L + L0), L0 fitted to the 512 -> 1k
    step of the same curve."""
    xs = ATTN_SEQLENS
    if seqlen >= xs[-1]:
        return curve[-1]
    if seqlen >= xs[0]:
        i = bisect.bisect_right(xs, seqlen) - 1  # the last published length <= seqlen
        f = math.log2(seqlen / xs[i])  # neighbouring lengths are a factor of 2 apart
        return curve[i] + f * (curve[i + 1] - curve[i])
    r = min(1.99, max(1.0, curve[1] / curve[0]))  # r = 2 (L + L0) / (2L + L0) at L = 512: solve for L0
    l0 = 2 * xs[0] * (r - 1) / (2 - r)
    length = max(1.0, seqlen)
    return curve[0] * (length / (length + l0)) * ((xs[0] + l0) / xs[0])


# pure; a serving run's attention kernels repeat ~45% of their shapes (1926 distinct of 3424, a cold 500-request
# bench): a decode of the same batch and context, a chunk over the same prefix
@functools.lru_cache(maxsize=4096)
def attention_efficiency(arch: str, shape: AttentionShape) -> float:
    """Fraction of tensor peak a flash-attention forward kernel sustains on this work.

    The work splits in two: the new queries over the cached prefix (no mask: a non-causal block over
    context_before keys) and the new queries over themselves (causal: a triangle of q_tokens). Each runs at its
    published efficiency for its length; the kernel's efficiency is their FLOP-weighted harmonic mean.
    """
    q, ctx, d = shape.q_tokens, shape.context_before, shape.head_dim
    prefix = float(q * ctx)
    diag = q * (q + 1) / 2 if shape.causal else float(q * q)
    if prefix + diag <= 0:
        return _at_seqlen(_curve(arch, shape.causal, d), 1)
    t = diag / _at_seqlen(_curve(arch, shape.causal, d), q)
    if prefix > 0:
        t += prefix / _at_seqlen(_curve(arch, False, d), ctx)
    return (prefix + diag) / t
