"""Frames are built from event texts encoded once per run: they must read exactly as json.dumps of the frame."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fakesim import fake_simulate

from layerscope.scenario import ScenarioSpec
from layerscope.server import session as session_mod
from layerscope.server.runs import EncodedEvent, compact_dumps, prepare
from layerscope.server.session import OutQueue, encode_message

SPEC = ScenarioSpec(prompt_len=8192, chunk_size=1024, decode_steps=40)


def test_prepared_events_carry_their_own_json() -> None:
    run = prepare(fake_simulate(SPEC))
    assert run.events and all(isinstance(e, EncodedEvent) for e in run.events)
    assert all(json.loads(e.text) == dict(e) for e in run.events)


def test_frame_text_parses_as_the_frame_message() -> None:
    run = prepare(fake_simulate(SPEC))
    plain = {"kind": "custom", "t_us": 1.5, "note": "not from a run"}  # e.g. a test fake: falls back to json.dumps

    async def frames() -> list[dict[str, Any]]:
        q = OutQueue(max_frames=2, max_control=4)
        q.push_frame(run.events[2]["t_us"], run.events[:3])
        q.push_frame(run.events[-1]["t_us"], [*run.events[3:], plain], reset=True)
        q.push_frame(run.duration_us, [])
        return [await q.get(), await q.get()]

    for msg in asyncio.run(frames()):
        assert json.loads(encode_message(msg)) == json.loads(json.dumps(msg))


def test_control_messages_are_plain_json() -> None:
    msg = {"type": "state", "playing": True, "speed": 2.0, "t_us": 3.25}
    assert json.loads(encode_message(msg)) == msg


def test_frame_encoding_dumps_only_the_head(monkeypatch: Any) -> None:
    run = prepare(fake_simulate(SPEC))
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(session_mod, "compact_dumps", lambda v: calls.append(v) or compact_dumps(v))
    text = encode_message({"type": "frame", "seq": 1, "t_us": 0.0, "events": run.events, "reset": False})
    assert len(calls) == 1 and "events" not in calls[0]  # the head only: no event is re-encoded per viewer
    assert len(json.loads(text)["events"]) == len(run.events)


def test_loaded_is_encoded_once_per_run_not_per_viewer(monkeypatch: Any) -> None:
    run = prepare(fake_simulate(SPEC))
    calls: list[Any] = []
    monkeypatch.setattr(session_mod, "compact_dumps", lambda v: calls.append(v) or compact_dumps(v))
    texts = [encode_message(session_mod.loaded_message(run)) for _ in range(3)]  # three viewers load the run
    assert calls == [] and texts[0] is texts[1] is texts[2]
    assert json.loads(texts[0]) == json.loads(json.dumps(dict(run.loaded)))
    assert json.loads(texts[0])["overview"]["runs"][0]["tables"]["kernel"]["rows"]
