"""Server restart under a connected page: it reconnects with backoff and resumes the scenario it showed."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hardening_util import ServerProcess, js, wait

from layerscope.cli import main

pytestmark = [pytest.mark.browser, pytest.mark.slow]
STORE = "window.__layerscope.store"
WATCH_STATUS = """() => {
  window.__statuses = [];
  const el = document.getElementById('status');
  new MutationObserver(() => window.__statuses.push(el.textContent)).observe(el, {childList: true, subtree: true,
                                                                               characterData: true});
}"""


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


def test_page_replays_a_recorded_file_like_the_simulated_run(page: Any, server: ServerProcess, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    assert main(["run", "decode-pulses", "--events", str(out)]) == 0
    recorded = [json.loads(line) for line in out.read_text().splitlines()]
    page.goto(f"{server.url}/?scenario=decode-pulses")
    wait(page, f"window.__layerscope && {STORE}.scenario && {STORE}.scenario.name === 'decode-pulses'")
    wait(page, "document.getElementById('status').textContent === 'live'")
    before = js(page, "window.__layerscope.stats.messages")
    page.get_by_test_id("replay-file").set_input_files(str(out))
    wait(page, f"window.__layerscope.stats.messages >= {before + 2} && {STORE}.t === 0")  # loaded, state
    assert js(page, "window.__layerscope.stats.errors") == []
    page.get_by_test_id("speed").select_option("64")
    page.get_by_test_id("play").click()
    wait(page, f"{STORE}.ended", timeout_s=60)
    assert server.debug()["simulations"] == 1  # the page's first load; the replay was not simulated
    assert js(page, f"{STORE}.kernels.length") == sum(1 for e in recorded if e["kind"] == "kernel")
    assert js(page, f"{STORE}.chunks.length") == sum(1 for e in recorded if e["kind"] == "chunk")
    assert page.page_errors == []
