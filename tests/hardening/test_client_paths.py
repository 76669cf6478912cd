"""Finding 1: no client names a file the server opens. A `workload.trace` from a websocket or HTTP client (overrides,
inline specs, a compare run's overrides, export bodies, sweep grids) is refused naming the field, the file untouched
and no path echoed; `load_trace` opens regular files only, without blocking, reading at most its limit + 1 bytes."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hardening_util import answer_then_probe

from layerscope import scenario as scn
from layerscope.commands.serve import build_app
from layerscope.paths import scenarios_dir
from layerscope.runtime import workload
from layerscope.runtime.workload import TraceError, load_trace
from layerscope.server import load as server_load
from layerscope.server.settings import Settings

SMALL = {"workload.num_requests": 3, "workload.input_len": 64, "workload.output_len": 4}


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.csv"
    os.mkfifo(path)
    return path


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(build_app(Settings())) as c:
        yield c


def _requests(path: str) -> list[tuple[dict[str, Any], str]]:
    """(load command, the field its refusal must name), one per way a client can name a trace."""
    compare = {"label": "x", "set": {"workload.trace": path}}
    return [
        ({"scenario": "decode-pulses", "set": {**SMALL, "workload.trace": path}}, "set.workload.trace"),
        ({"scenario": "decode-pulses", "set": {"workload": {"trace": path}}}, "set.workload.trace"),
        ({"scenario": "decode-pulses", "set": {**SMALL, "compare": compare}}, "set.compare.set.workload.trace"),
        ({"spec": {"workload": {"trace": path}}}, "spec.workload.trace"),
        ({"spec": {"workload": {"num_requests": 2}, "compare": compare}}, "spec.compare.set.workload.trace"),
    ]


@pytest.mark.parametrize("index", range(5))
@pytest.mark.parametrize("target", ["/etc/passwd", "/dev/zero", "fifo"])
def test_websocket_trace_paths_are_refused_without_opening_them(
    client: TestClient, fifo: Path, monkeypatch: pytest.MonkeyPatch, index: int, target: str
) -> None:
    path = str(fifo) if target == "fifo" else target
    opened: list[Any] = []
    monkeypatch.setattr(workload, "read_trace_text", lambda p, *a: opened.append(p) or "")
    cmd, field = _requests(path)[index]
    started = time.monotonic()
    err = answer_then_probe(client, {"type": "load", **cmd})
    assert err["type"] == "error" and err["field"] == field, err
    assert "opens no file a client names" in err["message"]
    assert path not in err["message"] and "line 1" not in err["message"]  # neither the path nor its content
    assert opened == [] and time.monotonic() - started < 10  # nothing read, nothing blocked


@pytest.mark.parametrize("route", ["/api/events", "/api/trace", "/api/report"])
def test_export_bodies_naming_a_trace_are_refused(client: TestClient, route: str) -> None:
    body = {"scenario": "decode-pulses", "set": {**SMALL, "compare": {"label": "x", "set": {"workload.trace": "/etc"}}}}
    r = client.post(route, json=body)
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "set", "compare", "set", "workload", "trace"]
    assert "/etc" not in r.text


def test_sweep_grid_naming_a_trace_is_refused(client: TestClient) -> None:
    r = client.post("/api/sweep", json={"scenario": "decode-pulses", "set": SMALL,
                                        "grid": {"workload.trace": ["/dev/zero"]}})
    assert r.status_code == 422 and "opens no file" in r.text and "regular file" not in r.text  # never opened


def test_a_presets_own_trace_stays_usable(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shipped preset naming a trace of scenarios/traces/ still loads; a client changing it to another file is
    refused."""
    shipped = str(scenarios_dir() / "traces" / "sample-azure.csv")
    real = scn.load_preset

    def with_trace(name: str) -> scn.ScenarioSpec:
        spec = real(name)
        if name != "serving-kv-preemption":
            return spec
        return spec.with_overrides({"workload.trace": shipped, "free_hbm_gib": 20})

    monkeypatch.setattr(server_load.scn, "load_preset", with_trace)
    with client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": "serving-kv-preemption"})
        loaded = ws.receive_json()
        assert loaded["type"] == "loaded", loaded
        assert loaded["scenario"]["workload"]["trace"] == shipped
        ws.send_json({"type": "load", "scenario": "serving-kv-preemption", "set": {"workload.trace": "/etc/hosts"}})
        while (msg := ws.receive_json())["type"] == "state":
            pass
        assert msg["type"] == "error" and msg["field"] == "set.workload.trace"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_load_trace_opens_regular_files_only_and_never_blocks(fifo: Path, tmp_path: Path, kind: str) -> None:
    path = {"fifo": fifo, "dev-zero": Path("/dev/zero"), "directory": tmp_path}[kind]
    outcome: list[BaseException] = []
    t = threading.Thread(target=lambda: outcome.append(_raised(lambda: load_trace(path))), daemon=True)
    t.start()
    t.join(timeout=5)
    assert not t.is_alive(), "load_trace blocked"
    assert isinstance(outcome[0], TraceError) and "not a regular file" in str(outcome[0])


def test_load_trace_reads_at_most_its_limit_plus_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose stat says small but that holds more (it grew, or lies: /proc) is cut at limit + 1 and refused."""
    path = tmp_path / "t.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "0,1,1\n" * 1000)
    reads: list[int] = []
    real_fdopen = os.fdopen

    def spy(fd: int, *a: Any, **kw: Any) -> Any:
        f = real_fdopen(fd, *a, **kw)
        real_read = f.read
        f.read = lambda n=-1: reads.append(n) or real_read(n)  # type: ignore[method-assign]
        return f

    monkeypatch.setattr(workload.os, "fdopen", spy)
    with pytest.raises(TraceError, match="over 100 bytes"):
        workload.read_trace_text(path, limit=100) if path.stat().st_size <= 100 else _read_lying(path)
    assert reads == [101]


def _read_lying(path: Path) -> str:
    """read_trace_text with fstat reporting a small size (as /proc files and growing files do)."""
    real = os.fstat

    class Small:
        def __init__(self, st: os.stat_result) -> None:
            self.st_mode, self.st_size = st.st_mode, 10

    workload.os.fstat = lambda fd: Small(real(fd))  # type: ignore[assignment,return-value]
    try:
        return workload.read_trace_text(path, limit=100)
    finally:
        workload.os.fstat = real


def _raised(fn: Any) -> BaseException | None:
    try:
        fn()
    except BaseException as e:  # noqa: BLE001 -- the test inspects what was raised
        return e
    return None
