"""Every subcommand answers --help; bad input is one line and exit status 2."""

from __future__ import annotations

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
