"""Measured kernel prices from aiconfigurator-core's per-op tables (NVIDIA AIConfigurator, Apache-2.0).

    price(gpu_name, op) -> Measured(us, table, parts) | None      the GPU record's tables (hardware/gpus.py)
    price_on(system, op) -> Measured(us, table, parts) | None     one aiconfigurator-core system folder

`op` is one of hardware/kernel.py's op specs (GemmOp, MoeOp, ContextAttentionOp, DecodeAttentionOp, AllReduceOp,
AllToAllOp). None means the GPU's measured table does not cover it (a shape outside the measured range, a key never
measured, or a cell with a corner never measured): the cost model then prices the kernel analytically and says so.
A table the record names but the package lacks raises MissingTable: nothing falls back to analytic prices silently.
The rows are a compact extract shipped under hardware/data/aic/ (bench/extract_aic_tables.py regenerates it from
an installed aiconfigurator-core; NOTICE there); nothing is downloaded at run time. Interpolation: tables/grid.py.

Per op, what is looked up (times in microseconds, sizes in bytes, converted by the extract):
- gemm: (dtype) over (m, n, k). fp8_block rows were timed eagerly (DeepGEMM through PyTorch): where a row is within
  HOST_BOUND of its (n, k)'s fastest row the host's launch time, not the GPU, set it, so it does not cover the shape;
  on Hopper the per-tensor fp8 rows price it there instead (FP8_PROXY_SYSTEMS; table names that kernel).
- moe: (dtype, distribution, hidden, inter, experts, topk, moe_tp, ep) over tokens. routing balanced and power_law:A
  for A in the measured exponents read their rows (between measured exponents: log-linear in A, balanced as A = 0);
  uniform random routing and measured counts read the balanced rows at the token count that gives every rank the
  busiest expert-parallel rank's expected load (hardware/routing.py busiest_rank_share; balanced rows give every
  rank the mean). An op that names its router's distinct experts (MoeOp.distinct, ep 1: a serving run's) is moved
  from the row's distinct experts to them by the measured price of one expert (_moe).
- context_attention: (kv_dtype, q_heads, kv_heads, head_dim) over (batch, seq_len), prefill from an empty cache (the
  tables hold no cached prefix: a chunk over one reads the fresh prompt of equal causal work, equal_work_seq_len).
- decode_attention: the same key over (batch, kv_len).
- all_reduce: (impl, gpus) over bytes; impl custom = vLLM's custom all-reduce replayed in a CUDA graph, custom_eager
  the same kernel launched eagerly, nccl = NCCL's ring/tree.
- all_to_all: NCCL all-to-all, (gpus) over bytes.
"""

from __future__ import annotations

import bisect
import csv
import functools
import gzip
import itertools
import json
import math
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from layerscope.hardware.gpus import GPUS, gpu
from layerscope.hardware.kernel import (
    AllReduceOp,
    AllToAllOp,
    ContextAttentionOp,
    DecodeAttentionOp,
    GemmOp,
    MoeOp,
    Op,
    TableRef,
)
from layerscope.hardware.routing import busiest_rank_share, parse_routing, table_distinct_experts
from layerscope.hardware.tables.grid import Grid

DATA = Path(__file__).resolve().parents[1] / "data" / "aic"
SYSTEMS = {name: g.tables for name, g in GPUS.items()}  # GPU name -> aiconfigurator-core system folder
PACKAGE_DIR = "aiconfigurator_core/"  # TableRef.file: the parquet file's path inside aiconfigurator-core's package
HOST_BOUND = 1.5  # an eager row under 1.5x its shape's fastest is host-launch time (the fp8_block rows' ~85 us floor)
MEASURED_POWER_LAWS = (1.01, 1.2)  # the exponents aiconfigurator-core measured MoE routing at
# Where the block-fp8 rows are host-bound, the per-tensor fp8 GEMM's rows (CUTLASS scaled_mm, not host-bound) price a
# block-fp8 GEMM: on Hopper the two agree where both are GPU-bound, without bias (block / per-tensor median 0.96 on
# H100, 1.04 on H200; median |1 - ratio| 9-10%, p90 33-35%: validation.fp8_proxy_ratios, bench/README.md "Per-op
# validation against aiconfigurator-core"), where the analytic model is ~20% fast; on B200 they do not agree, so
# B200's host-bound block-fp8 GEMMs stay analytic.
FP8_PROXY_SYSTEMS = ("h100_sxm", "h200_sxm")
_V = TypeVar("_V")


