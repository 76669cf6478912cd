"""Server restart under a connected page: it reconnects with backoff and resumes the scenario it showed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hardening_util import ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.slow]
CHROMIUM = "/usr/bin/chromium"  # Debian's build, as in tests/browser (Playwright's download does not work here)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
STORE = "window.__layerscope.store"
WATCH_STATUS = """() => {
  window.__statuses = [];
  const el = document.getElementById('status');
  new MutationObserver(() => window.__statuses.push(el.textContent)).observe(el, {childList: true, subtree: true,
                                                                               characterData: true});
}"""


@pytest.fixture
def page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        pg = ctx.new_page()
        pg.page_errors = []
        pg.on("pageerror", lambda e: pg.page_errors.append(str(e)))
        yield pg
        browser.close()


def js(page: Any, expr: str) -> Any:
    return page.evaluate(f"() => ({expr})")


def wait(page: Any, expr: str, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := js(page, expr):
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {expr}")


def test_page_reconnects_with_backoff_and_resumes_its_scenario(page: Any) -> None:
    server = ServerProcess()
    server.start()
    try:
        page.goto(f"{server.url}/?scenario=decode-pulses")
        wait(page, f"window.__layerscope && {STORE}.scenario && {STORE}.scenario.name === 'decode-pulses'")
        for _ in range(3):  # move the view off t = 0 so resuming has a place to go back to
            frames = js(page, f"{STORE}.frames")
            page.get_by_test_id("step").click()
            wait(page, f"{STORE}.frames > {frames}")
        t_before = js(page, f"{STORE}.t")
        assert t_before > 0
        page.evaluate(WATCH_STATUS)

        server.stop()
        wait(page, "document.getElementById('status').textContent.startsWith('reconnecting')")
        time.sleep(2.5)  # several failed attempts while the server is down
        server.start()  # same port
        wait(page, "document.getElementById('status').textContent === 'live'", timeout_s=30)
        wait(page, f"{STORE}.scenario && {STORE}.scenario.name === 'decode-pulses' && {STORE}.t === {t_before}")

        statuses = js(page, "window.__statuses")
        delays = [float(s.split()[2]) for s in statuses if s.startswith("reconnecting in")]
        assert len(delays) >= 2 and delays == sorted(delays) and delays[-1] > delays[0]  # backing off
        assert server.debug()["sessions"] == 1  # the page is the new server's client
        page.get_by_test_id("step").click()  # and it is fully usable
        wait(page, f"{STORE}.t > {t_before}")
        assert page.page_errors == []
    finally:
        server.stop()
