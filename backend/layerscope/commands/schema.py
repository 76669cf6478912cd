"""Export the JSON Schemas (scenario spec, events, websocket messages)."""

from __future__ import annotations

import argparse
import json

from layerscope.schemas import all_schemas

HELP = "print the JSON Schema of the scenario spec, the events or the websocket messages"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("which", choices=["scenario", "events", "messages", "all"], nargs="?", default="all")


def run(args: argparse.Namespace) -> int:
    schemas = all_schemas()
    print(json.dumps(schemas if args.which == "all" else schemas[args.which], indent=2, sort_keys=True))
    return 0
