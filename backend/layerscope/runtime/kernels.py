"""The data types passed between a runtime's kernel plan, the cost model and the engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

StageKind = Literal["norm", "gemm", "attention", "moe", "elementwise", "memory", "overhead", "collective"]
Bound = Literal["compute", "memory", "latency"]
Scope = Literal["layer", "model"]


@dataclass(frozen=True)
class AttentionShape:
    """What an attention kernel's efficiency depends on (hardware/cost.py attention_efficiency): per sequence,
    q_tokens new queries over context_before cached keys plus themselves, head_dim, causal mask."""

    q_tokens: int
    context_before: int
    head_dim: int
    causal: bool = True
    # a paged decode (one query per sequence, split-KV): `batch` sequences over `kv_heads` KV heads on this GPU;
    # the cost model sizes its grid from them (hardware/cost.py decode_attention_ctas). 0: not a paged decode
    batch: int = 1
    kv_heads: int = 0


@dataclass(frozen=True)
class Kernel:
    """One kernel launch as a runtime plans it: what it computes and what it moves, not how long it takes.

    `gemm` carries (M, N, K) for GEMM-shaped work so the cost model can apply tile/wave quantization;
    `l2_bytes` is the part of `bytes` that can stay resident in L2 (e.g. a small weight reused across
    launches, or a hot embedding row); `count` > 1 means the same shape launched `count` times
    back to back (e.g. one GEMM per active expert). `flops` and `bytes` are totals over all `count`
    launches and `groups`; `gemm` is the shape of ONE problem.
    """

    name: str  # as a profiler shows it
    stage: str  # input_norm, qkv_proj, qk_norm_rope, attention, o_proj, post_norm, residual_add, router, experts, ...
    kind: StageKind
    flops: float
    bytes: float
    shapes: str = ""
    gemm: tuple[int, int, int] | None = None  # (M, N, K)
    dtype: str = "bf16"
    l2_bytes: float = 0.0
    count: int = 1
    stream: str = "compute"
    groups: int = 1  # a grouped GEMM: `groups` independent (M, N, K) problems in ONE launch (fused MoE: one per expert)
    own_launch: bool = True  # False: a stage fused into the previous kernel's launch (pays no launch overhead)
    vectorized: bool = True  # False: loads element by element (older norm/rope/act kernels) and reaches less bandwidth
    fixed_us: float = 0.0  # a fixed cost the runtime states as such (the article's switch-over costs), added as is
    ctas: int = 0  # thread blocks in the grid; 0 = enough to fill every SM. Fewer blocks than SMs get their SMs' share
    attn: AttentionShape | None = None  # attention kernels: priced with the published flash-attention efficiency
    scope: Scope = "layer"  # "model": paid once per model step (embedding lookup, switch-over), not once per layer


@dataclass(frozen=True)
class CostEnv:
    """Conditions the engine imposes on a launch at run time."""

    hbm_bw_scale: float = 1.0  # < 1 when bandwidth is stolen (memory contention, cross-socket traffic)
    l2_warm: bool = True  # False on the first launch after a switch-over: nothing is resident yet
    extra_bytes: float = 0.0  # e.g. re-fetched evicted pages, cross-bank reads
    extra_us: float = 0.0  # e.g. fixed switch-over costs


@dataclass(frozen=True)
class KernelCost:
    kernel: Kernel
    time_us: float
    bound: Bound
    hbm_util: float  # achieved HBM bandwidth / peak, 0..1
    l2_hit: float  # fraction of bytes served from L2, 0..1
    parts: dict[str, float] = field(default_factory=dict)  # e.g. {"compute_us":..., "memory_us":..., "launch_us":...}
