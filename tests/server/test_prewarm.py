"""Pre-warm: every preset simulated once from start-up, the default first; a visitor then finds it cached."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fakesim import PRESETS, fake_simulate
from fastapi.testclient import TestClient

from layerscope.commands.serve import build_app
from layerscope.server import prewarm
from layerscope.server.prewarm import prewarm_order
from layerscope.server.settings import Settings


def test_the_default_preset_is_warmed_first() -> None:
    assert prewarm_order(["a", "b", "c"], "b") == ["b", "a", "c"]
    assert prewarm_order(["a", "b"], None) == ["a", "b"]
    assert prewarm_order(["a", "b"], "gone") == ["a", "b"]
    assert prewarm_order([], None) == []


def _wait_cached(app, n: int) -> None:
    deadline = time.monotonic() + 10
    while len(app.state.runs) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_prewarmed_server_has_every_preset_cached_and_a_load_simulates_nothing(
        presets_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prewarm, "START_DELAY_S", 0.0)
    seen: list[str] = []

    def simulate(spec):
        seen.append(spec.name)
        return fake_simulate(spec)

    app = build_app(Settings(default_scenario="long-decode", play_seconds=0.2, tick_s=0.005), simulate, prewarm=True)
    with TestClient(app) as client:
        _wait_cached(app, len(PRESETS))
        assert seen == ["long-decode", "two-chunks"]  # the default first, each once
        with client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "load", "scenario": "two-chunks"})
            assert ws.receive_json()["type"] == "loaded"
        assert app.state.runs.simulations == len(PRESETS)  # the visit found it cached


def test_without_prewarm_nothing_is_simulated_before_a_load(presets_dir: Path) -> None:
    app = build_app(Settings(play_seconds=0.2, tick_s=0.005), fake_simulate)
    with TestClient(app):
        time.sleep(0.1)
        assert app.state.runs.simulations == 0


def test_the_run_cache_holds_the_whole_library(presets_dir: Path) -> None:
    app = build_app(Settings(cache_runs=1), fake_simulate)
    assert app.state.runs._max >= len(PRESETS) + 1  # every preset warm, and a visitor's own run besides
