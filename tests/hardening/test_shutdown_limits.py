"""Findings 8 and 9 on a real `layerscope serve`: SIGTERM during a simulation exits within the grace period (the run
is cancelled); a request head is bounded in size and in time (slowloris), and connections are bounded."""

from __future__ import annotations

import json
import signal
import socket
import time

import pytest
from hardening_util import ServerProcess, connect, run

# ~7 s of CPU alone (numerics with the small model; the test's server allows it): still simulating at SIGTERM
HEAVY = {"type": "load", "scenario": "decode-pulses", "set": {"numerics": True, "numerics_model": "small",
                                                               "decode_steps": 1000}}


def test_sigterm_during_a_simulation_exits_within_five_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYERSCOPE_MAX_SIM_WORK", "100000")
    server = ServerProcess(args=["--timeout-graceful-shutdown", "1"])
    server.start()
    try:
        async def start_heavy() -> None:
            ws = await connect(server.ws_url).__aenter__()
            await ws.send(json.dumps(HEAVY))  # left open: the server must close it

        run(start_heavy())
        deadline = time.monotonic() + 10
        while server.debug()["simulations"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # well inside the simulation
        assert server.proc is not None
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=15)
        took = time.monotonic() - started
        assert took < 5.0, f"exited {took:.1f} s after SIGTERM"
    finally:
        server.stop()


def _closed_within(sock: socket.socket, timeout_s: float) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_slow_and_huge_request_heads_are_cut_and_connections_bounded() -> None:
    server = ServerProcess(args=["--header-timeout", "1", "--max-connections", "12"])
    server.start()
    try:
        slow = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(8)]
        for s in slow:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # and never the rest
        assert all(_closed_within(s, 4.0) for s in slow), "slowloris sockets left open past the header deadline"
        for s in slow:
            s.close()

        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as big:
            big.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n")
            answer = big.recv(4096)
            assert answer == b"" or answer.startswith(b"HTTP/1.1 4"), answer[:80]

        held = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(12)]
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as extra:
                extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert extra.recv(4096).startswith(b"HTTP/1.1 503")
        finally:
            for s in held:
                s.close()
        time.sleep(0.2)
        assert server.get("/healthz")["status"] == "ok"
    finally:
        server.stop()
