"""Run a scenario and check its guided tour's claims against what the run produced."""

from __future__ import annotations

import argparse
import json

from layerscope.commands.run import add_scenario_arguments, load_spec
from layerscope.runtime.engine import simulate
from layerscope.tour import format_results, tour_results

HELP = "run a scenario and check each guided-tour step's claim against the run (exit 1 if one fails)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_arguments(p)
    p.add_argument("--json", action="store_true", help="print the results as JSON")


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.scenario, args.set)
    rows = tour_results(simulate(spec))
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
    else:
        print(f"{spec.name}: {spec.title}")
        print(format_results(rows) if rows else "(this scenario has no tour)")
    return 0 if all(r["passed"] for r in rows) else 1
