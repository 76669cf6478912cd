"""JSON Schema export of the single sources of truth: scenario spec, events, websocket messages."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from layerscope.events import EVENT_ADAPTER, EVENT_SCHEMA_VERSION
from layerscope.protocol import COMMAND_ADAPTER, PROTOCOL_VERSION, ServerMessage, StreamedKernel
from layerscope.scenario import ScenarioSpec


def all_schemas() -> dict[str, Any]:
    events = EVENT_ADAPTER.json_schema()
    events["x-schema-version"] = EVENT_SCHEMA_VERSION
    return {
        "scenario": ScenarioSpec.model_json_schema(),
        "events": events,
        "messages": {
            "x-protocol-version": PROTOCOL_VERSION,
            "client": COMMAND_ADAPTER.json_schema(),
            "server": TypeAdapter(ServerMessage).json_schema(),
            "streamed_kernel": StreamedKernel.model_json_schema(),  # a frame's kernel events
        },
    }
