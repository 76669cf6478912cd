"""Finding 7: memory held for viewers is bounded. One run's events (max_run_events, while it runs) and its `loaded`
message (max_loaded_bytes) are bounded with a clear refusal; all runs alive at once (cached, shown, simulating) are
bounded by max_memory_events ("busy, retry"); a custom run no viewer shows any more leaves the cache."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from fastapi.testclient import TestClient
from hardening_util import SHORT, ServerProcess, Viewer, connect, recv_until, run, viewer_plays, wait_for

from layerscope import scenario as scn
from layerscope.commands.serve import build_app, simulator
from layerscope.runtime.engine import simulate
from layerscope.server.runs import TRIM_DELAY_S, Busy, RunCache
from layerscope.server.settings import Settings

SETTLED_MIB = 12  # RSS a later serving run may leave above the first one's (0-4 MiB measured over 8 runs), a margin


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


def _load_and_leave(server: ServerProcess, spec_set: dict[str, object]) -> None:
    async def go() -> None:
        async with connect(server.ws_url) as ws:
            await ws.send(json.dumps({"type": "load", "scenario": "serving-64-h200-tp8", "set": spec_set}))
            await recv_until(ws, Viewer(), "loaded", timeout_s=60)

    run(go())
    server.wait_idle()


def test_memory_of_runs_viewers_left_goes_back_to_the_os(server: ServerProcess) -> None:
    """Each custom run a viewer leaves is freed and its memory goes back to the OS (TRIM_DELAY_S after it left).
    With pymalloc, RSS stayed 33-49 MiB above what it was before the first run (its 1 MiB arenas pinned by the few
    objects made meanwhile); on the system malloc with several arenas (one per thread that allocated) 22-38 MiB above
    the first serving run's; `serve` re-executes itself with PYTHONMALLOC=malloc and MALLOC_ARENA_MAX=1: 0-4 MiB."""
    assert server.proc is not None
    environ = Path(f"/proc/{server.proc.pid}/environ").read_bytes().split(b"\0")
    assert b"PYTHONMALLOC=malloc" in environ and b"MALLOC_ARENA_MAX=1" in environ
    run(viewer_plays(server.ws_url, SHORT, plays=1))  # the engine's imports
    _load_and_leave(server, {"workload.num_requests": 64, "workload.max_concurrency": 8, "workload.seed": 99})
    time.sleep(TRIM_DELAY_S + 0.5)  # the serving engine's first-run costs (its tables, memo) are paid now
    before = server.rss_kib() // 1024
    for seed in range(3):
        _load_and_leave(server, {"workload.num_requests": 64, "workload.max_concurrency": 8, "workload.seed": seed})
        # ~60 MiB while it was held
        assert wait_for(lambda: server.rss_kib() // 1024 <= before + SETTLED_MIB, timeout_s=10), (
            f"RSS {server.rss_kib() // 1024} MiB after run {seed} left, {before} MiB after the first serving run")
