"""Hostile websocket input, fuzzed with hypothesis through TestClient (fast), plus real-socket checks.

Each bad message gets exactly one `error` (naming the field where there is one) and one log line; the
connection stays usable: the probe command sent right after it is answered normally.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hardening_util import SHORT, RawClient, ServerProcess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layerscope.commands.serve import build_app
from layerscope.protocol import MAX_MESSAGE_BYTES, MAX_REPLAY_BYTES
from layerscope.server.settings import Settings

COMMANDS = ("load", "play", "pause", "step", "seek", "speed")
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(build_app(Settings(play_seconds=2.0, tick_s=0.005, commands_per_s=1e6))) as c:  # a probe a message
        yield c


@pytest.fixture
def logged() -> Iterator[Records]:
    log = logging.getLogger("layerscope.server")
    handler, level = Records(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    yield handler
    log.removeHandler(handler)
    log.setLevel(level)


class Conn:
    """One websocket, loaded with the short preset, and a probe that shows it still works."""

    def __init__(self, ws: Any, logged: Records) -> None:
        self.ws, self.logged = ws, logged
        ws.send_json({"type": "load", "scenario": SHORT})
        self.loaded = self.until("loaded")[-1]
        self.until("state")

    def until(self, kind: str, limit: int = 1000) -> list[dict[str, Any]]:
        seen = []
        for _ in range(limit):
            seen.append(self.ws.receive_json())
            if seen[-1]["type"] == kind:
                return seen
        raise AssertionError(f"no {kind!r}")

    def hostile(self, payload: str | bytes) -> dict[str, Any]:
        """Send one bad message then a probe (`pause`); return the one error between them."""
        before = len(self.logged.messages)
        if isinstance(payload, bytes):
            self.ws.send_bytes(payload)
        else:
            self.ws.send_text(payload)
        self.ws.send_json({"type": "pause"})
        seen = self.until("state")
        errors = [m for m in seen if m["type"] == "error"]
        assert len(errors) == 1, (payload[:200], seen)
        assert errors[0]["message"]
        logs = [m for m in self.logged.messages[before:] if "client error" in m]
        assert len(logs) == 1, logs
        return errors[0]


@pytest.fixture
def conn(client: TestClient, logged: Records) -> Iterator[Conn]:
    with client.websocket_connect("/ws") as ws:
        yield Conn(ws, logged)


def _not_json(s: str) -> bool:
    try:
        json.loads(s)
    except ValueError:
        return True
    return False


@FUZZ
@given(text=st.text(max_size=200).filter(_not_json))
def test_invalid_json(conn: Conn, text: str) -> None:
    err = conn.hostile(text)
    assert "invalid JSON" in err["message"]


@FUZZ
@given(value=st.one_of(st.lists(st.integers(), max_size=5), st.integers(), st.text(max_size=20), st.none()))
def test_json_that_is_not_an_object(conn: Conn, value: Any) -> None:
    err = conn.hostile(json.dumps(value))
    assert "JSON object" in err["message"]


@FUZZ
@given(kind=st.one_of(st.text(max_size=30).filter(lambda t: t not in COMMANDS), st.integers(), st.lists(st.none())))
def test_unknown_command_types(conn: Conn, kind: Any) -> None:
    err = conn.hostile(json.dumps({"type": kind}))
    assert err["field"] == "type"


WRONG = st.one_of(
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.text(alphabet="abcxyz!", min_size=1, max_size=10),
)


@FUZZ
@given(kind=st.sampled_from(["play", "speed", "seek"]), value=WRONG)
def test_wrong_field_types(conn: Conn, kind: str, value: Any) -> None:
    field = "t_us" if kind == "seek" else "speed"
    err = conn.hostile(json.dumps({"type": kind, field: value}))
    assert err["field"] == field


@FUZZ
@given(
    kind=st.sampled_from(["play", "speed"]),
    speed=st.one_of(
        st.floats(max_value=0.0, allow_nan=False),
        st.floats(min_value=1e6, exclude_min=True),
        st.integers(min_value=10**6 + 1, max_value=10**400),
        st.integers(max_value=0),
    ),
)
def test_out_of_range_speeds(conn: Conn, kind: str, speed: float) -> None:
    text = json.dumps({"type": kind, "speed": speed})  # NaN / Infinity go out as JSON's NaN / Infinity
    err = conn.hostile(text)
    assert err["field"] == "speed"


@FUZZ
@given(t=st.one_of(st.floats(max_value=-1e-9), st.floats(min_value=1e12, exclude_min=True), st.just(math.nan)))
def test_out_of_range_seeks(conn: Conn, t: float) -> None:
    assert conn.hostile(json.dumps({"type": "seek", "t_us": t}))["field"] == "t_us"


def test_seek_past_the_end_names_the_run_length(conn: Conn) -> None:
    end = conn.loaded["duration_us"]
    err = conn.hostile(json.dumps({"type": "seek", "t_us": end * 2 + 1}))
    assert err["field"] == "t_us" and "past the end" in err["message"]


@FUZZ
@given(kind=st.sampled_from(COMMANDS[1:]), key=st.text(min_size=1, max_size=10).filter(lambda k: k != "type"))
def test_unknown_fields(conn: Conn, kind: str, key: str) -> None:
    if key in ("speed", "t_us"):
        key += "_"
    required = {"seek": {"t_us": 0.0}, "speed": {"speed": 1.0}}.get(kind, {})
    err = conn.hostile(json.dumps({"type": kind, **required, key: 1}))
    assert key in err["field"]


@pytest.mark.parametrize("field", ["type", "scenario", "speed", "junk"])
def test_one_megabyte_strings_are_refused_by_size(conn: Conn, field: str) -> None:
    msg = {"type": "load", field: "x" * 2**20} if field != "type" else {"type": "x" * 2**20}
    err = conn.hostile(json.dumps(msg))
    assert f"{MAX_MESSAGE_BYTES}-byte limit" in err["message"]


def test_oversized_replay_is_refused_by_its_own_limit(conn: Conn) -> None:
    msg = json.dumps({"type": "load", "scenario": SHORT, "events": [{"kind": "x" * (MAX_REPLAY_BYTES + 10)}]})
    assert f"{MAX_REPLAY_BYTES}-byte limit" in conn.hostile(msg)["message"]


@pytest.mark.parametrize("depth", [100, 60_000])
def test_deeply_nested_json(conn: Conn, depth: int) -> None:
    """json.loads recurses per level: a deep enough message used to close the connection without a word."""
    err = conn.hostile("[" * depth + "]" * depth if depth < 1000 else "[" * depth)
    assert "JSON" in err["message"]


@FUZZ
@given(data=st.binary(max_size=300))
def test_binary_frames(conn: Conn, data: bytes) -> None:
    assert "binary" in conn.hostile(data)["message"]


@pytest.mark.parametrize("cmd", [{"type": c} for c in COMMANDS[1:]])
def test_commands_before_load(client: TestClient, logged: Records, cmd: dict[str, Any]) -> None:
    if cmd["type"] == "seek":
        cmd["t_us"] = 1.0
    if cmd["type"] == "speed":
        cmd["speed"] = 2.0
    with client.websocket_connect("/ws") as ws:
        ws.send_json(cmd)
        err = ws.receive_json()
        assert err["type"] == "error" and "no scenario loaded" in err["message"] and err["field"] == "type"
        ws.send_json({"type": "load", "scenario": SHORT})  # still usable
        assert ws.receive_json()["type"] == "loaded"


def test_server_still_serves_after_the_fuzz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    with client.websocket_connect("/ws") as ws:
        Conn(ws, Records())
        ws.send_json({"type": "play", "speed": 1e6})
        for _ in range(100):
            if ws.receive_json()["type"] == "end":
                break
        else:
            raise AssertionError("no end")
    live = client.get("/api/debug/sessions").json()
    assert live["simulations"] == 1  # every connection shared one run


# -- real sockets ---------------------------------------------------------------------------------------
def test_real_socket_hostile_messages_then_a_valid_play(server: ServerProcess) -> None:
    raw = RawClient(server.port)
    try:
        raw.send_frame(0x1, b"{nope")
        assert raw.recv_json()["message"].startswith("invalid JSON")
        raw.send_frame(0x2, b"\x00\x01binary")
        assert "binary" in raw.recv_json()["message"]
        raw.send_json({"type": "play", "speed": "x" * 2**20})
        assert "limit" in raw.recv_json()["message"]
        raw.send_json({"type": "load", "scenario": SHORT})
        kinds = [raw.recv_json()["type"] for _ in range(3)]
        assert kinds == ["loaded", "details", "state"]  # the claims and tour checks follow the first screen
    finally:
        raw.close()
    log = server.log.read_text()
    assert "Traceback" not in log
    # `serve` logs each refused command once, in one line, naming the problem
    client_errors = [line for line in log.splitlines() if "client error:" in line]
    assert len(client_errors) == 3, log
    assert "invalid JSON" in client_errors[0] and "binary" in client_errors[1] and "limit" in client_errors[2]


def test_real_socket_frame_above_the_transport_limit_is_closed_1009(server: ServerProcess) -> None:
    raw = RawClient(server.port)
    try:
        # Only the header (announcing a payload above the limit) and 1 KiB: the server refuses on the length.
        size = MAX_REPLAY_BYTES + 128 * 1024
        raw.sock.sendall(bytes([0x81, 0x80 | 127]) + size.to_bytes(8, "big") + b"\0\0\0\0" + b"[" * 1024)
        opcode, payload = raw.recv_frame()
        assert opcode == 0x8 and int.from_bytes(payload[:2], "big") == 1009
    finally:
        raw.close()
    assert server.alive and server.wait_idle()["sessions"] == 0
    raw = RawClient(server.port)  # a new client is served as before
    try:
        raw.send_json({"type": "load", "scenario": SHORT})
        assert raw.recv_json()["type"] == "loaded"
    finally:
        raw.close()
