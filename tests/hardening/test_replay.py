"""Determinism as a guarantee: a run recorded with `layerscope run --events` replays frame for frame."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hardening_util import RawClient, ServerProcess

from layerscope.cli import main
from layerscope.commands.serve import build_app
from layerscope.server.settings import Settings

Msg = dict[str, Any]


def record(tmp_path: Path, scenario: str) -> list[Msg]:
    out = tmp_path / f"{scenario}.jsonl"
    assert main(["run", scenario, "--events", str(out)]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(build_app(Settings())) as c:
        yield c


def _until(ws: Any, kind: str, limit: int = 100_000) -> list[Msg]:
    seen = []
    for _ in range(limit):
        seen.append(ws.receive_json())
        if seen[-1]["type"] in (kind, "error"):
            return seen
    raise AssertionError(f"no {kind!r}")


def _strip(m: Msg) -> Msg:
    return {k: v for k, v in m.items() if k != "created_ms"}


def session_frames(client: TestClient, load: Msg, seeks: list[float]) -> tuple[Msg, list[Msg]]:
    """`loaded`, then every frame of stepping through the whole run, then a few seeks."""
    with client.websocket_connect("/ws") as ws:
        ws.send_json(load)
        loaded = _until(ws, "loaded")[-1]
        assert loaded["type"] == "loaded", loaded
        _until(ws, "state")
        frames: list[Msg] = []
        for _ in range(100_000):
            ws.send_json({"type": "step"})
            seen = _until(ws, "state")
            frames += [_strip(m) for m in seen if m["type"] == "frame"]
            if any(m["type"] == "end" for m in seen):
                break
        for t in seeks:
            ws.send_json({"type": "seek", "t_us": t})
            frames += [_strip(m) for m in _until(ws, "state") if m["type"] == "frame"]
    return loaded, frames


@pytest.mark.parametrize("scenario", ["decode-pulses", "ecc-bitflips"])
def test_recorded_run_replays_frame_for_frame(client: TestClient, tmp_path: Path, scenario: str) -> None:
    events = record(tmp_path, scenario)
    sim_loaded, sim_frames = session_frames(client, {"type": "load", "scenario": scenario}, [])
    end = sim_loaded["duration_us"]
    seeks = [0.0, end / 3, end / 2, end]
    sim_loaded, sim_frames = session_frames(client, {"type": "load", "scenario": scenario}, seeks)
    rep_loaded, rep_frames = session_frames(client, {"type": "load", "scenario": scenario, "events": events}, seeks)
    assert rep_loaded == sim_loaded
    assert events[0]["kind"] == "run" and rep_loaded["num_events"] == len(events) - 1  # the spec line is no event
    assert len(rep_frames) == len(sim_frames) > 10
    for i, (a, b) in enumerate(zip(rep_frames, sim_frames, strict=True)):
        assert a == b, f"frame {i} differs"
    kernels = sum(1 for f in sim_frames for e in f["events"] if e["kind"] == "kernel")
    assert kernels >= sum(1 for e in events if e["kind"] == "kernel")


def test_a_recording_is_validated_event_by_event(client: TestClient, tmp_path: Path) -> None:
    events = record(tmp_path, "decode-pulses")
    kernel = next(i for i, e in enumerate(events) if e["kind"] == "kernel")
    bad = [dict(e) for e in events]
    bad[kernel]["dur_us"] = "slow"
    with client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": "decode-pulses", "events": bad})
        err = ws.receive_json()
        assert err["type"] == "error" and err["field"] == f"events.{kernel}.kernel.dur_us"
        ws.send_json({"type": "load", "scenario": "decode-pulses", "events": [{"kind": "meteor", "t_us": 0}]})
        err = ws.receive_json()
        assert err["type"] == "error" and err["field"].startswith("events.0")
        ws.send_json({"type": "load", "events": events[1:6]})  # without its `run` line, the spec is required
        assert ws.receive_json()["field"] == "scenario"
        ws.send_json({"type": "load", "events": [events[0], *events[1:6], events[0]]})
        err = ws.receive_json()
        assert err["type"] == "error" and err["field"] == "events.6"  # one file, one run


def test_a_large_recording_replays_through_a_real_socket(server: ServerProcess, tmp_path: Path) -> None:
    events = record(tmp_path, "long-context-128k")
    text = json.dumps({"type": "load", "scenario": "long-context-128k", "events": events})
    assert len(text) > 1_000_000  # far above the 64 KiB limit of ordinary commands
    raw = RawClient(server.port)
    try:
        raw.send_frame(0x1, text.encode())
        loaded = raw.recv_json()
        assert loaded["type"] == "loaded" and loaded["num_events"] == len(events) - 1  # all but the `run` line
    finally:
        raw.close()
    assert server.debug()["simulations"] == 0  # replayed, not simulated


def _load(client: TestClient, load: Msg) -> Msg:
    with client.websocket_connect("/ws") as ws:
        ws.send_json(load)
        return ws.receive_json()


def test_a_recording_replays_its_own_spec(client: TestClient, tmp_path: Path) -> None:
    out = tmp_path / "adapted.jsonl"
    assert main(["run", "prefill-8k-chunked", "--quiet", "--set", "chunk_size=2048", "--events", str(out)]) == 0
    events = [json.loads(line) for line in out.read_text().splitlines()]
    loaded = _load(client, {"type": "load", "events": events})  # no scenario: the recording says which run it is
    assert loaded["type"] == "loaded", loaded
    assert loaded["scenario"]["name"] == "prefill-8k-chunked" and loaded["scenario"]["chunk_size"] == 2048
    same = _load(client, {"type": "load", "scenario": "prefill-8k-chunked", "set": {"chunk_size": 2048},
                          "events": events})
    assert same["type"] == "loaded" and same["scenario"] == loaded["scenario"]
    changed = _load(client, {"type": "load", "events": events, "set": {"gpu": "h200"}})
    assert changed["type"] == "error" and changed["field"] == "set"


@pytest.mark.parametrize(
    ("load", "field", "needles"),
    [
        ({"scenario": "ecc-bitflips"}, "scenario", ["'decode-pulses'", "'ecc-bitflips'", "prompt_len=200",
                                                    "prompt_len=2048"]),
        ({"scenario": "decode-pulses", "set": {"chunk_size": 2048}}, "scenario", ["chunk_size=4096",
                                                                                  "chunk_size=2048"]),
        ({"spec": {"name": "decode-pulses", "prompt_len": 200}}, "spec", ["'decode-pulses'", "runtime=article"]),
    ],
)
def test_a_recording_under_another_scenario_is_refused_naming_both(
    client: TestClient, tmp_path: Path, load: Msg, field: str, needles: list[str]
) -> None:
    events = record(tmp_path, "decode-pulses")
    err = _load(client, {"type": "load", **load, "events": events})
    assert err["type"] == "error" and err["field"] == field, err
    assert all(n in err["message"] for n in needles), err["message"]
    assert "without 'scenario' and 'spec'" in err["message"]  # and how to replay it as recorded


def test_a_recording_without_its_spec_line_is_checked_against_what_it_records(
    client: TestClient, tmp_path: Path
) -> None:
    out = tmp_path / "adapted.jsonl"
    assert main(["run", "prefill-8k-chunked", "--quiet", "--set", "chunk_size=2048", "--events", str(out)]) == 0
    events = [json.loads(line) for line in out.read_text().splitlines()][1:]  # an older recording: no `run` line
    err = _load(client, {"type": "load", "scenario": "prefill-8k-chunked", "events": events})
    assert err["type"] == "error" and err["field"] == "scenario"
    assert "not a run of 'prefill-8k-chunked': recorded chunk_size=2048, the scenario has chunk_size=4096" in (
        err["message"]
    )
    err = _load(client, {"type": "load", "scenario": "ecc-bitflips", "events": events})
    assert "recorded prompt_len=8192, decode_steps=8" in err["message"], err
    ok = _load(client, {"type": "load", "scenario": "prefill-8k-chunked", "set": {"chunk_size": 2048},
                        "events": events})
    assert ok["type"] == "loaded" and ok["num_events"] == len(events)


def test_a_replayed_deployed_run_keeps_the_topology_the_engine_built(client: TestClient, tmp_path: Path) -> None:
    """A deployed run's topology has its all-reduce stages; its replay shows the same one (the server is handed the
    engine's topology, it does not build a plan of its own)."""
    out = tmp_path / "deployed.jsonl"
    small = ["--set", "prompt_len=1024", "--set", "decode_steps=4", "--set", "chunk_size=512"]
    assert main(["run", "real-qwen3-235b-h200", "--quiet", *small, "--events", str(out)]) == 0
    events = [json.loads(line) for line in out.read_text().splitlines()]
    sets = {"prompt_len": 1024, "decode_steps": 4, "chunk_size": 512}
    live = _load(client, {"type": "load", "scenario": "real-qwen3-235b-h200", "set": sets})
    replayed = _load(client, {"type": "load", "events": events})
    assert live["type"] == replayed["type"] == "loaded", replayed
    stages = [n["id"] for phase in live["topology"].values() if isinstance(phase, dict) for n in phase.get("nodes", [])]
    assert any("all_reduce" in s for s in stages), stages
    assert replayed["topology"] == live["topology"]
