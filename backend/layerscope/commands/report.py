"""Write the offline HTML report of a scenario: figures, claims table and guided tour in one file."""

from __future__ import annotations

import argparse
from pathlib import Path

from layerscope.atomic import write_text_atomic
from layerscope.commands.run import add_scenario_arguments, load_spec
from layerscope.export.report import build_report
from layerscope.runtime.engine import simulate

HELP = "run a scenario and write one self-contained HTML report (figures, claims, tour)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_arguments(p)
    p.add_argument("-o", "--output", type=Path, default=None, help="output file (default: SCENARIO.html)")


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.scenario, args.set)
    out: Path = args.output or Path(f"{spec.name}.html")
    if out.parent and not out.parent.is_dir():
        raise ValueError(f"-o {out}: folder {out.parent} does not exist")
    write_text_atomic(out, build_report(simulate(spec)))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0
