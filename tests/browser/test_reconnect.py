"""The page survives a server restart: it reconnects with backoff and resumes the run it was showing."""

from __future__ import annotations

import threading
import time

import pytest
import uvicorn
from browser_helpers import Page, free_port

from layerscope.commands.serve import build_app
from layerscope.server.settings import Settings

pytestmark = pytest.mark.browser
STORE = "window.__layerscope.store"


class ThreadServer:
    def __init__(self, port: int) -> None:
        config = uvicorn.Config(
            build_app(Settings(port=port, play_seconds=30.0)),
            host="127.0.0.1",
            port=port,
            log_level="error",
            lifespan="off",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        for _ in range(200):
            if self.server.started:
                return
            time.sleep(0.05)
        raise AssertionError("uvicorn did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def test_reconnects_and_resumes_after_restart(browser) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    server = ThreadServer(port)
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = Page(ctx.new_page())
    try:
        page.page.goto(f"http://127.0.0.1:{port}/?scenario=decode-pulses&decode_steps=40")
        page.wait(f"window.__layerscope && {STORE}.scenario && {STORE}.scenario.decode_steps === 40")
        page.page.get_by_test_id("step").click()
        page.page.get_by_test_id("step").click()
        page.wait(f"{STORE}.kernels.length === 2")
        t_before = page.js(f"{STORE}.t")
        page.js(f"void (window.__loadedBefore = {STORE}.loaded)")  # tells the resumed run from the old one
        server.stop()
        page.wait("document.getElementById('status').dataset.state === 'down'")
        server = ThreadServer(port)
        page.wait("document.getElementById('status').dataset.state === 'live'", timeout_s=30)
        page.wait(f"{STORE}.loaded !== window.__loadedBefore && {STORE}.scenario && "
                  f"{STORE}.scenario.decode_steps === 40 && {STORE}.t === {t_before}")
        assert page.js(f"{STORE}.kernels.length") == 2  # rebuilt by the seek, not lost and not doubled
        page.page.get_by_test_id("step").click()
        page.wait(f"{STORE}.kernels.length === 3")
        # the console may log the refused connections while the server was down; nothing else
        assert [p for p in page.problems if "WebSocket" not in p and "ERR_CONNECTION_REFUSED" not in p] == []
    finally:
        ctx.close()
        server.stop()
