"""`layerscope cost`: one layer's kernels for N new tokens, priced from the measured kernel tables where they cover a
kernel and by the calibrated analytic model elsewhere (each kernel's `source` and `table` in --json)."""

from __future__ import annotations

import argparse
import json

from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import GPUS, gpu
from layerscope.model.config import resolve
from layerscope.runtime.plan import stage_costs
from layerscope.runtime.runtimes import get_runtime
from layerscope.runtime.vllm import VllmRuntime

HELP = "one layer's kernels, FLOPs, bytes and time on a GPU (prefill chunk or decode step)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="qwen3-235b-a22b", help="a preset name or a path to a Hugging Face config.json")
    p.add_argument("--gpu", default="h100-sxm", help=f"one of {', '.join(GPUS)}")
    p.add_argument("--tokens", type=int, default=None, help="new tokens (prefill: chunk size, default 4096)")
    p.add_argument("--context", type=int, default=None, help="tokens already cached (decode default 8192)")
    p.add_argument("--batch", type=int, default=None, help="decode: sequences, one new token each (default 1)")
    p.add_argument("--phase", choices=("prefill", "decode"), default="prefill")
    p.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16", help="GEMM weight precision")
    p.add_argument("--runtime", choices=("vllm", "article"), default="vllm")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def layer_cost(args: argparse.Namespace) -> dict:
    model = resolve(args.model)
    cost = CostModel(gpu(args.gpu))
    plan = get_runtime(args.runtime)
    if isinstance(plan, VllmRuntime):
        plan.arch = cost.gpu.arch  # the attention kernels vLLM runs on this GPU
    if args.phase == "prefill":
        tokens, context, batch = args.tokens or 4096, args.context or 0, 1
        if tokens < 1 or context < 0:
            raise ValueError(f"--tokens must be >= 1 and --context >= 0 (got {tokens}, {context})")
        kernels = plan.prefill_chunk(model, tokens, context, args.dtype)
    else:
        if args.batch and args.tokens and args.batch != args.tokens:
            raise ValueError("decode adds one token per sequence: --tokens must equal --batch (or omit one)")
        batch = args.batch or args.tokens or 1
        tokens, context = batch, 8192 if args.context is None else args.context
        if batch < 1 or context < 0:
            raise ValueError(f"--batch must be >= 1 and --context >= 0 (got {batch}, {context})")
        kernels = plan.decode_step(model, context, batch, args.dtype)
    stages = [
        {
            "name": s.name,
            "kind": s.kind,
            "time_us": s.time_us,
            "flops": s.flops,
            "bytes": s.bytes,
            "bound": s.bound,
            "kernels": s.kernels,
        }
        for s in stage_costs(kernels, cost)
    ]
    priced = [cost.cost(k) for k in kernels]
    return {
        "model": model.name,
        "gpu": cost.gpu.name,
        "runtime": plan.name,
        "phase": args.phase,
        "dtype": args.dtype,
        "tokens": tokens,
        "context": context,
        "batch": batch,
        "stages": stages,
        "kernels": [
            {"name": c.kernel.name, "stage": c.kernel.stage, "us": c.time_us, "source": c.source,
             "table": c.table.as_dict() if c.table is not None else None}
            for c in priced
        ],
        "total_us": sum(s["time_us"] for s in stages),
    }


def run(args: argparse.Namespace) -> int:
    out = layer_cost(args)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"{out['model']} on {out['gpu']} ({out['runtime']}), {out['phase']}: {out['tokens']} new token(s), "
        f"context {out['context']}, batch {out['batch']}, {out['dtype']} weights"
    )
    print(f"{'stage':16s} {'kind':11s} {'time_us':>10s} {'GFLOP':>10s} {'MB':>10s}  bound    kernels")
    for s in out["stages"]:
        print(
            f"{s['name']:16s} {s['kind']:11s} {s['time_us']:10.1f} {s['flops'] / 1e9:10.2f} {s['bytes'] / 1e6:10.2f}"
            f"  {s['bound']:8s} {_names(s['kernels'])}"
        )
    print(f"{'total':16s} {'':11s} {out['total_us']:10.1f}")
    measured = sum(k["us"] for k in out["kernels"] if k["source"] == "measured")
    print(f"measured tables price {measured / out['total_us']:.0%} of the time; the analytic model the rest")
    return 0


def _names(kernels: list[str], width: int = 48) -> str:
    """Distinct kernel names, each cut to `width` characters (cuBLAS names run to 100+)."""
    return ", ".join(n if len(n) <= width else n[: width - 3] + "..." for n in dict.fromkeys(kernels))
