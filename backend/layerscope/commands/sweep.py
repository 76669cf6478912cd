"""Sweep the prefill chunk size and print prefill throughput per size (timing only, decode skipped)."""

from __future__ import annotations

import argparse
import json

from layerscope.commands.run import load_spec
from layerscope.scenario import ScenarioSpec

HELP = "prefill throughput (tokens/s) of a scenario for several chunk sizes"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="a preset name or a path to a YAML file")
    p.add_argument("--chunk-sizes", default="1024,2048,4096,8192", help="comma-separated chunk sizes in tokens")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a field (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--chunk-sizes {text!r}: expected comma-separated integers") from None
    if not sizes:
        raise ValueError("--chunk-sizes: give at least one size")
    return sizes


def sweep(spec: ScenarioSpec, sizes: list[int]) -> list[dict[str, float | int]]:
    from layerscope.runtime.engine import simulate

    rows = []
    for size in sizes:
        # Both sizes pinned: the sweep measures this chunk size even when free HBM is low.
        one = spec.with_overrides({"chunk_size": size, "low_mem_chunk_size": size, "decode_steps": 0,
                                   "numerics": False, "compare": None, "faults": [], "actions": []})
        s = simulate(one).summary
        rows.append({"chunk_size": size, "num_chunks": s["num_chunks"], "prefill_model_ms": s["prefill_model_ms"],
                     "tokens_per_s": s["prefill_tokens_per_s"]})
    return rows


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.scenario, args.set)
    rows = sweep(spec, parse_sizes(args.chunk_sizes))
    best = max(rows, key=lambda r: r["tokens_per_s"])
    if args.json:
        print(json.dumps({"scenario": spec.name, "prompt_len": spec.prompt_len,
                          "memory_path_contention": spec.memory_path_contention, "rows": rows,
                          "best_chunk_size": best["chunk_size"]}))
        return 0
    print(f"{spec.name}: {spec.prompt_len}-token prefill, {spec.model} on {spec.gpu} ({spec.runtime}), "
          f"memory_path_contention {spec.memory_path_contention}")
    print(f"  {'chunk':>7s} {'chunks':>7s} {'prefill ms':>12s} {'tokens/s':>12s}")
    for r in rows:
        mark = "  <- best" if r is best else ""
        print(f"  {r['chunk_size']:>7d} {r['num_chunks']:>7d} {r['prefill_model_ms']:>12,.1f} "
              f"{r['tokens_per_s']:>12,.0f}{mark}")
    return 0
