"""`layerscope plan`: what each GPU of a deployment holds, with the lines vLLM logs at startup."""

from __future__ import annotations

import argparse
import json
from typing import get_args

from layerscope.deployment import DeploymentSpec, Placement, RouterName, place, rank_placements, shard
from layerscope.dp_flags import add_dp_arguments, dp_fields
from layerscope.hardware.gpus import GPUS, GiB, gpu
from layerscope.model.config import resolve
from layerscope.runtime.goodput import parse_goodput
from layerscope.scenario import ScenarioSpec, SchedulerSpec, format_validation_error, scheduler_limits
from layerscope.sizing import ATTAINMENT, Candidate, break_even, candidates, parse_splits, size

HELP = "memory placement per GPU of a deployment (weights, activations, CUDA graphs, KV cache), as vLLM accounts it"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="qwen3-235b-a22b", help="a preset name or a path to a Hugging Face config.json")
    p.add_argument("--gpu", default="h200", help=f"one of {', '.join(GPUS)}")
    p.add_argument("--tp", type=int, default=8, help="tensor parallel size (vLLM --tensor-parallel-size)")
    p.add_argument("--ep", type=int, default=1, help="expert parallel size; MoE tensor parallel is tp / ep")
    p.add_argument("--weight-dtype", choices=("bf16", "fp8"), default="bf16")
    p.add_argument("--kv-dtype", choices=("bf16", "fp8"), default="bf16", help="vLLM --kv-cache-dtype")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--max-model-len", type=int, default=None, help="default: the model's context length")
    p.add_argument("--max-num-batched-tokens", type=int, default=None,
                   help="the profile run's token count (default: vLLM's for `vllm serve` on the GPU: 8192, A100 2048)")
    p.add_argument("--max-num-seqs", type=int, default=None,
                   help="the sampler's profile run (default: vLLM's for `vllm serve` on the GPU: 1024, A100 256)")
    p.add_argument("--no-cuda-graphs", action="store_true", help="vLLM --enforce-eager: no graph pool")
    p.add_argument("--replicas", type=int, default=1, help="engines of this shape on the node, behind a router")
    p.add_argument("--router", choices=get_args(RouterName), default="round_robin",
                   help="how the router in front of the replicas picks one (runtime/router.py)")
    add_dp_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of the log lines")
    # issue 21: sizing for a request rate under SLOs
    p.add_argument("--request-rate", type=float, default=None, metavar="R",
                   help="size for R requests/s (Poisson): simulate each candidate of the grid, report goodput per GPU "
                   "and the fewest GPUs meeting --slo")
    p.add_argument("--slo", default="ttft:2000,tpot:100", metavar="KEY:MS,...",
                   help="SLOs in ms (ttft, tpot, e2el) for --request-rate (default ttft:2000,tpot:100)")
    p.add_argument("--tps", default="4,8", help="tensor parallel sizes of the grid (--request-rate)")
    p.add_argument("--dps", default="2", help="data-parallel attention sizes of the grid, each with every tp and ep = "
                   "dp x tp (--request-rate; '' for none)")
    p.add_argument("--splits", default="1P1D,1P2D,2P1D", help="xPyD splits of the grid (--request-rate)")
    p.add_argument("--max-gpus", type=int, default=8, help="largest deployment of the grid (--request-rate)")
    p.add_argument("--link", choices=("nvlink", "rdma"), default=None,
                   help="the splits' KV link (default: nvlink up to 8 GPUs, else rdma)")
    p.add_argument("--random-input-len", type=int, default=1024, help="prompt tokens (--request-rate)")
    p.add_argument("--random-output-len", type=int, default=128, help="output tokens (--request-rate)")
    p.add_argument("--num-prompts", type=int, default=200, help="requests simulated per candidate (--request-rate)")
    p.add_argument("--break-even", default=None, metavar="A;B",
                   help="with --request-rate's SLOs: two grid candidates, e.g. 'colocated tp8;1P1D tp4', compared "
                   "over --input-lens x --request-rates (goodput per GPU, the winner and its margin)")
    p.add_argument("--input-lens", default="1000,4000", help="prompt lengths of --break-even")
    p.add_argument("--request-rates", default="2,4,8", help="request rates of --break-even (req/s)")
    p.add_argument("--attainment", type=float, default=ATTAINMENT,
                   help=f"%% of requests that must meet every SLO (default {ATTAINMENT:g}, DistServe's)")


def deployment_of(args: argparse.Namespace) -> DeploymentSpec:
    from pydantic import ValidationError

    try:
        return DeploymentSpec(tp=args.tp, ep=args.ep, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                              gpu_memory_utilization=args.gpu_memory_utilization, max_model_len=args.max_model_len,
                              cuda_graphs=not args.no_cuda_graphs, replicas=args.replicas, router=args.router,
                              **dp_fields(args))
    except ValidationError as e:
        raise ValueError(format_validation_error(e, "deployment")) from None


