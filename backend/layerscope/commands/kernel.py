"""`layerscope kernel`: price one kernel from flags, or many from a JSONL file (`--from FILE`, one spec a line).

Prints one JSON object a line: {"us", "source", "table", "parts"} -- the time in microseconds; "measured" (from the
measured table named in "table": system, backend, version, file, kernel) or "analytic" (the roofline model; table
null); and the parts the price is made of. Specs (field names fixed, as issue 18 gives them):

    {"op": "gemm", "gpu", "m", "n", "k", "dtype": "bf16|fp8|fp8_block"}
    {"op": "moe", "gpu", "tokens", "hidden", "inter", "experts", "topk", "moe_tp", "ep", "dtype": "bf16|fp8_block",
     "routing": "balanced|uniform|power_law:ALPHA"}      the routed experts with their align/sort and sum, no router
    {"op": "context_attention", "gpu", "batch", "seq_len", "prefix_len", "q_heads", "kv_heads", "head_dim",
     "kv_dtype"}
    {"op": "decode_attention", "gpu", "batch", "kv_len", "q_heads", "kv_heads", "head_dim", "kv_dtype"}
    {"op": "all_reduce", "gpu", "gpus", "bytes", "impl": "custom|nccl"}   custom: vLLM's, under CUDA graphs
    {"op": "all_to_all", "gpu", "gpus", "bytes"}

"gpu" is a LayerScope GPU name. Optional fields and their defaults: dtype bf16, moe_tp 1, ep 1, routing uniform,
prefix_len 0, kv_dtype bf16, impl custom. A bad spec is refused naming its line and field (exit 2, one line).
A measured moe price is the table row's: for power_law:ALPHA the experts aiconfigurator-core's generator gives that
many tokens (hardware/routing.py table_distinct_experts); a serving run moves it to the experts its router reads.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, replace
from typing import Any

from layerscope.hardware.collectives import all_reduce_us
from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import GPUS, gpu
from layerscope.hardware.kernel import AllReduceOp, AllToAllOp, GemmOp, Kernel, KernelCost
from layerscope.hardware.routing import parse_routing
from layerscope.runtime.plan import gemm_kernel
from layerscope.runtime.sharded import collective_kernel
from layerscope.runtime.vllm import decode_attention_kernel, prefill_attention_kernel
from layerscope.runtime.vllm_moe import MoePlacement, moe_kernels
from layerscope.runtime.vllm_ops import GEMM_NAMES, linear

HELP = "price one kernel (flags) or many (--from FILE, JSONL) from the measured tables or the analytic model"
MAX_SPECS = 100_000  # a JSONL file of more specs than this is refused (bounded work per call)
COLLECTIVE_GPUS = (2, 4, 8)  # the node sizes both the measured tables and the analytic NCCL curves cover
MAX_DIM = 1 << 31  # no size past 2^31 (tokens, M, bytes...): larger would not fit a kernel launch either


@dataclass(frozen=True)
class Field:
    kind: type  # int | str | float
    default: Any = None  # None: required
    choices: tuple[str, ...] = ()


INT = Field(int)
SPECS: dict[str, dict[str, Field]] = {
    "gemm": {"m": INT, "n": INT, "k": INT, "dtype": Field(str, "bf16", ("bf16", "fp8", "fp8_block"))},
    "moe": {"tokens": INT, "hidden": INT, "inter": INT, "experts": INT, "topk": INT, "moe_tp": Field(int, 1),
            "ep": Field(int, 1), "dtype": Field(str, "bf16", ("bf16", "fp8_block")), "routing": Field(str, "uniform")},
    "context_attention": {"batch": INT, "seq_len": INT, "prefix_len": Field(int, 0), "q_heads": INT, "kv_heads": INT,
                          "head_dim": INT, "kv_dtype": Field(str, "bf16", ("bf16", "fp8"))},
    "decode_attention": {"batch": INT, "kv_len": INT, "q_heads": INT, "kv_heads": INT, "head_dim": INT,
                         "kv_dtype": Field(str, "bf16", ("bf16", "fp8"))},
    "all_reduce": {"gpus": INT, "bytes": Field(float), "impl": Field(str, "custom", ("custom", "nccl"))},
    "all_to_all": {"gpus": INT, "bytes": Field(float)},
}
ALL_FIELDS = sorted({f for fields in SPECS.values() for f in fields})


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="source", metavar="FILE", help="a JSONL file of specs, one a line ('-': stdin)")
    p.add_argument("--op", choices=tuple(SPECS), help="the kernel to price from flags")
    p.add_argument("--gpu", help=f"one of {', '.join(GPUS)}")
    for name in ALL_FIELDS:
        p.add_argument(f"--{name.replace('_', '-')}", dest=f"f_{name}", metavar="V",
                       help=f"spec field '{name}' ({', '.join(op for op, fs in SPECS.items() if name in fs)})")


def run(args: argparse.Namespace) -> int:
    flags = {name: getattr(args, f"f_{name}") for name in ALL_FIELDS if getattr(args, f"f_{name}") is not None}
    if args.source is not None:
        if args.op or args.gpu or flags:
            raise ValueError("--from FILE takes the specs from the file: give no --op, --gpu or field flags")
        specs = list(_read_jsonl(args.source))
    else:
        if args.op is None:
            raise ValueError("give --op OP --gpu GPU and its fields, or --from FILE")
        specs = [("flags", {"op": args.op, "gpu": args.gpu, **flags})]
    checked = [(where, validate(spec, where)) for where, spec in specs]  # refuse a bad file before printing
    models: dict[str, CostModel] = {}
    for _, (op, g, fields) in checked:
        cm = models.setdefault(g, CostModel(gpu(g)))
        print(json.dumps(price(cm, op, fields)))
    return 0


def _read_jsonl(path: str) -> Any:
    f = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115 (closed below unless stdin)
    try:
        n = 0
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            n += 1
            if n > MAX_SPECS:
                raise ValueError(f"line {i}: more than {MAX_SPECS} specs")
            try:
                spec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"line {i}: not JSON ({e.msg})") from None
            if not isinstance(spec, dict):
                raise ValueError(f"line {i}: a spec is a JSON object")
            yield f"line {i}", spec
    finally:
        if f is not sys.stdin:
            f.close()


def validate(spec: dict[str, Any], where: str) -> tuple[str, str, dict[str, Any]]:
    """(op, gpu, fields with defaults filled); ValueError '<where>: field 'x': ...' otherwise."""
    op = spec.get("op")
    if op not in SPECS:
        raise ValueError(f"{where}: field 'op': expected one of {', '.join(SPECS)}, got {op!r}")
    g = spec.get("gpu")
    if g not in GPUS:
        raise ValueError(f"{where}: field 'gpu': expected one of {', '.join(GPUS)}, got {g!r}")
    fields = SPECS[op]
    for name in spec:
        if name not in fields and name not in ("op", "gpu"):
            raise ValueError(f"{where}: field {name!r}: not a field of {op} (its fields: {', '.join(fields)})")
    out: dict[str, Any] = {}
    for name, f in fields.items():
        if name not in spec or spec[name] is None:
            if f.default is None:
                raise ValueError(f"{where}: field {name!r}: missing (required for {op})")
            out[name] = f.default
            continue
        out[name] = _value(spec[name], f, f"{where}: field {name!r}")
    _check_shape(op, out, where)
    return op, g, out


def _value(v: Any, f: Field, where: str) -> Any:
    if f.kind is str:
        if not isinstance(v, str):
            raise ValueError(f"{where}: expected a string, got {v!r}")
        if f.choices and v not in f.choices:
            raise ValueError(f"{where}: expected one of {', '.join(f.choices)}, got {v!r}")
        return v
    if isinstance(v, str):  # from a flag
        try:
            v = float(v)
        except ValueError:
            raise ValueError(f"{where}: expected a number, got {v!r}") from None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"{where}: expected a number, got {v!r}")
    if f.kind is int and v != int(v):
        raise ValueError(f"{where}: expected an integer, got {v!r}")
    if not 0 <= v <= MAX_DIM:
        raise ValueError(f"{where}: expected a value in [0, {MAX_DIM}], got {v!r}")
    return int(v) if f.kind is int else float(v)


def _check_shape(op: str, s: dict[str, Any], where: str) -> None:
    def bad(name: str, why: str) -> ValueError:
        return ValueError(f"{where}: field {name!r}: {why}, got {s[name]!r}")

    for name, v in s.items():
        if isinstance(v, int | float) and v < 1 and name not in ("prefix_len",):
            raise bad(name, "must be >= 1")
    if op == "moe":
        try:
            parse_routing(s["routing"])
        except ValueError as e:
            raise ValueError(f"{where}: field 'routing': {e}") from None
        if s["experts"] % s["ep"]:
            raise bad("ep", f"must divide the {s['experts']} experts")
        if s["inter"] % s["moe_tp"]:
            raise bad("moe_tp", f"must divide inter {s['inter']}")
        if s["topk"] > s["experts"]:
            raise bad("topk", f"must be <= experts {s['experts']}")
    if op in ("context_attention", "decode_attention") and s["q_heads"] % s["kv_heads"]:
        raise bad("kv_heads", f"must divide q_heads {s['q_heads']}")
    if op in ("all_reduce", "all_to_all") and s["gpus"] not in COLLECTIVE_GPUS:
        raise bad("gpus", "expected 2, 4 or 8 (one NVLink node, as measured)")


def kernels_for(cm: CostModel, op: str, s: dict[str, Any]) -> list[Kernel]:
    """The kernels a spec names, as LayerScope's vLLM plan builds them (so the analytic fallback is the model's)."""
    arch = cm.gpu.arch
    if op == "gemm":
        if s["dtype"] == "fp8":  # per-tensor scales: the CUTLASS scaled_mm alone
            k = gemm_kernel(GEMM_NAMES["fp8"], "gemm", s["m"], s["n"], s["k"], "fp8")
            return [replace(k, op=GemmOp(s["m"], s["n"], s["k"], "fp8"))]
        return linear("fp8" if s["dtype"] == "fp8_block" else "bf16", "gemm", s["m"], s["n"], s["k"])
    if op == "moe":
        placement = MoePlacement(s["ep"], s["moe_tp"], s["routing"])
        w = "fp8" if s["dtype"] == "fp8_block" else "bf16"
        ks = moe_kernels(s["tokens"], s["hidden"], s["inter"] // s["moe_tp"], s["experts"], s["topk"], w, placement)
        return [k for k in ks if k.stage == "experts"]  # the table's rows time the experts without the router
    if op == "context_attention":
        seqs = [(s["seq_len"], s["prefix_len"])] * s["batch"]
        return [prefill_attention_kernel(arch, seqs, s["q_heads"], s["kv_heads"], s["head_dim"], s["kv_dtype"])]
    if op == "decode_attention":
        b, kv = s["batch"], s["kv_len"]
        return [decode_attention_kernel(arch, b, kv, b * kv, s["q_heads"], s["kv_heads"], s["head_dim"],
                                        s["kv_dtype"])]
    n, nbytes = s["gpus"], s["bytes"]
    spec: AllReduceOp | AllToAllOp
    if op == "all_reduce":
        graphs = s["impl"] == "custom"
        fallback = all_reduce_us(cm.gpu, n, nbytes, graphs)
        spec = AllReduceOp(n, nbytes, s["impl"])
        name = "all_reduce"
    else:  # an all-to-all moves (n-1)/n of the data per GPU, as an all-gather: priced like one (collectives.py)
        fallback = all_reduce_us(cm.gpu, n, nbytes / 2, False)
        spec = AllToAllOp(n, nbytes)
        name = "all_to_all"
    return [collective_kernel(name, name, fallback, nbytes, n, op=spec)]


def price(cm: CostModel, op: str, s: dict[str, Any]) -> dict[str, Any]:
    costs = [cm.cost(k) for k in kernels_for(cm, op, s)]
    sources = {c.source for c in costs}
    measured = [c for c in costs if c.source == "measured"]
    return {
        "us": sum(c.time_us for c in costs),
        "source": "measured" if sources == {"measured"} else "analytic",
        "table": measured[0].table.as_dict() if len(measured) == len(costs) and measured[0].table else None,
        "parts": _parts(costs),
    }


def _parts(costs: list[KernelCost]) -> dict[str, float]:
    """One kernel: its parts; several (an op timed together): each kernel's time by name (and stage order)."""
    if len(costs) == 1:
        return {k: float(v) for k, v in costs[0].parts.items()}
    out: dict[str, float] = {}
    for c in costs:
        key = c.kernel.name
        i = 2
        while key in out:
            key, i = f"{c.kernel.name} #{i}", i + 1
        out[key] = float(c.time_us)
    return out