@dataclass(frozen=True)
class Measured:
    us: float
    table: TableRef
    parts: dict[str, float] = field(default_factory=dict)


class _Table:
    """One system's table of one op. The extract is read once and its rows grouped by key; a key's rows are parsed,
    and its grid cells, kernel source and fastest rows built, the first time that key is read (a run reads a few
    keys of a table: one GEMM dtype of three)."""

    def __init__(self, op: str, groups: dict[tuple, list[str]],
                 parse: Callable[[list[str]], tuple[tuple[float, ...], float, str]],
                 ref: Callable[[tuple, str], TableRef]) -> None:
        self._groups = groups  # typed key -> its rows' CSV lines, in file order (one str a row: small to keep)
        self._parse = parse  # a raw row -> (swept point, us, kernel source)
        self._ref = ref
        self._rows: dict[tuple, list[tuple[tuple[float, ...], float, str]]] = {}
        self.grid = Grid(_PerKey(groups, self._points, keep=False), monotone=SWEPT[op])  # the grid keeps its cells
        self.refs: Mapping[tuple, TableRef] = _PerKey(groups, self._key_ref)  # per key: where its rows come from

    def rows(self, key: tuple) -> list[tuple[tuple[float, ...], float, str]]:
        """(swept point, us, kernel source) per row of the key, in file order."""
        hit = self._rows.get(key)
        if hit is None:
            hit = self._rows[key] = list(map(self._parse, csv.reader(self._groups[key])))
            self._groups[key] = []  # parsed: its strings are not needed again
        return hit

    def fastest(self, key: tuple) -> dict[tuple, float]:
        """The key's fastest row per shape (the point without its first coordinate: a GEMM's (n, k); HOST_BOUND)."""
        out: dict[tuple, float] = {}
        for x, us, _ in self.rows(key) if key in self._groups else ():
            out[x[1:]] = min(us, out.get(x[1:], math.inf))
        return out

    @property
    def min_us(self) -> dict[tuple, float]:
        """(key, shape) -> the fastest row, over every key (parses them all)."""
        return {(key, shape): us for key in self._groups for shape, us in self.fastest(key).items()}

    def _points(self, key: tuple) -> dict[tuple[float, ...], list[float]]:
        return Grid.points((x, us) for x, us, _ in self.rows(key))

    def _key_ref(self, key: tuple) -> TableRef:
        return self._ref(key, self.rows(key)[0][2])  # the source its first row names


class _PerKey(Mapping[tuple, _V]):
    """A mapping over known keys whose values are built when read: the first time only (`keep`), or each time (a
    reader that keeps what it builds from them)."""

    def __init__(self, keys: Mapping[tuple, object], build: Callable[[tuple], _V], keep: bool = True) -> None:
        self._keys, self._build, self._keep, self._built = keys, build, keep, dict[tuple, _V]()

    def __getitem__(self, key: tuple) -> _V:
        try:
            return self._built[key]
        except KeyError:
            if key not in self._keys:
                raise
        value = self._build(key)
        if self._keep:
            self._built[key] = value
        return value

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


@functools.cache
def manifest() -> dict:
    with open(DATA / "manifest.json") as f:
        return json.load(f)


class MissingTable(LookupError):
    """A GPU record names a measured table the package does not hold."""


