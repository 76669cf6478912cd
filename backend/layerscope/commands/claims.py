"""Run a scenario and print the article's claims beside the simulated figures (the dashboard's claims panel)."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from layerscope.claims import build_claims
from layerscope.commands.run import add_scenario_arguments, load_spec
from layerscope.runtime.engine import simulate

HELP = "run a scenario and print the article's claims: stated, simulated in the claim's setting, this run, verdict"
JSON_KEYS = ("id", "claim", "stated", "simulated", "run", "unit", "verdict", "factor", "setting", "explanation")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_arguments(p)
    p.add_argument("--json", action="store_true", help="print the table as a JSON list of rows")


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.scenario, args.set)
    rows = build_claims(simulate(spec))
    if args.json:
        print(json.dumps([{k: _finite(r.get(k)) for k in JSON_KEYS} for r in rows], indent=2))
    else:
        print(f"{spec.name}: {spec.title}")
        print(format_table(rows))
    return 0


def _finite(v: Any) -> Any:
    """JSON has no infinity: an unbounded factor is reported as null."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _num(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    text = f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return f"{text} {unit}"


def format_table(rows: list[dict[str, Any]]) -> str:
    """claim | stated | simulated (in the claim's setting) | this run | verdict, then the settings used."""
    head = f"{'claim':46s} {'stated':>15s} {'simulated':>15s} {'this run':>15s}  verdict"
    lines = [head, "-" * len(head)]
    settings: list[str] = []
    for r in rows:
        verdict = r["verdict"] + (f" ({r['factor']:.3g}x)" if r.get("factor") else "")
        if r["setting"] not in settings:
            settings.append(r["setting"])
        mark = f"[{settings.index(r['setting']) + 1}]"
        figures = " ".join(f"{_num(r[k], r['unit']):>15s}" for k in ("stated", "simulated", "run"))
        lines.append(f"{r['claim'][:46]:46s} {figures}  {verdict} {mark}")
    lines.append("")
    lines.extend(f"[{i}] {s}" for i, s in enumerate(settings, 1))
    return "\n".join(lines)
