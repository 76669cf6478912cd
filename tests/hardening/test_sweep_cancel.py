"""Finding 4, sweeps: a sweep whose client left is stopped at its next engine check and frees the sweep lock
(before, it ran every point to the end and held the lock, so the next sweep got 503 for minutes)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

import layerscope.sweep
from layerscope.commands.serve import build_app
from layerscope.server.settings import Settings

BODY = {"scenario": "serving-64-h200-tp8", "grid": {"workload.max_concurrency": [16, 32, 64]}}


def _scope(body: bytes) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/api/sweep", "raw_path": b"/api/sweep", "query_string": b"", "root_path": "",
            "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}


async def _post_then_leave(app: Any, body: bytes, leave_after_s: float) -> tuple[int, float]:
    sent = False
    leaves_at = time.monotonic() + leave_after_s

    async def receive() -> dict[str, Any]:
        """The body, then (as uvicorn queues it) a disconnect once the client has closed its connection."""
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if time.monotonic() < leaves_at:  # still there: nothing to read (a poll gives up at once, as on uvicorn)
            await asyncio.sleep(leaves_at - time.monotonic())
        return {"type": "http.disconnect"}

    status = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    t0 = time.monotonic()
    await asyncio.wait_for(app(_scope(body), receive, send), 20)
    return status, time.monotonic() - t0


def test_a_sweep_whose_client_left_stops_and_frees_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []

    def slow_point(spec_json: str, check: Any = None) -> dict[str, Any]:
        """A point that takes 10 s unless its check stops it."""
        started.append(spec_json)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if check is not None:
                check(0)
            time.sleep(0.01)
        return {}

    monkeypatch.setattr(layerscope.sweep, "run_point", slow_point)
    app = build_app(Settings())
    status, took = asyncio.run(_post_then_leave(app, json.dumps(BODY).encode(), leave_after_s=0.3))
    assert status == 499, status
    assert took < 5, f"the sweep ran on for {took:.1f} s after its client left"
    assert len(started) == 1, "points after the client left were started"
    assert not app.state.sweep_lock.locked()  # the next sweep is not refused as busy