@functools.cache
def table(system: str, op: str) -> _Table:
    rel = f"{system}/{op}.csv.gz"
    info = manifest()["files"].get(rel)
    if info is None or not (DATA / rel).exists():
        raise MissingTable(f"no measured {op} table {rel} under {DATA} (bench/extract_aic_tables.py writes it)")
    backends = info["backend"].split("+")

    def ref(key: tuple, source: str) -> TableRef:
        b = _backend_of(op, key, backends)
        return TableRef(system, b, info["versions"][b], PACKAGE_DIR + info["sources"][backends.index(b)], source)

    with gzip.open(DATA / rel, "rt") as f:
        lines = f.read().splitlines()
    raw_key, typed_key, parse = _row_reader(op, next(csv.reader(lines[:1])))
    groups = group_lines(lines[1:], raw_key, rel)
    return _Table(op, {typed_key(k): ls for k, ls in groups.items()}, parse, ref)


def group_lines(lines: list[str], raw_key: Callable[[list[str]], tuple[str, ...]], name: str) -> dict[tuple,
                                                                                                        list[str]]:
    """An extract's data lines by their rows' raw key, in file order. Without a quote character anywhere, a line's
    CSV fields are the line split at its commas (the extract quotes nothing: 2.5x faster than csv.reader's rows
    here, ~17k lines a GEMM table); otherwise the csv module reads them."""
    groups: dict[tuple, list[str]] = {}
    if not any('"' in line for line in lines):
        for line in lines:
            groups.setdefault(raw_key(line.split(",")), []).append(line)
        return groups
    reader = csv.reader(lines)
    for i, (line, r) in enumerate(zip(lines, reader, strict=True), 1):
        if reader.line_num != i:  # a quoted line break: a record over two lines (the extract writes none)
            raise ValueError(f"{name}: a record spans lines at line {i + 1}")
        groups.setdefault(raw_key(r), []).append(line)
    return groups


def read_rows(system: str, op: str) -> list[tuple[tuple, tuple[float, ...], float, str]]:
    """(key, swept point, us, kernel source) per row of the extract, in file order."""
    header, raw = _read_raw(system, op)
    raw_key, typed_key, parse = _row_reader(op, header)
    keys: dict[tuple[str, ...], tuple] = {}  # raw key strings -> typed key, converted once per key
    out = []
    for r in raw:
        k = raw_key(r)
        key = keys.get(k)
        if key is None:
            key = keys[k] = typed_key(k)
        out.append((key, *parse(r)))
    return out


def _read_raw(system: str, op: str) -> tuple[list[str], list[list[str]]]:
    """The extract's header and rows as strings (csv.reader: DictReader is 3x slower here)."""
    with gzip.open(DATA / f"{system}/{op}.csv.gz", "rt") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, list(reader)


def _row_reader(op: str, header: list[str]) -> tuple[Callable[[list[str]], tuple[str, ...]],
                                                       Callable[[tuple[str, ...]], tuple],
                                                       Callable[[list[str]], tuple[tuple[float, ...], float, str]]]:
    """For this op's extract: a row's raw key strings, a raw key's typed key, and a row's (swept point, us, kernel
    source)."""
    key_cols, x_cols = _LAYOUT[op]
    raw_key, raw_x = _columns(header, [n for n, _ in key_cols]), _columns(header, x_cols)
    kinds = [kind for _, kind in key_cols]
    us_at = header.index("us")
    source_at = next((header.index(c) for c in ("kernel", "impl") if c in header), None)

    def typed_key(raw: tuple[str, ...]) -> tuple:
        return tuple(kind(v) for kind, v in zip(kinds, raw, strict=True))

    def parse(r: list[str]) -> tuple[tuple[float, ...], float, str]:
        return tuple(map(float, raw_x(r))), float(r[us_at]), "NCCL" if source_at is None else r[source_at]

    return raw_key, typed_key, parse


def _columns(header: list[str], names: Sequence[str]) -> Callable[[list[str]], tuple[str, ...]]:
    """A row's values in these columns, always as a tuple (itemgetter of one index returns the bare value)."""
    at = [header.index(n) for n in names]
    if len(at) == 1:
        i = at[0]
        return lambda r: (r[i],)
    return operator.itemgetter(*at)


