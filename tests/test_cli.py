"""Every subcommand answers --help; bad input is one line and exit status 2."""

from __future__ import annotations

import gc
import os
import pkgutil
import subprocess
import sys

import pytest

from layerscope import commands
from layerscope.cli import main

SUBCOMMANDS = sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules(commands.__path__))


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_has_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    assert "usage: layerscope " + name in capsys.readouterr().out


def test_python_dash_m_works() -> None:
    out = subprocess.run([sys.executable, "-m", "layerscope", "--help"], capture_output=True, text=True, check=True)
    for name in SUBCOMMANDS:
        assert name in out.stdout


def test_unknown_subcommand_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["no-such-command"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no-such-command" in err


def test_unknown_scenario_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios", "no-such-scenario"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no-such-scenario" in err


def _piped(argv: list[str], read_lines: int | None) -> tuple[int, list[str], str]:
    """Run `layerscope ARGV | head -READ_LINES` for real: a 4 KiB pipe whose reader takes `read_lines` lines and
    closes it (None: the reader is gone before the command starts). Returns (exit status, lines read, stderr)."""
    import fcntl
    import os

    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)  # small, so the command is still writing when the reader leaves
    if read_lines is None:
        os.close(r)
    proc = subprocess.Popen([sys.executable, "-m", "layerscope", *argv], stdout=w, stderr=subprocess.PIPE, text=True)
    os.close(w)
    lines = []
    if read_lines is not None:
        with os.fdopen(r) as reader:
            lines = [reader.readline() for _ in range(read_lines)]
    _, err = proc.communicate(timeout=120)
    return proc.returncode, lines, err


@pytest.mark.parametrize(
    ("argv", "read_lines", "first"),
    [
        (["scenarios"], None, None),
        (["schema"], 1, "{"),
        (["run", "decode-pulses", "--quiet", "--events", "-"], 3, '{"t_us":0.0,"kind":"run","scenario":"decode'),
    ],
)
def test_output_cut_short_by_a_closed_pipe_ends_quietly(argv: list[str], read_lines: int | None, first: str) -> None:
    code, lines, err = _piped(argv, read_lines)
    assert err == ""  # no traceback, no "Exception ignored" at exit
    assert code == 141  # as a tool killed by SIGPIPE (128 + 13), what `set -o pipefail` scripts expect
    if first is not None:
        assert len(lines) == read_lines and lines[0].startswith(first)


def test_events_to_stdout_match_the_file(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "e.jsonl"
    assert main(["run", "decode-pulses", "--quiet", "--events", str(out)]) == 0
    capsys.readouterr()
    assert main(["run", "decode-pulses", "--events", "-"]) == 0
    stdout, stderr = capsys.readouterr()
    assert stdout == out.read_text()
    assert "decode-pulses: article on h100-sxm" in stderr  # the summary table moves to stderr
    assert main(["run", "decode-pulses", "--events", "-", "--trace", "-"]) == 2
    assert "only one of" in capsys.readouterr().err


def test_the_entry_point_exits_with_mains_status_and_leaves_what_it_kept_to_no_collection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from layerscope import cli

    kept: list[list[int]] = []
    monkeypatch.setattr(cli, "main", lambda: kept.append([1]) or 3)  # a command that keeps a tracked object
    try:
        with pytest.raises(SystemExit) as exit_info:
            cli.entry()
        assert exit_info.value.code == 3
        assert gc.get_freeze_count() > 0 and not any(o is kept[0] for o in gc.get_objects())  # frozen: not tracked
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("given", [None, "", "logfire"])
def test_the_entry_point_looks_for_no_pydantic_plugins_unless_told(monkeypatch: pytest.MonkeyPatch,
                                                                     given: str | None) -> None:
    from pydantic.plugin import _loader

    from layerscope import cli

    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", given or "")  # restored (or removed) after the test
    if given is None:
        monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS")
    seen: list[str | None] = []
    monkeypatch.setattr(cli, "main", lambda: seen.append(os.environ.get("PYDANTIC_DISABLE_PLUGINS")) or 0)
    monkeypatch.setattr(_loader, "_plugins", None)  # pydantic's cache: make it look again
    try:
        with pytest.raises(SystemExit):
            cli.entry()
    finally:
        gc.unfreeze()
    assert seen == ["__all__" if given is None else given]  # a caller's own setting is kept
    if given is None:  # and pydantic then reads no entry points
        monkeypatch.setattr(_loader, "entry_points", lambda **_: pytest.fail("entry points read"))
        assert list(_loader.get_plugins()) == []


def test_python_dash_m_exits_with_the_commands_status() -> None:
    bad = subprocess.run([sys.executable, "-m", "layerscope", "scenarios", "no-such-scenario"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "no-such-scenario" in bad.stderr
