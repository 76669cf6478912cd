"""The first screen first (issue 23): `loaded` goes out before the streamed events, claims and tour checks are made;
they follow as `details`, and a command sent meanwhile waits for them: nothing is refused or lost."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fakesim import fake_simulate
from fastapi.testclient import TestClient

from layerscope.commands.serve import build_app
from layerscope.protocol import DetailsMessage
from layerscope.server import runs as runs_mod
from layerscope.server.runs import prepare
from layerscope.server.settings import Settings

CLAIMS = [{"id": "prefill_layer", "stated": 1.0, "unit": "µs", "verdict": "consistent"}]


def with_claims(spec: Any) -> Any:
    result = fake_simulate(spec)
    result.claims = CLAIMS
    return result


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """make_rest waits for the test: the first screen is out while the rest is not made yet."""
    gate = threading.Event()
    real = runs_mod.make_rest

    def held(run: Any) -> None:
        assert gate.wait(10), "the test never opened the gate"
        real(run)

    monkeypatch.setattr(runs_mod, "make_rest", held)
    return gate


def test_loaded_goes_out_before_the_rest_and_a_play_sent_meanwhile_waits(
        presets_dir: Any, settings: Settings, gate: threading.Event) -> None:
    app = build_app(settings, simulate=with_claims)
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": "two-chunks"})
        loaded = ws.receive_json()  # while make_rest is held: the first screen does not wait for it
        assert loaded["type"] == "loaded" and loaded["claims"] == [] and loaded["overview"]["runs"]
        ws.send_json({"type": "play", "speed": 8})  # before playback exists: deferred, not refused
        gate.set()
        details = DetailsMessage.model_validate(ws.receive_json())
        assert details.claims == CLAIMS and details.compare_claims is None
        kinds = []
        while (m := ws.receive_json())["type"] != "end":
            kinds.append(m["type"])
            assert m["type"] != "error", m
    assert kinds[0] == "state" and "frame" in kinds  # the load's state, then the deferred play's frames


def test_a_viewer_leaving_during_the_rest_does_not_fail_another(
        presets_dir: Any, settings: Settings, gate: threading.Event) -> None:
    app = build_app(settings, simulate=with_claims)
    with TestClient(app) as client:
        with client.websocket_connect("/ws") as first:
            first.send_json({"type": "load", "scenario": "two-chunks"})
            assert first.receive_json()["type"] == "loaded"
        with client.websocket_connect("/ws") as second:  # the first left while the rest was being made
            second.send_json({"type": "load", "scenario": "two-chunks"})
            assert second.receive_json()["type"] == "loaded"
            gate.set()
            assert [second.receive_json()["type"] for _ in range(2)] == ["details", "state"]


def test_an_export_and_the_preload_do_not_wait_for_the_rest(
        presets_dir: Any, settings: Settings, gate: threading.Event) -> None:
    app = build_app(settings, simulate=with_claims)
    with TestClient(app) as client:
        first = client.get("/api/loaded/two-chunks")  # answered with the first screen while the rest is held
        assert first.status_code == 200 and first.json()["claims"] == [] and "details" not in first.json()
        assert client.post("/api/events", json={"scenario": "two-chunks"}).status_code == 200
        gate.set()


def test_the_whole_loaded_is_the_first_screen_with_the_details_inside() -> None:
    from layerscope import scenario as scn

    run = prepare(with_claims(scn.ScenarioSpec(name="x", prompt_len=512, chunk_size=256, decode_steps=4)))
    whole = run.loaded_whole
    assert whole.startswith(run.loaded.text[:-1]) and whole.endswith(f',"details":{run.details.text}}}')
    assert run.details["claims"] == CLAIMS and run.claims == CLAIMS and run.events
