"""`layerscope topology SCENARIO`: the layer's topology signature per phase."""

from __future__ import annotations

import argparse
import json

from layerscope import scenario
from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import gpu
from layerscope.runtime.sharded import deployed

HELP = "per phase: the layer's kernels in order, precision, memory access pattern and bound"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="a preset name or a YAML path")
    p.add_argument("--json", action="store_true", help="print the Topology as JSON")


def run(args: argparse.Namespace) -> int:
    spec = scenario.load(args.scenario)
    plan, model = deployed(spec)  # with a deployment: one GPU's shard and its collectives
    cost = CostModel(gpu(spec.gpu))
    chunk = min(spec.chunk_size, spec.prompt_len)
    topo = plan.topology(model, cost, prefill_tokens=chunk, decode_context=spec.prompt_len)
    if args.json:
        print(json.dumps(topo.model_dump(), indent=2))
        return 0
    dep = spec.deployment
    where = f"{dep.tp} x {spec.gpu} (tp {dep.tp}, ep {dep.ep}; one GPU's shard)" if dep is not None else spec.gpu
    print(f"{spec.name}: {model.name} on {where}, runtime {plan.name}")
    for phase, pt, what in (
        ("prefill", topo.prefill, f"one {chunk}-token chunk"),
        ("decode", topo.decode, f"one step at context {spec.prompt_len}"),
    ):
        print(f"\n{phase} ({what})")
        print(f"  {'stage':16s} {'precision':12s} {'access':28s} {'bound':8s} kernels")
        for n in pt.nodes:
            kernels = " -> ".join(n.kernels)
            print(f"  {n.id:16s} {n.precision:12s} {n.access:28s} {n.bound or '':8s} {kernels}")
    return 0
