"""`layerscope` command line. Each subcommand lives in layerscope/commands/<name>.py and defines
`HELP`, `add_arguments(parser)` and `run(args) -> int`; they are discovered, not listed here."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from layerscope import __version__, commands


class UsageError(ValueError):
    """Bad input from the command line: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too; we don't)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="layerscope", description="Simulate and visualise one Qwen3-235B-A22B decoder layer.")
    parser.add_argument("--version", action="version", version=f"layerscope {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"layerscope.commands.{info.name}")
        p = sub.add_parser(info.name.replace("_", "-"), help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except (UsageError, ValueError, FileNotFoundError) as e:
        sys.stderr.write(f"layerscope {args.command}: error: {e}\n".replace("\n", " ").rstrip() + "\n")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