def _backend_of(op: str, key: tuple, backends: list[str]) -> str:
    if op == "all_reduce":
        return "nccl" if key[0] == "nccl" else "vllm"
    return backends[0]


# the dimension each table sweeps (m, tokens, seq_len, kv_len, bytes): time never falls along it (Grid monotone)
SWEPT = {"gemm": 0, "moe": 0, "context_attention": 1, "decode_attention": 1, "all_reduce": 0, "all_to_all": 0}
_LAYOUT = {  # per op: the key's columns (name, type), then the swept columns
    "gemm": ((("dtype", str),), ("m", "n", "k")),
    "moe": ((("dtype", str), ("distribution", str), ("hidden", int), ("inter", int), ("experts", int),
             ("topk", int), ("moe_tp", int), ("ep", int)), ("tokens",)),
    "context_attention": ((("kv_dtype", str), ("q_heads", int), ("kv_heads", int), ("head_dim", int)),
                          ("batch", "seq_len")),
    "decode_attention": ((("kv_dtype", str), ("q_heads", int), ("kv_heads", int), ("head_dim", int)),
                         ("batch", "kv_len")),
    "all_reduce": ((("impl", str), ("gpus", int)), ("bytes",)),
    "all_to_all": ((("gpus", int),), ("bytes",)),
}


def lookup(system: str, op: str, key: tuple, x: tuple[float, ...]) -> Measured | None:
    t = table(system, op)
    us = t.grid(key, x)
    if us is None:
        return None
    return Measured(us, t.refs[key], {"measured_us": us})


def price(gpu_name: str, op: Op) -> Measured | None:
    """The measured time of `op` on this GPU (ValueError for a GPU not in hardware/gpus.py), or None where its
    measured table does not cover it."""
    return price_on(gpu(gpu_name).tables, op)


@functools.lru_cache(maxsize=65536)  # pure in (system, op): a serving run prices the same shapes every step
def price_on(system: str, op: Op) -> Measured | None:
    """The measured time of `op` in one system folder's tables, or None where they do not cover it."""
    return _PRICERS[type(op)](system, op)


def _gemm(system: str, op: GemmOp) -> Measured | None:
    x = (float(op.m), float(op.n), float(op.k))
    hit = lookup(system, "gemm", (op.dtype,), x)
    if op.dtype != "fp8_block":
        return hit
    if hit is not None and not host_bound(system, op, hit.us):
        return hit
    if system not in FP8_PROXY_SYSTEMS:
        return None
    proxy = lookup(system, "gemm", ("fp8",), x)  # the per-tensor fp8 GEMM's rows stand in (FP8_PROXY_SYSTEMS)
    if proxy is None:
        return None
    return Measured(proxy.us, proxy.table, {"measured_us": proxy.us, "fp8_per_tensor_proxy": 1.0})


def host_bound(system: str, op: GemmOp, us: float) -> bool:
    """Whether an eager block-fp8 row is within HOST_BOUND of the fastest row of the (n, k) it lies between."""
    t = table(system, "gemm")
    key = (op.dtype,)
    axes = t.grid.axes(key)
    if axes is None:
        return False
    fastest = _fastest_by_shape(system, key)
    # the measured (n, k) bracketing the wanted one: on each axis the nearest value at or below it and at or above
    want = (float(op.n), float(op.k))
    near = [{a for a in _bracket(axis, w) if a is not None} for axis, w in zip(axes[1:], want, strict=True)]
    lows = [fastest[nk] for nk in itertools.product(*near) if nk in fastest]
    return us < HOST_BOUND * max(lows, default=0.0)


def _bracket(axis: tuple[float, ...], w: float) -> tuple[float | None, float | None]:
    """The largest axis value <= w and the smallest >= w (None where there is none); the axis is ascending."""
    i = bisect.bisect_left(axis, w)
    hi = axis[i] if i < len(axis) else None
    lo = hi if hi == w else (axis[i - 1] if i > 0 else None)
    return lo, hi


