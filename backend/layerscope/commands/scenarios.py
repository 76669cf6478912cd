"""List the preset scenarios, or print one as validated JSON."""

from __future__ import annotations

import argparse
import json

from layerscope import scenario

HELP = "list preset scenarios, or show one validated spec as JSON"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="a preset name or a YAML path; omit to list the presets")


def run(args: argparse.Namespace) -> int:
    if args.name:
        print(json.dumps(scenario.load(args.name).model_dump(), indent=2))
        return 0
    for name in scenario.preset_names():
        spec = scenario.load_preset(name)
        print(f"{name:32s} {spec.title}")
    return 0
