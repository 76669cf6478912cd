"""Finding 5: playback commands are rate-limited per connection, queued seeks coalesce (the latest wins), and a seek's
rebuild and a recording's parsing run off the event loop."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

from layerscope.commands.serve import build_app, simulator
from layerscope.server import session as session_module
from layerscope.server.runs import RunCache
from layerscope.server.session import Session
from layerscope.server.settings import Settings

SHORT = "decode-pulses"


def _drain(ws: Any, until: str = "state", limit: int = 10_000) -> list[dict[str, Any]]:
    seen = []
    for _ in range(limit):
        seen.append(ws.receive_json())
        if seen[-1]["type"] == until:
            return seen
    raise AssertionError(f"no {until!r}")


def test_a_seek_flood_coalesces_to_a_few_rebuilds_ending_at_the_last_target() -> None:
    with TestClient(build_app(Settings(seek_interval_s=0.2))) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": SHORT})
        loaded = _drain(ws, "loaded")[-1]
        _drain(ws)
        targets = [loaded["duration_us"] * i / 300 for i in range(300)]
        for t in targets:
            ws.send_json({"type": "seek", "t_us": t})
        ws.send_json({"type": "pause"})
        seen: list[dict[str, Any]] = []
        while not (seen and seen[-1]["type"] == "state" and seen[-1]["t_us"] == targets[-1]):
            seen += _drain(ws)
        resets = [m for m in seen if m["type"] == "frame" and m["reset"]]
        assert 1 <= len(resets) < 30, len(resets)  # 300 seeks: a handful of rebuilds, not 300
        assert resets[-1]["t_us"] == targets[-1]
        assert not [m for m in seen if m["type"] == "error"]


def test_a_command_flood_is_paced_and_every_command_answered() -> None:
    """Past commands_per_s (a bucket of as many) commands wait their turn: 60 pauses at 20/s take ~2 s, each gets
    its `state`, and another viewer is answered meanwhile."""
    import time

    with TestClient(build_app(Settings(commands_per_s=20))) as client, client.websocket_connect("/ws") as ws, \
            client.websocket_connect("/ws") as other:
        for w in (ws, other):
            w.send_json({"type": "load", "scenario": SHORT})
            _drain(w, "loaded")
            _drain(w)
        started = time.monotonic()
        for _ in range(60):
            ws.send_json({"type": "pause"})
        other.send_json({"type": "pause"})
        assert _drain(other)[-1]["type"] == "state"
        other_s = time.monotonic() - started
        states = [m for _ in range(60) for m in _drain(ws) if m["type"] == "state"]
        took = time.monotonic() - started
        assert len(states) == 60 and took >= 1.8, took  # (60 - 20) / 20 s, less the bucket's refill meanwhile
        assert other_s < took / 2  # the flood slowed its sender alone


def test_seek_rebuild_and_recording_parse_run_in_worker_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: dict[str, str] = {}
    real_parse = session_module.parse_command

    def spy_parse(text: str) -> Any:
        threads.setdefault("parse_big" if len(text) > 65536 else "parse_small", threading.current_thread().name)
        return real_parse(text)

    monkeypatch.setattr(session_module, "parse_command", spy_parse)

    async def go() -> None:
        from layerscope.runtime.engine import simulate

        session = Session(RunCache(simulator(simulate)), Settings())
        await session.handle_text(json.dumps({"type": "load", "scenario": SHORT}))
        await session.wait_loaded()
        assert session.playback is not None
        real_seek = session.playback.seek

        def spy_seek(*a: Any) -> Any:
            threads["seek"] = threading.current_thread().name
            return real_seek(*a)

        session.playback.seek = spy_seek  # type: ignore[method-assign]
        await session.handle_text(json.dumps({"type": "seek", "t_us": 10.0}))
        big = json.dumps({"type": "load", "scenario": SHORT, "events": [{"kind": "phase", "x": "y" * 100}] * 700})
        await session.handle_text(big)
        await session.wait_loaded()

    asyncio.run(go())
    main = threading.main_thread().name
    assert threads["seek"] != main and threads["parse_big"] != main and threads["parse_small"] == main