@functools.cache
def _fastest_by_shape(system: str, key: tuple) -> dict[tuple, float]:
    """One key's fastest row per (n, k): min_us without a scan of every key's shapes per lookup."""
    return table(system, "gemm").fastest(key)


@functools.cache
def graph_kernel_floor_us(system: str) -> float:
    """The shortest kernel this system's tables measured: their fastest bf16 GEMM (n 128, k 256-1024: well under a
    microsecond of work; on the H100, H200 and B200 flat within 3% for m from 1 to 64, on the A100 its one-row GEMV),
    timed as aiconfigurator-core times every op, back to back in a replayed CUDA graph (collector/helper.py
    benchmark_with_power: repeat_n calls captured, the replay's time over them). It is what any kernel pays as a
    node of a graph: launch, ramp-up, tail, the gap to the next node."""
    return min(_fastest_by_shape(system, ("bf16",)).values())


def _moe(system: str, op: MoeOp) -> Measured | None:
    """The measured experts; moved to the router's distinct experts where the engine says how many it reads."""
    hit = _moe_row(system, op)
    # where the rows show it: a decode-sized step (tokens x top_k <= experts, about one row an expert); beyond, the
    # experts' rows grow and the row's own price stands
    if hit is None or op.distinct <= 0 or op.ep != 1 or op.tokens * op.topk > op.experts:
        return hit
    table_d = _table_distinct(op)
    per_expert = _per_expert_us(system, op)
    if table_d is None or per_expert is None:
        return hit
    # a decode-sized MoE streams the weights of the experts it reads: the balanced rows are linear in them (H100,
    # Qwen3-30B-A3B's shape: 24.4 us + 3.09 us an expert from 8 to 128 experts, within 3%), and a power-law row
    # reads the experts its generator's counts give (hardware/routing.py table_distinct_experts), not a router's
    us = max(hit.us + per_expert * (op.distinct - table_d), hit.us * op.distinct / table_d)
    return Measured(us, hit.table, {**hit.parts, "table_us": hit.us, "table_distinct_experts": table_d,
                                    "router_distinct_experts": op.distinct, "per_expert_us": per_expert})


def _per_expert_us(system: str, op: MoeOp) -> float | None:
    """The measured price of one more expert read: the balanced rows from one token (top_k experts, one row each) to
    experts / top_k tokens (every expert, one row each)."""
    base = (op.dtype, "balanced", op.hidden, op.inter, op.experts, op.topk, op.moe_tp, op.ep)
    one = lookup(system, "moe", base, (1.0,))
    every = lookup(system, "moe", base, (op.experts / op.topk,))
    if one is None or every is None or op.experts <= op.topk:
        return None
    return (every.us - one.us) / (op.experts - op.topk)


def _table_distinct(op: MoeOp) -> float | None:
    """The distinct experts the table row priced for `op` reads (its routing, interpolated as its price is)."""
    kind, values = parse_routing(op.routing)
    rows = float(min(op.experts, op.tokens * op.topk))  # balanced, and the balanced rows uniform and counts read
    if kind != "power_law":
        return rows
    alpha = values[0]
    points = [(0.0, rows), *((a, table_distinct_experts(op.tokens, op.experts, op.topk, a))
                             for a in MEASURED_POWER_LAWS)]
    for (a0, d0), (a1, d1) in zip(points, points[1:], strict=False):
        if a0 <= alpha <= a1:
            f = (alpha - a0) / (a1 - a0)
            return math.exp((1 - f) * math.log(d0) + f * math.log(d1))
    return None


