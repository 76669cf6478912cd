"""The `loaded` message is strict JSON even when the spec holds an infinite float (workload.request_rate: inf)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from fastapi.testclient import TestClient


def strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} is not JSON (browsers refuse the whole message)")

    return json.loads(text, parse_constant=refuse)


def test_an_infinite_request_rate_travels_as_a_string(client: TestClient, presets_dir: Path) -> None:
    spec = {"name": "all-at-once", "prompt_len": 1024, "chunk_size": 1024, "decode_steps": 2,
            "workload": {"num_requests": 2, "input_len": 64, "output_len": 4, "request_rate": float("inf")},
            "compare": {"label": "b", "set": {"decode_steps": 3}}}
    (presets_dir / "all-at-once.yaml").write_text(yaml.safe_dump(spec))
    with client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": "all-at-once"})
        loaded = strict(ws.receive_text())
    assert loaded["type"] == "loaded", loaded
    assert loaded["scenario"]["workload"]["request_rate"] == "Infinity"
    assert loaded["compare"]["scenario"]["workload"]["request_rate"] == "Infinity"
