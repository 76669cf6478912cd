"""The data types passed between a runtime's kernel plan, the cost model and the engine."""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

StageKind = Literal["norm", "gemm", "attention", "moe", "elementwise", "memory", "overhead", "collective"]
Bound = Literal["compute", "memory", "latency"]
Scope = Literal["layer", "model"]
Source = Literal["measured", "analytic"]
_T = TypeVar("_T")


def dict_init(cls: type[_T]) -> type[_T]:
    """Give a frozen dataclass an __init__ that writes its fields into the instance dict directly, instead of the
    generated one's object.__setattr__ per field (Kernel: 20 of them; a serving run builds ~13k Kernels and ~25k
    KernelCosts). The same signature, defaults and resulting instance; for classes with no __post_init__."""
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__: dict_init would skip it")
    ns: dict[str, Any] = {"_MISSING": dataclasses.MISSING}
    params, body = [], []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.default is not dataclasses.MISSING:
            ns[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            ns[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            body.append(f"    if {f.name} is _MISSING:\n        {f.name} = _factory_{f.name}()")
        else:
            params.append(f.name)
        body.append(f"    d[{f.name!r}] = {f.name}")
    exec(f"def __init__(self, {', '.join(params)}):\n    d = self.__dict__\n" + "\n".join(body), ns)
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


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


# -- what a measured table is looked up by (hardware/tables); the fields are `layerscope kernel`'s spec fields --------
@dataclass(frozen=True)
class GemmOp:
    m: int
    n: int
    k: int
    dtype: str = "bf16"  # bf16 | fp8 (per-tensor scales) | fp8_block (128x128 weight blocks, 1x128 activation groups)
    op = "gemm"


@dataclass(frozen=True)
class MoeOp:
    """The routed experts of one MoE layer on one GPU, with their align/sort and sum, without the router: the whole
    model's sizes and the deployment's split (moe_tp x ep GPUs)."""

    tokens: int
    hidden: int
    inter: int
    experts: int
    topk: int
    moe_tp: int = 1
    ep: int = 1
    dtype: str = "bf16"  # bf16 | fp8_block
    routing: str = "uniform"  # balanced | uniform | power_law:ALPHA (hardware/cost.py busiest_rank_rows)
    # the distinct experts the engine's router reads this step (runtime/routing.py), 0 = the table's own routing;
    # a measured price is moved to it from the table row's (hardware/tables _moe): ep 1 only
    distinct: float = 0.0
    op = "moe"


@dataclass(frozen=True)
class ContextAttentionOp:
    batch: int
    seq_len: int
    prefix_len: int
    q_heads: int
    kv_heads: int
    head_dim: int
    kv_dtype: str = "bf16"
    op = "context_attention"


@dataclass(frozen=True)
class DecodeAttentionOp:
    batch: int
    kv_len: int
    q_heads: int
    kv_heads: int
    head_dim: int
    kv_dtype: str = "bf16"
    op = "decode_attention"


@dataclass(frozen=True)
class AllReduceOp:
    gpus: int
    bytes: float
    impl: str = "custom"  # custom (vLLM's custom all-reduce under CUDA graphs) | custom_eager | nccl
    op = "all_reduce"


@dataclass(frozen=True)
class AllToAllOp:
    gpus: int
    bytes: float
    op = "all_to_all"


Op = GemmOp | MoeOp | ContextAttentionOp | DecodeAttentionOp | AllReduceOp | AllToAllOp


@dataclass(frozen=True)
class OpPart:
    """A kernel that is one of several a measured op times together (the fused MoE's align, GEMMs, activation and
    sum; a block-fp8 GEMM's input quantization and GEMM): the op's measured time is shared among `kernels` in
    proportion to their analytic times; this kernel is kernels[index]."""

    op: Op
    kernels: tuple[Kernel, ...]
    index: int


@dict_init
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
    # bytes the grid's loads keep in flight at once (a small-tile kernel's software pipeline): its stream is at most
    # inflight_bytes / DRAM latency (Little's law, hardware/cost.py DRAM_LATENCY_S); 0 = enough to reach the bandwidth
    inflight_bytes: float = 0.0
    attn: AttentionShape | None = None  # attention kernels: priced with the published flash-attention efficiency
    scope: Scope = "layer"  # "model": paid once per model step (embedding lookup, switch-over), not once per layer
    # what a measured table prices it by (hardware/tables); None: the analytic model only. An OpPart: one of the
    # kernels that op times together
    op: Op | OpPart | None = None

    def evolve(self, **changes: object) -> Kernel:
        """dataclasses.replace(self, **changes) without its per-call walk over the fields (a plan builds thousands
        of kernels a run): Kernel has no __post_init__ and every field is an init field."""
        if not changes.keys() <= _KERNEL_FIELDS:
            raise TypeError(f"Kernel has no field {sorted(changes.keys() - _KERNEL_FIELDS)}")
        new = object.__new__(Kernel)
        fields = new.__dict__
        fields.update(self.__dict__)
        fields.pop(_HASH, None)  # the copy's fields differ: its hash is its own
        fields.update(changes)
        return new

    def __hash__(self) -> int:
        """The hash dataclass would give (of the tuple of every field), computed once per kernel: a run's memos
        (Timing's prices, the cost model's) hash each new kernel several times, an OpPart's with its siblings'."""
        try:
            return self.__dict__[_HASH]
        except KeyError:
            h = self.__dict__[_HASH] = hash(_kernel_fields(self))
            return h

    def __eq__(self, other: object) -> bool:
        """The equality dataclass would give (every field, in order), at C speed: a warm run's memo hits compare
        each new kernel with its stored twin (~13k a 500-request run, 1.2 us each field by field). Two instance
        dicts hold the fields and, once hashed, the same cached hash (equal fields hash alike), so they compare
        as the fields do; a hashed kernel against an unhashed one compares its fields."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        mine, theirs = self.__dict__, other.__dict__
        if (_HASH in mine) is (_HASH in theirs):  # the same keys: the fields, and the cached hash on both or neither
            return mine == theirs
        return _kernel_fields(self) == _kernel_fields(other)

    def __getstate__(self) -> dict[str, object]:
        """Pickled and copied without the cached hash: a string's hash differs from one process to the next."""
        state = self.__dict__.copy()
        state.pop(_HASH, None)
        return state


_KERNEL_FIELDS = frozenset(Kernel.__dataclass_fields__)
_kernel_fields = operator.attrgetter(*Kernel.__dataclass_fields__)  # every field's value, in declaration order
_HASH = "_hash"  # Kernel.__hash__'s cache: an instance attribute, not a field (eq, repr and replace ignore it)


@dataclass(frozen=True)
class CostEnv:
    """Conditions the engine imposes on a launch at run time."""

    hbm_bw_scale: float = 1.0  # < 1 when bandwidth is stolen (memory contention, cross-socket traffic)
    l2_warm: bool = True  # False on the first launch after a switch-over: nothing is resident yet
    extra_bytes: float = 0.0  # e.g. re-fetched evicted pages, cross-bank reads
    extra_us: float = 0.0  # e.g. fixed switch-over costs


@dict_init
@dataclass(frozen=True)
class KernelCost:
    kernel: Kernel
    time_us: float
    bound: Bound
    hbm_util: float  # achieved HBM bandwidth / peak, 0..1
    l2_hit: float  # fraction of bytes served from L2, 0..1
    parts: dict[str, float] = field(default_factory=dict)  # e.g. {"compute_us":..., "memory_us":..., "launch_us":...}
    source: Source = "analytic"  # measured: from a measured table (hardware/tables); analytic: the roofline model
    table: TableRef | None = None  # the measured table it came from


@dataclass(frozen=True)
class TableRef:
    """Where a measured price comes from: aiconfigurator-core's table for a system, backend and version, and the
    parquet file (within aiconfigurator_core/) its rows were extracted from (hardware/data/aic/manifest.json)."""

    system: str  # h100_sxm, h200_sxm, b200_sxm, a100_sxm
    backend: str  # vllm | nccl | vllm+nccl
    version: str
    file: str  # aiconfigurator_core/systems/data/<system>/<op>/<backend>/<version>/<table>.parquet
    kernel: str = ""  # the kernel source the rows were measured with (torch.nn.functional.linear, vllm_flash_attn_fa3)

    def label(self) -> str:
        return f"{self.system} · {self.backend} {self.version} · {self.file} · {self.kernel}"

    def as_dict(self) -> dict[str, str]:
        return {"system": self.system, "backend": self.backend, "version": self.version, "file": self.file,
                "kernel": self.kernel}