def _moe_row(system: str, op: MoeOp) -> Measured | None:
    base = (op.hidden, op.inter, op.experts, op.topk, op.moe_tp, op.ep)
    x = (float(op.tokens),)
    kind, values = parse_routing(op.routing)
    if kind == "balanced":
        return lookup(system, "moe", (op.dtype, "balanced", *base), x)
    if kind in ("uniform", "counts"):
        # the busiest rank holds as many rows as every rank would at `excess` x the tokens, balanced
        excess = busiest_rank_share(op.tokens, op.experts, op.topk, op.ep, op.routing) * op.ep
        hit = lookup(system, "moe", (op.dtype, "balanced", *base), (op.tokens * excess,))
        if hit is not None:
            return Measured(hit.us, hit.table, {"measured_us": hit.us, "busiest_rank_excess": excess})
        hit = lookup(system, "moe", (op.dtype, "balanced", *base), x)  # at the top of the grid: time ~ rows there
        if hit is None:
            return None
        return Measured(hit.us * excess, hit.table, {"measured_us": hit.us, "busiest_rank_excess": excess})
    # power law: the measured exponents, balanced at 0; log-linear in the exponent between them
    alpha = values[0]
    points = [(0.0, "balanced"), *((a, f"power_law_{a:g}") for a in MEASURED_POWER_LAWS)]
    for (a0, d0), (a1, d1) in zip(points, points[1:], strict=False):
        if a0 <= alpha <= a1:
            lo = lookup(system, "moe", (op.dtype, d0, *base), x)
            hi = lookup(system, "moe", (op.dtype, d1, *base), x)
            if alpha == a1 and hi is not None:
                return hi
            if lo is None or hi is None:
                return None
            f = (alpha - a0) / (a1 - a0)
            us = math.exp((1 - f) * math.log(lo.us) + f * math.log(hi.us))
            return Measured(us, hi.table, {f"{d0}_us": lo.us, f"{d1}_us": hi.us})
    return None


def equal_work_seq_len(seq_len: int, prefix_len: int) -> float:
    """The prompt length whose causal prefill from an empty cache does the work of `seq_len` new tokens over
    `prefix_len` cached ones: S (S + 1) / 2 = q ctx + q (q + 1) / 2 query-key pairs (hardware/cost.py
    attention_flops)."""
    pairs = seq_len * prefix_len + seq_len * (seq_len + 1) / 2
    return (math.sqrt(1.0 + 8.0 * pairs) - 1.0) / 2.0


def _context(system: str, op: ContextAttentionOp) -> Measured | None:
    key = (op.kv_dtype, op.q_heads, op.kv_heads, op.head_dim)
    if op.prefix_len <= 0:
        return lookup(system, "context_attention", key, (float(op.batch), float(op.seq_len)))
    # A chunk over a cached prefix runs the same flash kernel over the same (query block, key block) tiles as a
    # fresh prompt of equal work, with fewer query blocks to spread over the SMs (so no faster): priced as that
    # prompt's measured time. The analytic model it replaces ran above every measured rate of the kernel (B200: a
    # 2048-token chunk over 2048 cached at 1,283 TFLOP/s, the measured 4096-token prefill of about that work 525).
    s_eq = equal_work_seq_len(op.seq_len, op.prefix_len)
    hit = lookup(system, "context_attention", key, (float(op.batch), s_eq))
    return None if hit is None else Measured(hit.us, hit.table, {**hit.parts, "equal_work_seq_len": s_eq})


def _decode(system: str, op: DecodeAttentionOp) -> Measured | None:
    return lookup(system, "decode_attention", (op.kv_dtype, op.q_heads, op.kv_heads, op.head_dim),
                  (float(op.batch), float(op.kv_len)))


def _all_reduce(system: str, op: AllReduceOp) -> Measured | None:
    impl = {"custom": "custom_graph"}.get(op.impl, op.impl)
    return lookup(system, "all_reduce", (impl, op.gpus), (float(op.bytes),))


def _all_to_all(system: str, op: AllToAllOp) -> Measured | None:
    return lookup(system, "all_to_all", (op.gpus,), (float(op.bytes),))


_PRICERS: dict[type, Callable[[str, Any], Measured | None]] = {
    GemmOp: _gemm, MoeOp: _moe, ContextAttentionOp: _context, DecodeAttentionOp: _decode,
    AllReduceOp: _all_reduce, AllToAllOp: _all_to_all}