def plan(args: argparse.Namespace) -> tuple[DeploymentSpec, Placement, dict]:
    if (args.max_num_batched_tokens is not None and args.max_num_batched_tokens < 1) or (
            args.max_num_seqs is not None and args.max_num_seqs < 1):
        raise ValueError("--max-num-batched-tokens and --max-num-seqs must be >= 1")
    model, dep = resolve(args.model), deployment_of(args)
    sched = SchedulerSpec.model_construct(max_num_batched_tokens=args.max_num_batched_tokens,
                                          max_num_seqs=args.max_num_seqs)  # checked above; vLLM's defaults for None
    lim = scheduler_limits(sched, gpu(args.gpu).name, dep.max_model_len or model.max_position_embeddings)
    p = place(model, gpu(args.gpu), dep, lim.max_num_batched_tokens, lim.max_num_seqs)
    local = shard(model, dep)
    out = {
        "model": model.name,
        "gpu": p.gpu,
        "num_gpus": p.num_gpus,
        "tp": dep.tp,
        "ep": dep.ep,
        "moe_tp": dep.moe_tp,
        "weight_dtype": dep.weight_dtype,
        "kv_dtype": dep.kv_dtype,
        "gpu_memory_utilization": dep.gpu_memory_utilization,
        "cuda_graphs": dep.cuda_graphs,
        "max_model_len": p.max_model_len,
        "max_num_batched_tokens": lim.max_num_batched_tokens,
        "max_num_seqs": lim.max_num_seqs,
        "shard": {"attention_heads": local.num_attention_heads, "kv_heads": local.num_key_value_heads,
                  "kv_replication": p.kv_replication, "experts": local.num_experts,
                  "moe_intermediate_size": local.moe_intermediate_size, "vocab": local.vocab_size},
        "per_gpu": p.per_gpu(),
    }
    if dep.replicas > 1:
        out.update(replicas_plan(dep, p))
    if dep.dp > 1:
        out.update(dp=dep.dp, nodes=dep.nodes, all2all_backend=dep.all2all_backend,
                   eplb=dep.eplb.model_dump() if dep.eplb is not None else None,
                   ranks=[{"rank": r.rank, "node": r.node, "gpus": list(r.gpus),
                           "experts": [list(e) for e in r.experts], "redundant_experts_per_gpu": r.redundant_experts,
                           "per_gpu": r.per_gpu} for r in rank_placements(model, p, dep)])
    return dep, p, out


def replicas_plan(dep: DeploymentSpec, p: Placement) -> dict:
    """The node with its replicas: each one's GPUs, and the KV tokens of all of them."""
    return {"replicas": dep.replicas, "router": dep.router, "gpus_on_node": dep.gpus_available,
            "replica_gpus": [dep.replica_gpus(i) for i in range(dep.replicas)],
            "kv_tokens_all_replicas": p.kv_tokens * dep.replicas}


def run(args: argparse.Namespace) -> int:
    if args.request_rate is not None:
        return _size(args)
    dep, p, out = plan(args)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    s, g = out["shard"], out["per_gpu"]
    dp = f"dp={dep.dp} x " if dep.dp > 1 else ""
    print(f"{out['model']} on {p.num_gpus} x {p.gpu}: {dp}tp={dep.tp} ep={dep.ep} (moe tp {dep.moe_tp}), "
          f"weights {dep.weight_dtype}, KV cache {dep.kv_dtype}")
    print(f"per GPU: {s['attention_heads']} attention heads, {s['kv_heads']} KV head(s)"
          f"{f' (each replicated on {p.kv_replication} GPUs)' if p.kv_replication > 1 else ''}, "
          f"{s['experts']} experts x {s['moe_intermediate_size']} wide, vocab slice {s['vocab']}")
    print(f"the current vLLM instance can use total_gpu_memory ({p.capacity_bytes / GiB:.2f}GiB) x "
          f"gpu_memory_utilization ({dep.gpu_memory_utilization:.2f}) = {p.budget_bytes / GiB:.2f}GiB")
    print(f"model weights take {g['weights_gib']:.2f}GiB; non_torch_memory takes {g['non_torch_gib']:.2f}GiB; "
          f"PyTorch activation peak memory takes {g['activation_gib']:.2f}GiB; CUDA graph memory "
          f"{g['cuda_graph_gib']:.2f}GiB; the rest of the memory reserved for KV Cache is {g['kv_cache_gib']:.2f}GiB.")
    for line in p.log_lines()[1:]:
        print(line)
    print(f"(KV cache: {p.kv_bytes_per_token:,.0f} bytes per token per GPU over {p.kv_blocks:,} blocks of 16; "
          "constants and their sources: runtime/deployment.py)")
    if dep.replicas > 1:
        groups = ", ".join(f"{i}: GPUs {g[0]}-{g[-1]}" if len(g) > 1 else f"{i}: GPU {g[0]}"
                           for i, g in enumerate(out["replica_gpus"]))
        print(f"{dep.replicas} replicas behind a {dep.router} router on {dep.replicas * p.num_gpus} of "
              f"{out['gpus_on_node']} GPUs ({groups}); {out['kv_tokens_all_replicas']:,} KV tokens in all")
    for r in out.get("ranks", []):
        g = r["per_gpu"]
        experts = ", ".join(f"{a}-{b}" for a, b in r["experts"])
        extra = f" + {r['redundant_experts_per_gpu']} redundant (EPLB)" if r["redundant_experts_per_gpu"] else ""
        print(f"DP rank {r['rank']} (node {r['node']}, GPU {', '.join(map(str, r['gpus']))}): attention tp "
              f"{dep.tp}, experts {experts}{extra}, weights {g['weights_gib']:.2f} GiB, KV cache "
              f"{g['kv_cache_gib']:.2f} GiB = {g['kv_tokens']:,} tokens of its own requests")
    return 0


