"""`layerscope sweep`: a scenario over a grid of fields (--grid), or the prefill chunk size (--chunk-sizes)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from layerscope.atomic import write_text_atomic
from layerscope.commands.run import add_scenario_arguments, load_spec
from layerscope.runtime.engine import simulate
from layerscope.runtime.goodput import parse_goodput
from layerscope.scenario import ScenarioSpec
from layerscope.sweep import parse_grid, run_grid

HELP = "sweep a scenario over a grid of fields (Pareto front of throughput per GPU vs TPOT), or over chunk sizes"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_arguments(p)
    p.add_argument("--grid", action="append", default=[], metavar="FIELD=V1,V2",
                   help="a field (dotted for nested ones, e.g. deployment.tp=4,8) and its values (repeatable); "
                   "default: the scenario's sweep grid")
    p.add_argument("--chunk-sizes", default=None, help="comma-separated prefill chunk sizes (the prefill-only sweep)")
    p.add_argument("--jobs", type=int, default=1, help="local processes running grid points")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="run grid points on a Ray cluster ('local' starts one here); pip install 'layerscope[ray]'")
    p.add_argument("--html", default=None, metavar="FILE", help="write the Pareto plot as a Plotly HTML page")
    p.add_argument("--goodput", nargs="+", default=None, metavar="KEY:MS",
                   help="SLOs in ms (ttft, tpot, e2el): each point gains request_goodput and goodput per GPU")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--chunk-sizes {text!r}: expected comma-separated integers") from None
    if not sizes:
        raise ValueError("--chunk-sizes: give at least one size")
    return sizes


def sweep(spec: ScenarioSpec, sizes: list[int]) -> list[dict[str, float | int | str]]:
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
    if args.goodput is not None:
        spec = spec.with_overrides({"goodput": parse_goodput(args.goodput)})
    if not args.grid and not args.chunk_sizes and spec.sweep is not None:  # the scenario's own grid
        args.grid = [f"{k}={','.join(str(v) for v in values)}" for k, values in spec.sweep.grid.items()]
    if args.grid:
        if args.chunk_sizes:
            raise ValueError("give --grid or --chunk-sizes, not both (chunk_size=... can be a --grid field)")
        return _grid(args, spec)
    return _chunks(args, spec)


def _grid(args: argparse.Namespace, spec: ScenarioSpec) -> int:
    result = run_grid(spec, parse_grid(args.grid), jobs=args.jobs, ray_address=args.ray)
    if args.html:
        write_html(result, Path(args.html))
    if args.json:
        print(json.dumps(result))
        return 0
    keys = list(result["grid"])
    print(f"{spec.name}: {len(result['points'])} points; * = Pareto front of output throughput per GPU vs median TPOT")
    head = "".join(f"{k:>28s}" for k in keys)
    print(f"{head} {'tok/s/GPU':>11s} {'TPOT p50 ms':>12s} {'TTFT p50 ms':>12s}")
    for p in result["points"]:
        cells = "".join(f"{_text(p['set'][k]):>28s}" for k in keys)
        if "error" in p:
            print(f"{cells}  refused: {p['error']}")
            continue
        ttft = p["summary"].get("median_ttft_ms")
        print(f"{cells} {_num(p['output_throughput_per_gpu']):>11s} {_num(p['median_tpot_ms']):>12s} "
              f"{_num(ttft):>12s}{' *' if p['pareto'] else ''}")
    return 0


def _text(v: Any) -> str:
    return json.dumps(v) if not isinstance(v, str) else v


def _num(v: Any) -> str:
    return "-" if v is None else f"{float(v):,.2f}"


def write_html(result: dict[str, Any], path: Path) -> None:
    """Throughput per GPU against median TPOT, the Pareto front joined by a line (plotly, self-contained)."""
    import plotly.graph_objects as go

    pts = [p for p in result["points"] if p["output_throughput_per_gpu"] is not None and p["median_tpot_ms"]]
    label = [", ".join(f"{k}={_text(v)}" for k, v in p["set"].items()) for p in pts]
    front = sorted((p for p in pts if p["pareto"]), key=lambda p: p["median_tpot_ms"])
    fig = go.Figure()
    fig.add_scatter(x=[p["median_tpot_ms"] for p in pts], y=[p["output_throughput_per_gpu"] for p in pts],
                    mode="markers", text=label, name="grid points", hovertemplate="%{text}<br>TPOT %{x:.2f} ms"
                    "<br>%{y:.1f} tok/s per GPU<extra></extra>",
                    marker={"size": 10, "symbol": ["star" if p["pareto"] else "circle" for p in pts]})
    fig.add_scatter(x=[p["median_tpot_ms"] for p in front], y=[p["output_throughput_per_gpu"] for p in front],
                    mode="lines", name="Pareto front", line={"dash": "dot"})
    fig.update_layout(title=f"{result['scenario']}: output throughput per GPU vs median TPOT (simulated at full "
                      "size)", xaxis_title="median TPOT (ms, whole model)", yaxis_title="output tokens/s per GPU",
                      template="plotly_white")
    write_text_atomic(path, fig.to_html(include_plotlyjs=True, full_html=True))


def _chunks(args: argparse.Namespace, spec: ScenarioSpec) -> int:
    rows = sweep(spec, parse_sizes(args.chunk_sizes or "1024,2048,4096,8192"))
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
