"""Per-op validation against aiconfigurator-core's measured tables, per op family and GPU, on rows left out.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_kernels.py [--json]

For every table of the extract (hardware/data/aic), every other measured value along its swept dimension is left out
(hardware/tables/validation.py) and each left-out row is predicted three ways; |predicted / measured - 1|, median and
p90 per (GPU, op family):

- before: the analytic model as it was (CostModel(measured=False): the fitted roofline, no tables, no streaming
  fraction, no attention floor; several prompts without an attention shape; the MoE under ep on the mean GPU);
- analytic now: the analytic fallback after issue 18 (CostModel.analytic_cost: STREAM_EFF, the attention floor, the
  attention-shaped batch, the busiest GPU under ep);
- after: the measured tables' price, interpolated from the rows kept (what `layerscope kernel` and the simulator
  use wherever a table covers the shape).

Only rows both the kept grid and the analytic model cover are counted; eager block-fp8 GEMM rows bound by host launch
(which the price never uses) are left out; where they are host-bound the per-tensor fp8 rows stand in on Hopper, and
a second table says how well (tables.FP8_PROXY_SYSTEMS).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace

import numpy as np

from layerscope.commands.kernel import kernels_for
from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import gpu
from layerscope.hardware.kernel import Kernel
from layerscope.hardware.tables import SYSTEMS, manifest
from layerscope.hardware.tables.validation import fp8_proxy_ratios, held_out_rows
from layerscope.runtime.vllm_moe import MoePlacement, moe_kernels

GPU_OF = {system: name for name, system in SYSTEMS.items()}


def spec_of(op: str, key: tuple, x: tuple[float, ...]) -> dict:
    """A measured row as `layerscope kernel`'s spec."""
    if op == "gemm":
        m, n, k = (int(v) for v in x)
        return {"m": m, "n": n, "k": k, "dtype": key[0]}
    if op == "moe":
        dtype, dist, h, inter, e, k, moe_tp, ep = key
        routing = "balanced" if dist == "balanced" else "power_law:" + dist.removeprefix("power_law_")
        return {"tokens": int(x[0]), "hidden": h, "inter": inter, "experts": e, "topk": k, "moe_tp": moe_tp, "ep": ep,
                "dtype": dtype, "routing": routing}
    if op in ("context_attention", "decode_attention"):
        kv_dtype, q, kv, d = key
        length = {"seq_len": int(x[1]), "prefix_len": 0} if op == "context_attention" else {"kv_len": int(x[1])}
        return {"batch": int(x[0]), **length, "q_heads": q, "kv_heads": kv, "head_dim": d, "kv_dtype": kv_dtype}
    if op == "all_reduce":
        impl = {"custom_graph": "custom"}.get(key[0], key[0])
        return {"gpus": key[1], "bytes": x[0], "impl": impl}
    return {"gpus": key[0], "bytes": x[0]}


def before_kernels(cm: CostModel, op: str, s: dict) -> list[Kernel]:
    """The kernels as the plan built them before issue 18: several prompts without an attention shape, the MoE under
    ep as the mean GPU's share of the experts and top-k."""
    if op == "moe" and s["ep"] > 1:
        w = "fp8" if s["dtype"] == "fp8_block" else "bf16"
        ep = s["ep"]
        ks = moe_kernels(s["tokens"], s["hidden"], s["inter"] // s["moe_tp"], s["experts"] // ep, s["topk"] // ep, w,
                         MoePlacement())
        return [k for k in ks if k.stage == "experts"]
    ks = kernels_for(cm, op, s)
    if op == "context_attention" and s["batch"] > 1:
        ks = [replace(k, attn=None) for k in ks]
    return ks


def evaluate() -> list[dict]:
    out = []
    for info in sorted(manifest()["files"].values(), key=lambda i: (i["system"], i["op"])):
        system, op = info["system"], info["op"]
        g = gpu(GPU_OF[system])
        now, before = CostModel(g), CostModel(g, measured=False)
        errs: dict[str, dict[str, list[float]]] = {}
        for family, key, x, us, predicted in held_out_rows(system, op):
            if predicted is None:
                continue
            s = spec_of(op, key, x)
            if op in ("all_reduce", "all_to_all") and s["gpus"] not in (2, 4, 8):
                continue
            e = errs.setdefault(family, {"before": [], "analytic": [], "after": []})
            e["before"].append(abs(sum(before.cost(k).time_us for k in before_kernels(before, op, s)) / us - 1))
            e["analytic"].append(abs(sum(now.analytic_cost(k).time_us for k in kernels_for(now, op, s)) / us - 1))
            e["after"].append(abs(predicted / us - 1))
        for family, e in sorted(errs.items()):
            row = {"gpu": g.name, "family": family, "rows": len(e["after"])}
            for name, v in e.items():
                a = np.asarray(v)
                row[f"{name}_median"] = float(np.median(a))
                row[f"{name}_p90"] = float(np.quantile(a, 0.9))
            out.append(row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = evaluate()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print("| GPU | op family | held-out rows | before median / p90 | analytic now median / p90 | "
          "after (measured) median / p90 |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        cells = " | ".join(f"{r[f'{n}_median']:.1%} / {r[f'{n}_p90']:.1%}" for n in ("before", "analytic", "after"))
        print(f"| {r['gpu']} | {r['family']} | {r['rows']} | {cells} |")
    print("\nblock-fp8 GEMMs where their eager rows are host-bound: the per-tensor fp8 rows as a stand-in, against the")
    print("block-fp8 rows that are GPU-bound (tables.FP8_PROXY_SYSTEMS uses it on Hopper only):\n")
    print("| system | shapes | block / per-tensor median | abs(1 - ratio) median / p90 |")
    print("|---|---:|---:|---:|")
    for system in ("h100_sxm", "h200_sxm", "b200_sxm"):
        r = fp8_proxy_ratios(system)
        e = np.abs(r - 1)
        print(f"| {system} | {r.size} | {np.median(r):.2f} | {np.median(e):.1%} / {np.quantile(e, 0.9):.1%} |")
    worst = max(rows, key=lambda r: r["after_p90"])
    print(f"\nafter: median <= {max(r['after_median'] for r in rows):.1%} and p90 <= {worst['after_p90']:.1%} "
          f"in every family (worst p90: {worst['gpu']} {worst['family']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
