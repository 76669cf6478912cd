"""One real server (uvicorn in a thread, real engine) and one headless Debian Chromium per module."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from layerscope.commands.serve import build_app
from layerscope.server.settings import Settings

_spec = importlib.util.spec_from_file_location("browser_helpers", Path(__file__).with_name("helpers.py"))
assert _spec and _spec.loader
helpers = importlib.util.module_from_spec(_spec)
sys.modules["browser_helpers"] = helpers
_spec.loader.exec_module(helpers)
Page, free_port = helpers.Page, helpers.free_port

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    port = free_port()
    settings = Settings(port=port, play_seconds=6.0, default_scenario="prefill-8k-chunked")
    config = uvicorn.Config(build_app(settings), host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, server_url: str) -> Iterator[Page]:
    ctx = browser.new_context(viewport={"width": 1600, "height": 1200})
    p = Page(ctx.new_page())
    yield p
    ctx.close()
