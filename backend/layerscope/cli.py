"""`layerscope` command line. Each subcommand lives in layerscope/commands/<name>.py and defines
`HELP`, `add_arguments(parser)` and `run(args) -> int`; they are discovered, not listed here.

Only the command given is imported (its module brings the simulator's imports, most of a process's start-up):
the listing reads each command's HELP from its source, and a command's arguments are added when argparse
reaches its name (_LazyCommands), so `layerscope --help` imports none."""

from __future__ import annotations

import argparse
import ast
import gc
import importlib
import os
import pkgutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from layerscope import __version__, commands
from layerscope.gcpause import paused_gc

# A tool stopped by a reader that closed its pipe (`| head`) exits as SIGPIPE would kill it: 128 + 13, quietly.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


class UsageError(ValueError):
    """Bad input from the command line: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage too; we don't)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="layerscope", description="Simulate and visualise one Qwen3-235B-A22B decoder layer.")
    parser.add_argument("--version", action="version", version=f"layerscope {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND",
                                action=_LazyCommands)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        text = command_help(info.name)
        p = sub.add_parser(info.name.replace("_", "-"), help=text, description=text)
        p.set_defaults(_module=info.name)
    return parser


def command_help(name: str) -> str:
    """A command module's HELP, read from its source (a string literal) without importing it."""
    path = Path(commands.__path__[0]) / f"{name}.py"
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "HELP" for t in node.targets)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    return str(importlib.import_module(f"layerscope.commands.{name}").HELP)  # not a literal: import it


class _LazyCommands(argparse._SubParsersAction):
    """Subcommands whose arguments are added when argparse reaches the command's name on the command line."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        sub = self._name_parser_map.get(values[0])
        if sub is not None and sub.get_default("_run") is None:
            # the simulator's imports (numpy, pydantic's models) allocate ~100k long-lived objects and no garbage:
            # the collector's ~100 passes over them meanwhile cost 45-75 ms (gc.callbacks), so it waits
            with paused_gc():
                module = importlib.import_module(f"layerscope.commands.{sub.get_default('_module')}")
            module.add_arguments(sub)
            sub.set_defaults(_run=module.run)
        super().__call__(parser, namespace, values, option_string)


def entry() -> NoReturn:
    """The process's entry point (the `layerscope` script, `python -m layerscope`): main(), then exit. Everything
    the command left alive is frozen first (gc.freeze), so that the interpreter's collections at exit skip it: after
    a 500-request `bench` that is ~200k tracked objects, and exiting took 0.48-0.52 s of the process's ~2.3 s,
    0.06-0.08 s frozen (bench/README.md, issue 23). Reference counting still frees it all."""
    _no_pydantic_plugins()
    code = main()
    gc.freeze()
    raise SystemExit(code)


def _no_pydantic_plugins() -> None:
    """The process's pydantic looks for no plugins unless the caller's environment says otherwise.

    pydantic's first model reads the `pydantic` entry points of every installed distribution
    (importlib.metadata.entry_points: ~50-60 ms of a `bench` process here, with ~75 distributions installed) to
    find plugins that observe validation; LayerScope's own spec and event models need none. An explicit
    PYDANTIC_DISABLE_PLUGINS is kept ("" loads them all again, as pydantic documents). Only the process's entry
    point does this: main(argv), called in process, leaves the caller's environment alone."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


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