def _size(args: argparse.Namespace) -> int:
    """--request-rate: the grid's candidates at that rate, the fewest GPUs meeting the SLOs."""
    if not args.request_rate > 0 or args.request_rate == float("inf"):
        raise ValueError(f"--request-rate {args.request_rate}: a finite rate > 0 requests/s")
    if not 0 < args.attainment <= 100 or not 1 <= args.max_gpus <= 64 or not 1 <= args.num_prompts <= 2000:
        raise ValueError("--attainment must be in (0, 100], --max-gpus 1..64, --num-prompts 1..2000")
    slos = parse_goodput([args.slo], "--slo")
    tps, dps = _ints(args.tps, "--tps"), _ints(args.dps, "--dps")
    link = args.link or ("nvlink" if args.max_gpus <= 8 else "rdma")
    dtypes = {"weight_dtype": args.weight_dtype, "kv_dtype": args.kv_dtype}  # every candidate's, not a template's:
    grid = [Candidate(c.label, {**dtypes, **c.deployment})  # a template tp could refuse fp8 where a candidate fits
            for c in candidates(tps, parse_splits(args.splits), args.max_gpus, link, tuple(dps))]
    base = ScenarioSpec.model_validate({
        "name": "plan", "model": args.model, "gpu": args.gpu, "runtime": "vllm",
        "workload": {"num_requests": args.num_prompts, "input_len": args.random_input_len,
                     "output_len": args.random_output_len}})
    if args.break_even is not None:
        return _break_even(args, base, slos, grid)
    out = size(base, args.request_rate, slos, grid, args.attainment)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{args.model} on {args.gpu} at {args.request_rate:g} req/s, SLO {args.slo} met by >= {args.attainment:g}% "
          "of requests (goodput: vllm bench serve's request_goodput)")
    print(f"{'candidate':<26} {'GPUs':>5} {'goodput req/s':>14} {'per GPU':>9} {'SLO met %':>10}  meets")
    for r in out["candidates"]:
        if "error" in r:
            print(f"{r['candidate']:<26} {r['num_gpus']:>5}  refused: {r['error']}")
            continue
        print(f"{r['candidate']:<26} {r['num_gpus']:>5} {r['request_goodput']:>14.3f} {r['goodput_per_gpu']:>9.4f} "
              f"{r['slo_attainment_pct']:>10.1f}  {'yes' if r['meets_slo'] else 'no'}")
    print(f"fewest GPUs meeting the SLOs: {out['best'] or 'none of the grid'}")
    return 0


def _ints(text: str, flag: str) -> list[int]:
    try:
        out = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"{flag} {text!r}: comma-separated integers") from None
    if any(n < 1 for n in out):
        raise ValueError(f"{flag} {text!r}: sizes >= 1")
    return out


def _break_even(args: argparse.Namespace, base: ScenarioSpec, slos: dict[str, float], grid: list[Candidate]) -> int:
    by_label = {c.label: c for c in grid}
    names = [n.strip() for n in args.break_even.split(";")]
    if len(names) != 2 or any(n not in by_label for n in names):
        raise ValueError(f"--break-even {args.break_even!r}: two of {', '.join(by_label)}, separated by ';'")
    try:
        lens = [int(x) for x in args.input_lens.split(",") if x.strip()]
        rates = [float(x) for x in args.request_rates.split(",") if x.strip()]
    except ValueError:
        raise ValueError("--input-lens and --request-rates: comma-separated numbers") from None
    out = break_even(base, slos, (by_label[names[0]], by_label[names[1]]), lens, rates)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"goodput per GPU (req/s/GPU) at SLO {args.slo}: {names[0]} vs {names[1]}")
    for c in out["cells"]:
        a, b = (c["goodput_per_gpu"][n] for n in names)
        margin = "-" if c["margin"] is None else f"+{c['margin']:.0%}"
        print(f"input {c['input_len']:>6}  rate {c['request_rate']:>6g}  {a:>8.4f}  {b:>8.4f}  {c['winner']} {margin}")
    return 0
