"""`layerscope calibrate`: fit the cost model's constants to the measured kernels and report the errors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from layerscope.calibration.gemm import calibrate, calibration_dir, constants_literal, load_samples

HELP = "fit the cost model's constants on measured kernel timings; report fitted and held-out errors"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", type=Path, default=None, help=f"folder of calibration CSVs (default {calibration_dir()})")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def _pct(d: dict) -> str:
    return f"median {100 * d['median']:5.1f}%  p90 {100 * d['p90']:5.1f}%  (n={d['n']})"


def run(args: argparse.Namespace) -> int:
    report = calibrate(load_samples(args.dir))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    print(f"fitted:  {constants_literal(report.constants)}")
    print(f"stored:  {constants_literal(report.stored)}   (hardware/cost.py FITTED)")
    print(f"\n{'in sample, fitted constants':44s} {_pct(report.in_sample)}")
    print(f"{'in sample, stored constants':44s} {_pct(report.stored_in_sample)}")
    print(f"{'plain roofline (baseline)':44s} {_pct(report.plain)}")
    for name, err in report.held_out.items():
        print(f"{'held out: ' + name:44s} {_pct(err)}")
    print(f"\n{'op':26s} {'median':>8s} {'p90':>8s} {'plain':>8s}")
    for op, e in report.per_op.items():
        print(f"{op:26s} {100 * e['median']:7.1f}% {100 * e['p90']:7.1f}% {100 * e['plain_median']:7.1f}%")
    return 0
