"""One simulated decode step, kernel by kernel: one GPU, one layer, x layers, outside the layers, host time.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/breakdown.py [--json]

Cases (the validation's suspects, bench/README.md "Validation"): Qwen3-30B-A3B on 1 x A100 at batch 1, and
Qwen3-235B-A22B on 8 x H200 tp 8 at batch 1 and 64, every sequence decoding at `--context` tokens. Each row is
one kernel as the cost model prices it (compute, memory, launch parts and the bound), so a part can be set beside
a published per-kernel profile.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import gpu as gpu_preset
from layerscope.runtime.sharded import deployed
from layerscope.scenario import ScenarioSpec


@dataclass(frozen=True)
class Case:
    label: str
    model: str
    gpu: str
    deployment: dict[str, Any]
    batch: int


CASES = [
    # as the measured engine ran it (vLLM of mid-2025: no async scheduling; bench/bench_validation.py row T)
    Case("Qwen3-30B-A3B 1xA100 batch 1", "qwen3-30b-a3b", "a100-80g-sxm", {"tp": 1, "async_scheduling": False}, 1),
    Case("Qwen3-235B-A22B 8xH200 tp8 batch 1", "qwen3-235b-a22b", "h200", {"tp": 8}, 1),
    Case("Qwen3-235B-A22B 8xH200 tp8 batch 64", "qwen3-235b-a22b", "h200", {"tp": 8}, 64),
]


def breakdown(case: Case, context: int) -> dict[str, Any]:
    spec = ScenarioSpec(name="breakdown", model=case.model, gpu=case.gpu, deployment=case.deployment)
    plan, model = deployed(spec)
    cost = CostModel(gpu_preset(case.gpu))
    batch = [(1, context)] * case.batch
    rows = []
    for where, kernels in (("layer", plan.step_kernels(model, batch)),
                           ("outside", plan.outside_layer_kernels(model, batch))):
        for k in kernels:
            c = cost.cost(k)
            rows.append({"where": where, "stage": k.stage, "kernel": k.name[:44], "us": round(c.time_us, 2),
                         "compute_us": round(c.parts["compute_us"], 2), "memory_us": round(c.parts["memory_us"], 2),
                         "launch_us": round(c.parts["launch_us"], 2), "fixed_us": round(c.parts["fixed_us"], 2),
                         "bound": c.bound, "mb": round(k.bytes / 1e6, 3)})
    layer_us = sum(r["us"] for r in rows if r["where"] == "layer")
    outside = [r for r in rows if r["where"] == "outside"]
    host_us = sum(r["us"] for r in outside if r["stage"] == "host")
    outside_us = sum(r["us"] for r in outside) - host_us
    layers = model.num_hidden_layers
    return {"case": case.label, "context": context, "rows": rows, "layer_us": round(layer_us, 1),
            "layers": layers, "layers_ms": round(layer_us * layers / 1e3, 3),
            "outside_ms": round(outside_us / 1e3, 3), "host_ms": round(host_us / 1e3, 3),
            "step_ms": round((layer_us * layers + outside_us + host_us) / 1e3, 3)}


def print_table(b: dict[str, Any]) -> None:
    print(f"\n## {b['case']} (context {b['context']})\n")
    print("| where | stage | kernel | time us | compute | memory | launch | fixed | bound | MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in b["rows"]:
        print(f"| {r['where']} | {r['stage']} | {r['kernel']} | {r['us']:.2f} | {r['compute_us']:.2f} | "
              f"{r['memory_us']:.2f} | {r['launch_us']:.2f} | {r['fixed_us']:.2f} | {r['bound']} | {r['mb']:.3f} |")
    print(f"\none layer {b['layer_us']:.1f} us x {b['layers']} layers = {b['layers_ms']:.3f} ms; outside the layers "
          f"{b['outside_ms']:.3f} ms; host {b['host_ms']:.3f} ms; step {b['step_ms']:.3f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--context", type=int, default=1024, help="tokens already in each sequence's KV cache")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    out = [breakdown(c, args.context) for c in CASES]
    if args.json:
        print(json.dumps({"bench": "breakdown", "cases": out}))
        return
    for b in out:
        print_table(b)


if __name__ == "__main__":
    main()
