"""The websocket protocol end to end through TestClient: every command and every bad-input answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakesim import full_kernels
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from layerscope.protocol import (
    MAX_MESSAGE_BYTES,
    DetailsMessage,
    ErrorMessage,
    FrameMessage,
    LoadedMessage,
    StateMessage,
)

Msg = dict[str, Any]


def recv_until(ws: Any, kind: str, limit: int = 10_000) -> tuple[Msg, list[Msg]]:
    """Messages up to and including the first of type `kind`."""
    seen: list[Msg] = []
    for _ in range(limit):
        m = ws.receive_json()
        seen.append(m)
        if m["type"] == kind:
            return m, seen
    raise AssertionError(f"no {kind!r} in {limit} messages")


def load(ws: Any, **cmd: Any) -> Msg:
    ws.send_json({"type": "load", **cmd})
    loaded, _ = recv_until(ws, "loaded")
    details = ws.receive_json()  # the claims and tour checks, made after the first screen; then playback's state
    DetailsMessage.model_validate(details)
    state, _ = recv_until(ws, "state")
    assert state["playing"] is False and state["t_us"] == 0.0
    return loaded


def test_load_preset_sends_loaded(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        loaded = load(ws, scenario="two-chunks")
    LoadedMessage.model_validate(loaded)
    assert loaded["scenario"]["name"] == "two-chunks"
    assert [n["id"] for n in loaded["topology"]["prefill"]["nodes"]][:2] == ["input_norm", "qkv_proj"]
    assert loaded["num_events"] > 0 and loaded["duration_us"] > 0
    assert loaded["compare"] is None and loaded["claims"] == []


def test_load_inline_spec_with_overrides_and_compare(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        loaded = load(ws, spec={"prompt_len": 2048, "chunk_size": 512, "decode_steps": 3}, set={"chunk_size": 1024})
        assert loaded["scenario"]["chunk_size"] == 1024
        loaded = load(ws, scenario="long-decode")
    assert loaded["compare"]["label"] == "naive"
    assert loaded["compare"]["scenario"]["allocator"] == "naive"
    assert len(loaded["compare"]["decode_latency_us"]) == 200


def test_play_streams_every_event_then_end(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        loaded = load(ws, scenario="two-chunks")
        ws.send_json({"type": "play", "speed": 2})
        end, seen = recv_until(ws, "end")
    frames = [FrameMessage.model_validate(m) for m in seen if m["type"] == "frame"]
    assert [f.seq for f in frames] == list(range(1, len(frames) + 1))
    kernels = full_kernels(loaded, [e for f in frames for e in f.events if e["kind"] == "kernel"])
    chunks = [e for f in frames for e in f.events if e["kind"] == "chunk"]
    attn = [k for k in kernels if k["stage"] == "attention" and k["phase"] == "prefill"]
    assert len(chunks) == 2 and sorted(k["chunk"] for k in attn) == [0, 1]
    assert len(kernels) == 4 * (2 + 6)  # four stages per chunk and per decode step: none lost
    times = [f.t_us for f in frames]
    assert times == sorted(times) and times[-1] == loaded["duration_us"]
    assert end["summary"]["chunks"] == 2
    numerics = next(e for f in frames for e in f.events if e["kind"] == "numerics")
    assert numerics["rel_error"] == "Infinity"  # JSON has no inf: sent as the string Number() reads


def test_snapshots_merge_within_a_frame(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        load(ws, scenario="two-chunks")
        ws.send_json({"type": "seek", "t_us": 0})  # nothing at t=0 but the phase and chunk 0
        ws.send_json({"type": "play", "speed": 1e6})  # everything due in the first tick
        _, seen = recv_until(ws, "end")
    for m in seen:
        if m["type"] == "frame":
            kinds = [e["kind"] for e in m["events"]]
            assert kinds.count("banks") <= 1 and kinds.count("memory") <= 1


def test_pause_stops_the_clock(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        load(ws, scenario="long-decode")
        ws.send_json({"type": "play", "speed": 0.05})
        recv_until(ws, "frame")
        ws.send_json({"type": "pause"})
        state, _ = recv_until(ws, "state")
        assert state["playing"] is False
        ws.send_json({"type": "step"})  # the next message after the pause's state must be the step frame
        frame, between = recv_until(ws, "frame")
    assert [m["type"] for m in between] == ["frame"] or all(m["type"] == "frame" for m in between)


def test_step_sends_exactly_one_kernel_batch(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        load(ws, scenario="two-chunks")
        previous = 0.0
        for _ in range(5):
            ws.send_json({"type": "step"})
            frame = ws.receive_json()
            state = ws.receive_json()
            assert frame["type"] == "frame" and state["type"] == "state" and state["playing"] is False
            assert sum(e["kind"] == "kernel" for e in frame["events"]) == 1
            assert frame["events"][-1]["kind"] == "kernel" or frame["events"][-1]["t_us"] == frame["t_us"]
            assert frame["t_us"] >= previous
            previous = frame["t_us"]


def test_step_at_end_sends_end(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        loaded = load(ws, scenario="two-chunks")
        ws.send_json({"type": "seek", "t_us": loaded["duration_us"]})
        recv_until(ws, "state")
        ws.send_json({"type": "step"})
        assert ws.receive_json()["type"] == "end"


def test_seek_rebuilds_state(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        loaded = load(ws, scenario="two-chunks")
        mid = loaded["duration_us"] / 2
        ws.send_json({"type": "seek", "t_us": mid})
        frame = ws.receive_json()
        state = StateMessage.model_validate(ws.receive_json())
        assert frame["type"] == "frame" and frame["reset"] is True
        assert frame["t_us"] == mid == state.t_us
        assert frame["events"] and all(e["t_us"] <= mid for e in frame["events"])
        ws.send_json({"type": "seek", "t_us": 0})
        back = ws.receive_json()
        assert back["reset"] is True and all(e["t_us"] == 0 for e in back["events"])


def test_seek_rebuild_is_split_into_bounded_frames(presets_dir: Any) -> None:
    from fakesim import fake_simulate

    from layerscope.commands.serve import build_app
    from layerscope.server.settings import Settings

    app = build_app(Settings(max_frame_events=7), simulate=fake_simulate)
    with TestClient(app) as c, c.websocket_connect("/ws") as ws:
        loaded = load(ws, scenario="two-chunks")
        ws.send_json({"type": "seek", "t_us": loaded["duration_us"]})
        _, seen = recv_until(ws, "state")
    frames = [m for m in seen if m["type"] == "frame"]
    assert [f["reset"] for f in frames] == [True] + [False] * (len(frames) - 1) and len(frames) > 1
    assert all(len(f["events"]) <= 7 and f["t_us"] == loaded["duration_us"] for f in frames)
    kernels = sum(e["kind"] == "kernel" for f in frames for e in f["events"])
    assert kernels == 4 * (2 + 6)


def test_speed_command(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        load(ws, scenario="two-chunks")
        ws.send_json({"type": "speed", "speed": 4})
        state = ws.receive_json()
    assert state == {"type": "state", "playing": False, "speed": 4.0, "t_us": 0.0}


def bad(ws: Any, raw: str | bytes) -> Msg:
    if isinstance(raw, bytes):
        ws.send_bytes(raw)
    else:
        ws.send_text(raw)
    msg = ws.receive_json()
    ErrorMessage.model_validate(msg)
    assert msg["type"] == "error"
    return msg


BAD_COMMANDS = [
    ("{not json", None, "invalid JSON"),
    ("[1, 2]", None, "JSON object"),
    ('{"scenario": "x"}', "type", "missing field 'type'"),
    ('{"type": "dance"}', "type", "unknown command type 'dance'"),
    ('{"type": "speed", "speed": "fast"}', "speed", "valid number"),
    ('{"type": "speed", "speed": -1}', "speed", "greater than 0"),
    ('{"type": "speed", "speed": 1e30}', "speed", "less than or equal"),
    ('{"type": "seek", "t_us": -5}', "t_us", "greater than or equal"),
    ('{"type": "seek"}', "t_us", "required"),
    ('{"type": "pause", "extra": 1}', "extra", "not permitted"),
    ('{"type": "load", "scenario": "../../etc/passwd"}', "scenario", "unknown scenario"),
    ('{"type": "load", "scenario": "nope"}', "scenario", "unknown scenario 'nope'"),
    ('{"type": "load"}', "scenario", "exactly one"),
    ('{"type": "load", "spec": {"chunk_size": 1}}', "spec.chunk_size", "greater than or equal to 16"),
    ('{"type": "load", "spec": {"bogus": 1}}', "spec.bogus", "not permitted"),
    ('{"type": "load", "scenario": "two-chunks", "set": {"prompt_len": 10000000}}', "set.prompt_len", "less than"),
    ('{"type": "load", "scenario": "two-chunks", "set": {"nope": 1}}', "set.nope", "unknown field 'nope'"),
    ('{"type": "load", "scenario": "two-chunks", "events": []}', "events", "at least 1"),
]


@pytest.mark.parametrize(("raw", "field", "needle"), BAD_COMMANDS)
def test_bad_commands_get_one_error_and_connection_survives(
    client: TestClient, raw: str, field: str | None, needle: str
) -> None:
    with client.websocket_connect("/ws") as ws:
        msg = bad(ws, raw)
        assert needle in msg["message"], msg
        assert msg["field"] == field, msg
        load(ws, scenario="two-chunks")  # still usable


def test_binary_frame_refused(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        msg = bad(ws, b"\x00\x01binary")
        assert "binary" in msg["message"]
        load(ws, scenario="two-chunks")


def test_oversized_message_refused(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        msg = bad(ws, json.dumps({"type": "pause", "pad": "x" * (1024 * 1024)}))
        assert str(MAX_MESSAGE_BYTES) in msg["message"] and "limit" in msg["message"]
        load(ws, scenario="two-chunks")


@pytest.mark.parametrize("cmd", ["play", "pause", "step", "seek", "speed"])
def test_commands_before_load(client: TestClient, cmd: str) -> None:
    extra = {"seek": {"t_us": 1.0}, "speed": {"speed": 2.0}}.get(cmd, {})
    with client.websocket_connect("/ws") as ws:
        msg = bad(ws, json.dumps({"type": cmd, **extra}))
        assert "no scenario loaded" in msg["message"] and msg["field"] == "type"


def test_seek_past_end(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        loaded = load(ws, scenario="two-chunks")
        msg = bad(ws, json.dumps({"type": "seek", "t_us": loaded["duration_us"] + 1}))
        assert "past the end" in msg["message"] and msg["field"] == "t_us"
        ws.send_json({"type": "step"})
        assert ws.receive_json()["type"] == "frame"


def test_simulator_failure_is_an_error_not_a_crash(client: TestClient) -> None:
    def boom(spec: Any) -> Any:
        raise RuntimeError("engine exploded")

    client.app.state.runs._simulate = boom  # type: ignore[attr-defined]
    with client.websocket_connect("/ws") as ws:
        msg = bad(ws, json.dumps({"type": "load", "spec": {"decode_steps": 1}}))
        assert "internal error (RuntimeError)" in msg["message"]  # what failed; its text stays in the server's log


def test_foreign_origin_refused_same_host_allowed(client: TestClient) -> None:
    with pytest.raises(WebSocketDisconnect) as e:
        with client.websocket_connect("/ws", headers={"origin": "http://evil.example"}):
            pass
    assert e.value.code == 1008
    with client.websocket_connect("/ws", headers={"origin": "http://testserver"}) as ws:
        load(ws, scenario="two-chunks")
    client.app.state.settings.allowed_origins = ["http://lab.example"]  # type: ignore[attr-defined]
    with client.websocket_connect("/ws", headers={"origin": "http://lab.example"}) as ws:
        load(ws, scenario="two-chunks")


def test_sessions_counted_and_released(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws, client.websocket_connect("/ws") as ws2:
        load(ws, scenario="two-chunks")
        load(ws2, scenario="two-chunks")
        live = client.get("/api/debug/sessions").json()
        assert live["sessions"] == 2 and live["tasks"] == 4
        assert live["simulations"] == 1  # the second viewer got the cached run
    for _ in range(200):  # the server side finishes its cleanup shortly after the client closes
        live = client.get("/api/debug/sessions").json()
        if live["sessions"] == 0:
            break
    assert {k: live[k] for k in ("sessions", "tasks", "simulations", "cached_runs")} == {
        "sessions": 0,
        "tasks": 0,
        "simulations": 1,
        "cached_runs": 1,
    }


def test_viewers_beyond_max_sessions_are_told_and_closed(presets_dir: Any) -> None:
    from fakesim import fake_simulate

    from layerscope.commands.serve import build_app
    from layerscope.server.settings import Settings

    app = build_app(Settings(max_sessions=2), simulate=fake_simulate)
    with TestClient(app) as c, c.websocket_connect("/ws") as first, c.websocket_connect("/ws") as second:
        with c.websocket_connect("/ws") as third:
            refused = third.receive_json()
            assert refused["type"] == "error" and "server full" in refused["message"]
            with pytest.raises(WebSocketDisconnect) as closed:
                third.receive_json()
            assert closed.value.code == 1013
        for ws in (first, second):  # the two admitted viewers keep working
            assert load(ws, scenario="two-chunks")["type"] == "loaded"
        assert c.get("/api/debug/sessions").json()["sessions"] == 2
