"""The server over the real engine and the shipped presets (the rest of tests/server uses a fake)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fakesim import full_kernels
from fastapi.testclient import TestClient

from layerscope.commands.serve import build_app
from layerscope.server.settings import Settings


@pytest.fixture(scope="module")
def real() -> Iterator[TestClient]:
    with TestClient(build_app(Settings(play_seconds=0.3, tick_s=0.005))) as c:
        yield c


def test_presets_listed(real: TestClient) -> None:
    names = {s["name"] for s in real.get("/api/scenarios").json()}
    assert {"prefill-8k-chunked", "decode-pulses", "real-qwen3-235b-h200"} <= names


def test_trace_download_is_perfetto_json(real: TestClient) -> None:
    r = real.get("/api/trace", params={"scenario": "prefill-8k-chunked"})
    assert r.status_code == 200
    assert r.headers["content-disposition"] == 'attachment; filename="prefill-8k-chunked.trace.json"'
    slices = [e for e in r.json()["traceEvents"] if e["ph"] == "X"]
    assert any(e["name"] == "qwen3_prefill_flash_attn_chunked" for e in slices)


def test_play_real_preset_one_attention_launch_per_chunk(real: TestClient) -> None:
    with real.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": "prefill-8k-chunked"})
        loaded = ws.receive_json()
        assert loaded["type"] == "loaded", loaded.get("message")
        details = ws.receive_json()  # the claims follow the first screen
        assert details["type"] == "details" and details["claims"]
        assert {n["id"] for n in loaded["topology"]["prefill"]["nodes"]} >= {"attention"}
        ws.send_json({"type": "play", "speed": 4})
        events = []
        while (m := ws.receive_json())["type"] != "end":
            if m["type"] == "frame":
                events += m["events"]
    kernels = full_kernels(loaded, [e for e in events if e["kind"] == "kernel"])
    attn = [k for k in kernels if k["stage"] == "attention" and k["phase"] == "prefill"]
    chunks = [e for e in events if e["kind"] == "chunk"]
    assert len(chunks) == len(attn) == 2
    assert sorted(k["chunk"] for k in attn) == [c["chunk"] for c in chunks]
    assert len(kernels) == sum(e["kind"] == "kernel" for e in events) and len(kernels) > len(attn)
    assert m["summary"]


def test_report_download_is_self_contained_html(real: TestClient) -> None:
    r = real.get("/api/report", params={"scenario": "prefill-8k-chunked"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["content-disposition"] == 'attachment; filename="prefill-8k-chunked.report.html"'
    assert "<html" in r.text.lower() and not re.search(r"<script[^>]+src=\"https?:", r.text)  # no network
    assert real.get("/api/report", params={"scenario": "nope"}).status_code == 404


def test_details_carry_each_tour_steps_check_against_the_run(real: TestClient) -> None:
    with real.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": "prefill-8k-chunked"})
        loaded = ws.receive_json()
        details = ws.receive_json()  # after the first screen
    assert loaded["tour_results"] == [] and details["type"] == "details"
    steps = loaded["scenario"]["tour"]
    results = details["tour_results"]
    assert len(results) == len(steps) >= 3
    pairs = [(r, s) for r, s in zip(results, steps, strict=True) if s["check"]]
    assert pairs and all(r["metric"] == s["check"]["metric"] for r, s in pairs)
    checked = [r for r, _ in pairs]
    assert all(r["passed"] for r in checked)  # the preset's own claims hold in its own run
    launches = next(r for r in checked if r["metric"] == "num_attention_launches")
    assert launches["actual"] == 2


def test_report_download_of_a_serving_pair_has_its_serving_figures(real: TestClient) -> None:
    r = real.get("/api/report", params={"scenario": "serving-long-prompt-itl"})  # a dotted compare field: was 500
    assert r.status_code == 200
    for fid in ("requests", "step-mix", "latency-dist"):
        assert f'id="fig-{fid}"' in r.text
    assert "<h2>Deployment</h2>" in r.text


def test_trace_download_of_a_pair_holds_both_runs(real: TestClient) -> None:
    r = real.get("/api/trace", params={"scenario": "page-hint-jitter"})
    assert r.status_code == 200
    names = {e["pid"]: e["args"]["name"] for e in r.json()["traceEvents"] if e["name"] == "process_name"}
    assert names[1].startswith("A: page-hint-jitter") and names[2].startswith("B: ")
