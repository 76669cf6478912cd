"""One simulation per preset for the whole session: the report and trace tests build several exports of each."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import pytest


@cache
def _simulated(name: str) -> Any:
    from layerscope.runtime.engine import simulate
    from layerscope.scenario import load_preset

    return simulate(load_preset(name))


@pytest.fixture(scope="session")
def preset_run() -> Callable[[str], Any]:
    """preset name -> its SimResult (with its compare run), simulated once per session."""
    return _simulated
