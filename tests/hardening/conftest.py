"""Hardening tests: a real `layerscope serve` subprocess on a free loopback port, real websocket clients.

Everything here talks to 127.0.0.1 only; every loop is bounded in count and in time.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_spec = importlib.util.spec_from_file_location("hardening_util", Path(__file__).with_name("util.py"))
assert _spec and _spec.loader
util = importlib.util.module_from_spec(_spec)
sys.modules["hardening_util"] = util
_spec.loader.exec_module(util)


@pytest.fixture
def server() -> Iterator[util.ServerProcess]:
    """A fresh server subprocess (real engine, real presets); stopped after the test."""
    s = util.ServerProcess()
    s.start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def page() -> Iterator[Any]:
    """A headless Chromium page; `page.page_errors` collects uncaught page errors."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=util.CHROMIUM, args=util.CHROMIUM_ARGS)
        pg = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        pg.page_errors = []
        pg.on("pageerror", lambda e: pg.page_errors.append(str(e)))
        yield pg
        browser.close()
