"""Helpers shared by the browser tests (loaded by conftest.py as module `browser_helpers`)."""

from __future__ import annotations

import importlib.util
import socket
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any


def sibling(stem: str) -> ModuleType:
    """This directory's module `stem` (test_tours.py's open_preset and walk, servingfake.py), loaded once and
    registered under its stem: the browser tests are not a package."""
    if stem not in sys.modules:
        spec = importlib.util.spec_from_file_location(stem, Path(__file__).with_name(f"{stem}.py"))
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[stem] = module
        spec.loader.exec_module(module)
    return sys.modules[stem]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Page:
    """A page plus every console error and page error it produced."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.problems: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.problems.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))

    def js(self, expr: str) -> Any:
        # page.evaluate runs over the devtools protocol, so the page's CSP (no eval) does not block it;
        # wait_for_function would need eval inside the page.
        return self.page.evaluate(f"() => ({expr})")

    def wait(self, expr: str, timeout_s: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.js(expr)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {expr}")
