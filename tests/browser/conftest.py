"""One real server (uvicorn in a thread, real engine) and one headless Debian Chromium per module."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from layerscope.server.app import create_app
from layerscope.server.settings import Settings

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    port = free_port()
    settings = Settings(port=port, play_seconds=4.0, default_scenario="prefill-8k-chunked")
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning", lifespan="off")
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


@pytest.fixture
def page(browser: Any, server_url: str) -> Iterator[Page]:
    ctx = browser.new_context(viewport={"width": 1600, "height": 1200})
    p = Page(ctx.new_page())
    yield p
    ctx.close()
