"""export/events.py: a recording is its spec line, then every event, canonical and deterministic."""

from __future__ import annotations

import json

from layerscope import scenario as scn
from layerscope.events import RunEvent, event_json, parse_event
from layerscope.export.events import to_jsonl
from layerscope.runtime.engine import simulate


def test_a_recording_opens_with_its_spec_and_is_deterministic() -> None:
    spec = scn.load_preset("decode-pulses").with_overrides({"decode_steps": 6})
    result = simulate(spec)
    text = to_jsonl(result)
    lines = text.splitlines()
    head = parse_event(json.loads(lines[0]))
    assert isinstance(head, RunEvent) and head.scenario == "decode-pulses"
    assert scn.parse_spec(head.spec) == spec  # the whole spec, back as it was
    assert lines[1:] == [event_json(e) for e in result.events]
    assert to_jsonl(simulate(spec)) == text
