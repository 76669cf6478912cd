"""Finding 7: memory held for viewers is bounded. One run's events (max_run_events, while it runs) and its `loaded`
message (max_loaded_bytes) are bounded with a clear refusal; all runs alive at once (cached, shown, simulating) are
bounded by max_memory_events ("busy, retry"); a custom run no viewer shows any more leaves the cache."""

from __future__ import annotations

import asyncio

from fastapi.testclient import TestClient
from hardening_util import wait_for

from layerscope import scenario as scn
from layerscope.commands.serve import build_app, simulator
from layerscope.runtime.engine import simulate
from layerscope.server.runs import Busy, RunCache
from layerscope.server.settings import Settings


def test_a_loaded_message_over_its_limit_is_refused() -> None:
    with TestClient(build_app(Settings(max_loaded_bytes=10_000))) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": "decode-pulses"})
        err = ws.receive_json()
        assert err["type"] == "error" and "first screen" in err["message"] and "MiB" in err["message"], err


def test_runs_alive_at_once_are_bounded_and_refused_busy() -> None:
    n = len(simulate(scn.parse_spec({"prompt_len": 64, "decode_steps": 100})).events)

    async def go() -> None:  # room for a held run and one simulating, not for two held runs and one simulating
        cache = RunCache(simulator(simulate), max_memory_events=3 * n + 100, max_run_events=n + 100)
        a = await cache.get(scn.parse_spec({"prompt_len": 64, "decode_steps": 100}))
        cache.hold(a)  # a viewer shows it: it cannot be dropped
        b = await cache.get(scn.parse_spec({"prompt_len": 64, "decode_steps": 101}))
        cache.hold(b)
        assert cache.memory_events >= 2 * n
        try:
            await cache.get(scn.parse_spec({"prompt_len": 64, "decode_steps": 102}))
        except Busy as e:
            assert "viewers hold" in str(e) and "retry" in str(e)
        else:
            raise AssertionError("a run past max_memory_events was simulated")
        cache.release(a)  # its viewer left: the room is there again
        await cache.get(scn.parse_spec({"prompt_len": 64, "decode_steps": 102}))

    asyncio.run(go())


def test_a_custom_run_nobody_shows_leaves_the_cache_and_presets_stay() -> None:
    app = build_app(Settings())
    with TestClient(app) as client:
        with client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "load", "scenario": "decode-pulses"})
            assert ws.receive_json()["type"] == "loaded"
            ws.send_json({"type": "load", "scenario": "decode-pulses", "set": {"decode_steps": 30}})
            while ws.receive_json()["type"] != "loaded":
                pass
            assert len(app.state.runs) == 2
        assert wait_for(lambda: client.get("/api/debug/sessions").json()["sessions"] == 0)
        assert wait_for(lambda: len(app.state.runs) == 1)  # the preset stays; the custom run is gone
        assert app.state.runs.memory_events == 727  # decode-pulses' events, nothing a viewer held


def test_a_closed_session_lets_go_of_its_run() -> None:
    app = build_app(Settings())
    with TestClient(app) as client:
        for _ in range(3):
            with client.websocket_connect("/ws") as ws:
                ws.send_json({"type": "load", "spec": {"decode_steps": 40}})
                assert ws.receive_json()["type"] == "loaded"
        assert wait_for(lambda: app.state.runs.memory_events == 0 and not app.state.runs._held)
