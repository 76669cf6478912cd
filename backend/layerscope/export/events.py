"""A run as JSON lines: first its spec (a `run` line), then every event, canonical (see docs/events.md).

What `layerscope run --events` writes and `POST /api/events` returns; the dashboard replays such a file as the
very run it records. The same spec and seed give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from layerscope.events import RunEvent, event_json


def header(spec: Any) -> RunEvent:
    return RunEvent(t_us=0.0, scenario=spec.name, spec=spec.model_dump(mode="json"))


def jsonl_lines(result: Any) -> Iterator[str]:
    """Each line of the recording of `result` (a SimResult, or a replayed recording), newline included."""
    yield event_json(header(result.spec)) + "\n"
    for e in result.events:
        yield event_json(e) + "\n"


def to_jsonl(result: Any) -> str:
    return "".join(jsonl_lines(result))
