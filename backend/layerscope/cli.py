"""`layerscope` command line. Each subcommand lives in layerscope/commands/<name>.py and defines
`HELP`, `add_arguments(parser)` and `run(args) -> int`; they are discovered, not listed here."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import signal
import sys
from collections.abc import Sequence

from layerscope import __version__, commands

# A tool stopped by a reader that closed its pipe (`| head`) exits as SIGPIPE would kill it: 128 + 13, quietly.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


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
    try:
        code = _main(argv)
        sys.stdout.flush()  # output still buffered may meet the closed pipe only here
        return code
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except BrokenPipeError:  # main() handles a closed stdout pipe
        raise
    except (UsageError, ValueError, OSError) as e:  # OSError: a file that cannot be read or written (a full disk)
        sys.stderr.write(f"layerscope {args.command}: error: {_one_line(e)}".replace("\n", " ").rstrip() + "\n")
        return 2
    except KeyboardInterrupt:
        return 130


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    return str(e)


def _stdout_to_devnull() -> None:
    """Point fd 1 at /dev/null, so the interpreter's own flush at exit cannot raise a second BrokenPipeError
    (the recipe of the Python docs, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a real file (a test's capture): nothing left to flush
        pass


if __name__ == "__main__":
    raise SystemExit(main())
