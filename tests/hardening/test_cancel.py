"""Finding 4: abandoned work is cancelled. A client that leaves during its load stops the simulation (as vLLM aborts
a request whose client disconnects); a newer load supersedes the pending one (one pending load per connection);
the simulation queue is bounded and answers "busy, retry" when full."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from hardening_util import wait_for

from layerscope import scenario as scn
from layerscope.commands.serve import build_app, simulator
from layerscope.runtime.engine import simulate
from layerscope.server.runs import Busy, RunCache
from layerscope.server.settings import Settings


class SlowSim:
    """A simulation that runs until its check says stop (or `release` is set), counting how many ran and stopped."""

    def __init__(self) -> None:
        self.started = threading.Semaphore(0)
        self.release = threading.Event()
        self.stopped = 0

    def __call__(self, spec: scn.ScenarioSpec, check: Callable[[int], None] | None = None) -> Any:
        self.started.release()
        deadline = time.monotonic() + 20
        while not self.release.is_set() and time.monotonic() < deadline:
            try:
                if check is not None:
                    check(0)
            except BaseException:
                self.stopped += 1
                raise
            time.sleep(0.005)
        return simulate(spec)



def test_a_client_that_leaves_during_its_load_cancels_the_simulation() -> None:
    sim = SlowSim()
    app = build_app(Settings(), simulate=sim)
    with TestClient(app) as client:
        with client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "load", "spec": {"decode_steps": 3}})
            assert sim.started.acquire(timeout=10)
        assert wait_for(lambda: sim.stopped == 1), "the simulation kept running after its client left"
        assert wait_for(lambda: client.get("/api/debug/sessions").json()["cancelled_simulations"] == 1)
        with client.websocket_connect("/ws") as ws:  # its slot is free again
            sim.release.set()
            ws.send_json({"type": "load", "spec": {"decode_steps": 3}})
            assert ws.receive_json()["type"] == "loaded"


def test_a_newer_load_supersedes_the_pending_one() -> None:
    sim = SlowSim()
    with TestClient(build_app(Settings(), simulate=sim)) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "spec": {"decode_steps": 3}})
        assert sim.started.acquire(timeout=10)
        ws.send_json({"type": "load", "spec": {"decode_steps": 4}})  # the first one is nobody's any more
        assert sim.started.acquire(timeout=10)
        assert wait_for(lambda: sim.stopped == 1)
        sim.release.set()
        loaded = ws.receive_json()
        assert loaded["type"] == "loaded" and loaded["scenario"]["decode_steps"] == 4


def test_a_shared_simulation_runs_on_while_someone_waits() -> None:
    sim = SlowSim()

    async def go() -> None:
        cache = RunCache(simulator(sim), max_concurrent=1)
        spec = scn.parse_spec({"decode_steps": 2})
        first = asyncio.create_task(cache.get(spec))
        second = asyncio.create_task(cache.get(spec))
        await asyncio.to_thread(sim.started.acquire, True, 10)
        first.cancel()
        await asyncio.sleep(0.1)
        assert sim.stopped == 0  # the second client still waits for it
        sim.release.set()
        assert (await second).spec == spec

    asyncio.run(go())


def test_the_queue_is_bounded_and_says_busy() -> None:
    sim = SlowSim()

    async def go() -> None:
        cache = RunCache(simulator(sim), max_concurrent=1, max_queue=1)
        running = asyncio.create_task(cache.get(scn.parse_spec({"decode_steps": 1})))
        await asyncio.to_thread(sim.started.acquire, True, 10)
        queued = asyncio.create_task(cache.get(scn.parse_spec({"decode_steps": 2})))
        await asyncio.sleep(0.05)
        try:
            await cache.get(scn.parse_spec({"decode_steps": 3}))
        except Busy as e:
            assert "retry" in str(e)
        else:
            raise AssertionError("a third run was queued past max_queue")
        sim.release.set()
        await asyncio.gather(running, queued)

    asyncio.run(go())


def test_busy_reaches_the_client_as_an_error_and_503() -> None:
    sim = SlowSim()
    with TestClient(build_app(Settings(max_concurrent_sims=1, max_queue=0), simulate=sim)) as client:
        with client.websocket_connect("/ws") as ws, client.websocket_connect("/ws") as other:
            ws.send_json({"type": "load", "spec": {"decode_steps": 1}})
            assert sim.started.acquire(timeout=10)
            other.send_json({"type": "load", "spec": {"decode_steps": 2}})
            err = other.receive_json()
            assert err["type"] == "error" and "busy" in err["message"] and "retry" in err["message"], err
            r = client.post("/api/events", json={"spec": {"decode_steps": 5}})
            assert r.status_code == 503 and r.headers["retry-after"]
            sim.release.set()
            assert ws.receive_json()["type"] == "loaded"


def test_a_preset_as_shipped_has_its_own_slot() -> None:
    """A viewer opening a preset does not wait behind custom runs filling every slot."""
    sim = SlowSim()
    real = simulate

    def route(spec: scn.ScenarioSpec, check: Callable[[int], None] | None = None) -> Any:
        return real(spec) if spec.name == "decode-pulses" and spec.decode_steps == 100 else sim(spec, check)

    with TestClient(build_app(Settings(max_concurrent_sims=1), simulate=route)) as client:
        with client.websocket_connect("/ws") as heavy, client.websocket_connect("/ws") as viewer:
            heavy.send_json({"type": "load", "spec": {"decode_steps": 1}})
            assert sim.started.acquire(timeout=10)
            viewer.send_json({"type": "load", "scenario": "decode-pulses"})
            assert viewer.receive_json()["type"] == "loaded"
            sim.release.set()
            assert heavy.receive_json()["type"] == "loaded"
