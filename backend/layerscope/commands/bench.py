"""`layerscope bench`: `vllm bench serve --dataset-name random` against the simulated deployment."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, get_args

from layerscope.bench import (
    COMPARED,
    FRONTEND_KEYS,
    compare,
    comparison_block,
    load_measured,
    parse_metrics,
    result_block,
)
from layerscope.deployment import RouterName
from layerscope.dp_flags import add_dp_arguments, dp_fields
from layerscope.hardware.gpus import GPUS
from layerscope.runtime.engine import simulate
from layerscope.runtime.goodput import SLO_METRICS, parse_goodput
from layerscope.scenario import ScenarioSpec, apply_overrides, load

HELP = "simulate `vllm bench serve` (random dataset) on a deployment; print its result block or JSON"
# Summary keys a `vllm bench serve --save-result` JSON carries (names as vLLM saves them).
RESULT_KEYS = (
    "completed", "failed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
    "output_throughput", "total_token_throughput", *(k for k in COMPARED if k.endswith("_ms")),
    "num_preemptions", "prefix_cache_hit_rate", *FRONTEND_KEYS, "request_goodput", "good_requests",
    "slo_attainment_pct", *(f"{m}_slo_attainment_pct" for m in SLO_METRICS),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default=None, help="start from a preset or YAML file (flags override it)")
    p.add_argument("--model", default=None, help="model preset (default qwen3-235b-a22b)")
    p.add_argument("--gpu", default=None, help=f"one of {', '.join(GPUS)} (default h200)")
    p.add_argument("--tp", type=int, default=None, help="tensor parallel size (default 8, or the scenario's)")
    p.add_argument("--ep", type=int, default=None, help="expert parallel size; MoE tensor parallel is tp / ep")
    p.add_argument("--weight-dtype", choices=("bf16", "fp8"), default=None)
    p.add_argument("--kv-dtype", choices=("bf16", "fp8"), default=None)
    p.add_argument("--replicas", type=int, default=None, help="engines of this shape on the node, behind a router")
    p.add_argument("--router", choices=get_args(RouterName), default=None,
                   help="how the router in front of the replicas picks one (default round_robin)")
    add_dp_arguments(p)
    p.add_argument("--engine", choices=("vllm", "sglang"), default=None,
                   help="the engine imitated: its tokenizer, HTTP and SSE latency in TTFT (default vllm)")
    p.add_argument("--random-input-len", type=int, default=None, help="prompt tokens (vLLM default 1024)")
    p.add_argument("--random-output-len", type=int, default=None, help="output tokens (vLLM default 128)")
    p.add_argument("--random-range-ratio", type=float, default=None, help="lengths uniform in [L(1-r), L(1+r)]")
    p.add_argument("--num-prompts", type=int, default=None, help="requests (vLLM default 1000)")
    p.add_argument("--max-concurrency", type=int, default=None, help="requests in flight at most")
    p.add_argument("--request-rate", type=float, default=None, help="requests/s, Poisson (default inf)")
    p.add_argument("--max-num-batched-tokens", type=int, default=None, help="engine step token budget")
    p.add_argument("--max-num-seqs", type=int, default=None, help="running requests at most")
    p.add_argument("--seed", type=int, default=None, help="lengths and arrivals (vLLM default 0)")
    p.add_argument("--workload-trace", default=None, metavar="FILE", help="CSV/JSONL trace of request sizes")
    p.add_argument("--routing", default=None, metavar="ROUTING",
                   help="expert routing: uniform, balanced, power_law:ALPHA or file:NAME.json (default power_law:0.7)")
    p.add_argument("--percentile-metrics", default="ttft,tpot,itl", help="sections printed (ttft,tpot,itl,e2el)")
    p.add_argument("--compare-to", default=None, metavar="FILE",
                   help="a `vllm bench serve --save-result` JSON or SGLang bench_serving JSONL: measured vs simulated")
    p.add_argument("--goodput", nargs="+", default=None, metavar="KEY:MS",
                   help="SLOs in ms (ttft, tpot, e2el), e.g. --goodput ttft:500 tpot:50: adds request_goodput "
                   "(vllm bench serve --goodput) and each SLO's attainment")
    p.add_argument("--json", action="store_true", help="print the result JSON (vLLM's saved keys) instead")


def bench_spec(args: argparse.Namespace) -> ScenarioSpec:
    """The scenario the flags describe: the --scenario's, or vLLM's defaults on 8 x H200."""
    base = load(args.scenario) if args.scenario else ScenarioSpec(name="bench", gpu="h200", runtime="vllm")
    over: dict[str, Any] = {}
    for flag, field in (("model", "model"), ("gpu", "gpu")):
        if getattr(args, flag) is not None:
            over[field] = getattr(args, flag)
    dep = base.deployment.model_dump() if base.deployment is not None else {"tp": 8}
    for flag in ("tp", "ep", "weight_dtype", "kv_dtype", "engine", "replicas", "router"):
        if getattr(args, flag) is not None:
            dep[flag] = getattr(args, flag)
    dep.update(dp_fields(args))
    over["deployment"] = dep
    work = base.workload.model_dump() if base.workload is not None else {"num_requests": 1000, "input_len": 1024,
                                                                          "output_len": 128}
    for flag, field in (("random_input_len", "input_len"), ("random_output_len", "output_len"),
                        ("random_range_ratio", "range_ratio"), ("num_prompts", "num_requests"),
                        ("max_concurrency", "max_concurrency"), ("request_rate", "request_rate"),
                        ("seed", "seed"), ("workload_trace", "trace"), ("routing", "routing")):
        if getattr(args, flag) is not None:
            work[field] = getattr(args, flag)
    over["workload"] = work
    sched = base.scheduler.model_dump()
    for flag in ("max_num_batched_tokens", "max_num_seqs"):
        if getattr(args, flag) is not None:
            sched[flag] = getattr(args, flag)
    over["scheduler"] = sched
    if args.goodput is not None:
        over["goodput"] = parse_goodput(args.goodput)
    over.update({"compare": None, "tour": [], "numerics": False})
    return apply_overrides(base, over, source="layerscope bench")


def result_json(spec: ScenarioSpec, summary: dict[str, Any]) -> dict[str, Any]:
    """The keys `vllm bench serve --save-result` writes, as far as a simulation has them."""
    w = spec.workload
    assert w is not None and spec.deployment is not None
    out: dict[str, Any] = {
        "backend": "layerscope (simulated)",
        "model_id": spec.model,
        "num_prompts": summary.get("num_requests", w.num_requests),  # a trace's own count, not the field's
        "request_rate": "inf" if w.request_rate == float("inf") else w.request_rate,
        "max_concurrency": w.max_concurrency,
        "gpu": spec.gpu,
        "tensor_parallel_size": spec.deployment.tp,
        "expert_parallel_size": spec.deployment.ep,
        "engine": spec.deployment.engine,
    }
    out.update({k: summary[k] for k in RESULT_KEYS if k in summary})
    if spec.deployment.replicas > 1:  # the router's replicas, each one's figures (runtime/summary.py)
        out.update({k: v for k, v in summary.items() if k.startswith(("replica", "router"))})
    if spec.goodput is not None:  # vLLM saves its --goodput SLOs beside request_goodput
        out["goodput"] = dict(spec.goodput)
    return out


def run(args: argparse.Namespace) -> int:
    metrics = parse_metrics(args.percentile_metrics)
    spec = bench_spec(args)
    measured = load_measured(Path(args.compare_to)) if args.compare_to else None
    result = result_json(spec, dict(simulate(spec, summary_only=True).summary))  # the block needs no events
    if args.json:
        if measured is not None:
            result["compare_to"] = {"file": args.compare_to, "rows": compare(measured, result)}
        print(json.dumps(result, indent=2))
        return 0
    print(result_block(result, ",".join(metrics)))
    if spec.deployment is not None and spec.deployment.replicas > 1:
        print(replicas_block(result, spec.deployment.replicas))
    if measured is not None:
        print(comparison_block(compare(measured, result), args.compare_to))
    return 0


def replicas_block(result: dict[str, Any], n: int) -> str:
    """One line per replica under the result block: what the router sent it and how it served them."""
    title = f" Replicas ({result['router']}) "
    lines = [f"{title:=^50}",
             f"{'replica':<8}{'GPUs':<10}{'completed':>10}{'mean TTFT ms':>14}{'prefix hit':>12}"]
    for i in range(n):
        lines.append(f"{i:<8}{result[f'replica{i}_gpus']:<10}{result[f'replica{i}_completed']:>10}"
                     f"{result[f'replica{i}_mean_ttft_ms']:>14.2f}{result[f'replica{i}_prefix_cache_hit_rate']:>12.2%}")
    return "\n".join(lines)
