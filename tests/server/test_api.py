"""REST routes, page, vendored Plotly, security headers; the exports of the run on screen."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from layerscope.cli import main
from layerscope.commands.serve import build_app
from layerscope.protocol import MAX_REPLAY_BYTES
from layerscope.server.security import BodyLimit
from layerscope.server.settings import Settings


def test_healthz(client: TestClient) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_list_scenarios_names_titles_descriptions(client: TestClient) -> None:
    r = client.get("/api/scenarios")
    assert r.status_code == 200
    by_name = {s["name"]: s for s in r.json()}
    assert sorted(by_name) == ["long-decode", "two-chunks"]
    assert by_name["two-chunks"]["title"] == "Two chunks"
    assert by_name["two-chunks"]["description"].startswith("8192 tokens")


def test_get_scenario_is_validated_spec_with_defaults(client: TestClient) -> None:
    r = client.get("/api/scenarios/two-chunks")
    assert r.status_code == 200
    spec = r.json()
    assert spec["chunk_size"] == 4096 and spec["prompt_len"] == 8192
    assert spec["banks"] == 32  # default filled in by validation


def test_unknown_scenario_404_names_it(client: TestClient) -> None:
    r = client.get("/api/scenarios/no-such-thing")
    assert r.status_code == 404
    assert "no-such-thing" in r.json()["detail"]


@pytest.mark.parametrize("name", ["..%2Fpyproject", "%2E%2E", "UPPER", "a.yaml", "-lead"])
def test_scenario_names_cannot_traverse(client: TestClient, name: str) -> None:
    r = client.get(f"/api/scenarios/{name}")
    assert r.status_code in (404, 422)
    if r.status_code == 422:
        assert r.json()["detail"][0]["loc"] == ["path", "name"]


def test_schema_scenario_and_others(client: TestClient) -> None:
    assert "chunk_size" in client.get("/api/schema").json()["properties"]
    events = client.get("/api/schema", params={"which": "events"}).json()
    assert "KernelEvent" in json.dumps(events)
    messages = client.get("/api/schema", params={"which": "messages"}).json()
    assert set(messages) >= {"client", "server"}
    r = client.get("/api/schema", params={"which": "nope"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "which"]


def test_trace_requires_valid_scenario(client: TestClient) -> None:
    r = client.get("/api/trace")
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "scenario"]
    r = client.get("/api/trace", params={"scenario": "missing-one"})
    assert r.status_code == 404 and "missing-one" in r.json()["detail"]


def test_index_page_has_panels_and_local_plotly(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200
    html = r.text
    assert 'data-testid="controls"' in html and '<main class="grid" id="panels"></main>' in html
    # the panels are built from the registry the page preloads (tests/browser check them on the page)
    assert '<link rel="modulepreload" href="/static/js/panels/index.js">' in html
    registry = client.get("/static/js/panels/index.js").text
    for panel in ["topology", "timeline", "banks", "memory", "latency", "stages", "claims", "experts", "requests"]:
        assert f'id: "{panel}"' in registry
    assert "/vendor/plotly.min.js" in html
    assert "cdn" not in html.lower()


def test_plotly_is_the_vendored_partial_bundle_gzipped(client: TestClient) -> None:
    r = client.get("/vendor/plotly.min.js", headers={"Accept-Encoding": "gzip"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/javascript")
    assert r.headers["content-encoding"] == "gzip" and int(r.headers["content-length"]) < 700_000
    assert b"plotly.js (cartesian - minified)" in r.content[:200]  # decoded by the client
    plain = client.get("/vendor/plotly.min.js", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.content == r.content


def test_static_assets(client: TestClient) -> None:
    r = client.get("/static/js/main.js")
    assert r.status_code == 200 and "import" in r.text


def test_security_headers(client: TestClient) -> None:
    for path in ["/", "/api/scenarios", "/static/css/app.css"]:
        h = client.get(path).headers
        csp = h["content-security-policy"]
        assert "unsafe-eval" not in csp and "script-src 'self'" in csp
        assert h["x-content-type-options"] == "nosniff"
        assert h["referrer-policy"] == "no-referrer"
    assert "unsafe-eval" not in client.get("/docs").headers["content-security-policy"]


def test_hostile_host_header_not_copied_into_csp(client: TestClient) -> None:
    csp = client.get("/healthz", headers={"host": "evil; script-src *"}).headers["content-security-policy"]
    assert "evil" not in csp


def test_openapi_docs(client: TestClient) -> None:
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/scenarios", "/api/scenarios/{name}", "/api/schema", "/api/trace", "/api/report", "/healthz"} <= set(
        paths
    )


def test_debug_sessions_counter(client: TestClient) -> None:
    assert client.get("/api/debug/sessions").json()["sessions"] == 0


def test_create_app_defaults_bind_loopback() -> None:
    assert build_app().state.settings.host == "127.0.0.1"


# -- exports: the run on screen (real engine, shipped presets) ---------------------------------------------------
@pytest.fixture(scope="module")
def real() -> Iterator[TestClient]:
    with TestClient(build_app(Settings(max_sim_work=2000))) as c:
        yield c


APPLIED = {"scenario": "prefill-8k-chunked", "set": {"chunk_size": 2048, "gpu": "h200"}}


def _attention_slices(trace: dict) -> int:
    return sum(1 for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] == "qwen3_prefill_flash_attn_chunked")


def test_post_trace_is_the_preset_with_the_settings_applied(real: TestClient) -> None:
    preset = real.get("/api/trace", params={"scenario": "prefill-8k-chunked"})  # the GET route: the preset as is
    applied = real.post("/api/trace", json=APPLIED)
    assert applied.status_code == 200, applied.text
    disposition = 'attachment; filename="prefill-8k-chunked_gpu=h200_chunk_size=2048.trace.json"'
    assert applied.headers["content-disposition"] == disposition
    assert (_attention_slices(preset.json()), _attention_slices(applied.json())) == (2, 4)  # 8192 tokens / chunk
    assert applied.json()["otherData"]["gpu"] == "h200" and preset.json()["otherData"]["gpu"] == "h100-sxm"
    as_loaded = real.post("/api/trace", json={"type": "load", **APPLIED})  # the websocket message, posted as is
    assert as_loaded.content == applied.content


def test_post_report_names_the_overrides(real: TestClient) -> None:
    r = real.post("/api/report", json=APPLIED)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["content-disposition"].endswith('_gpu=h200_chunk_size=2048.report.html"')
    assert "h200" in r.text and "2048" in r.text
    same = real.post("/api/report", json={"scenario": "prefill-8k-chunked", "set": {"chunk_size": 4096}})
    assert same.headers["content-disposition"] == 'attachment; filename="prefill-8k-chunked.report.html"'  # no-op set


def test_post_events_is_the_cli_recording_byte_for_byte(real: TestClient, tmp_path: Path) -> None:
    out = tmp_path / "e.jsonl"
    assert main(["run", "prefill-8k-chunked", "--quiet", "--set", "chunk_size=2048", "--set", "gpu=h200",
                 "--events", str(out)]) == 0
    r = real.post("/api/events", json=APPLIED)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    assert r.content == out.read_bytes()
    head = json.loads(r.text.splitlines()[0])
    assert head["kind"] == "run" and head["spec"]["chunk_size"] == 2048 and head["spec"]["gpu"] == "h200"


def test_a_replayed_recording_exports_itself_without_simulating(real: TestClient) -> None:
    recording = real.post("/api/events", json=APPLIED).text
    events = [json.loads(line) for line in recording.splitlines()]
    before = real.get("/api/debug/sessions").json()["simulations"]
    again = real.post("/api/events", json={"events": events})
    assert again.status_code == 200 and again.text == recording
    assert again.headers["content-disposition"].endswith('_gpu=h200_chunk_size=2048.events.jsonl"')
    trace = real.post("/api/trace", json={"events": events})
    assert trace.json() == real.post("/api/trace", json=APPLIED).json()
    assert real.get("/api/debug/sessions").json()["simulations"] == before  # replayed, never simulated
    other = real.post("/api/trace", json={"scenario": "decode-pulses", "events": events})
    assert other.status_code == 422 and other.json()["detail"][0]["loc"] == ["body", "scenario"]
    assert "'prefill-8k-chunked'" in other.json()["detail"][0]["msg"] and "'decode-pulses'" in other.text


@pytest.mark.parametrize(
    ("body", "loc", "needle"),
    [
        ({}, ["body", "scenario"], "exactly one of"),
        ({"scenario": "no-such-preset"}, ["body", "scenario"], "no-such-preset"),
        ({"scenario": "prefill-8k-chunked", "set": {"chunk_size": 0}}, ["body", "set", "chunk_size"], "chunk_size"),
        ({"scenario": "prefill-8k-chunked", "set": {"nope": 1}}, ["body", "set"], "nope"),
        ({"scenario": "prefill-8k-chunked", "bogus": 1}, ["body", "bogus"], "Extra inputs"),
        ({"spec": {"name": "x", "prompt_len": "long"}}, ["body", "spec", "prompt_len"], "prompt_len"),
        ({"scenario": "prefill-8k-chunked", "set": {"decode_steps": 5000}}, ["body", "set", "decode_steps"], "at most"),
        ({"events": [{"kind": "meteor", "t_us": 0}]}, ["body", "events", "0"], "events.0"),
    ],
)
def test_bad_export_bodies_are_422_naming_the_field(real: TestClient, body: dict, loc: list[str], needle: str) -> None:
    before = real.get("/api/debug/sessions").json()["simulations"]
    for route in ("/api/trace", "/api/report", "/api/events"):
        r = real.post(route, json=body)
        assert r.status_code == 422, (route, r.text)
        err = r.json()["detail"][0]
        assert err["loc"][: len(loc)] == loc and needle in err["msg"], err
    assert real.get("/api/debug/sessions").json()["simulations"] == before  # refused before any work


def test_export_bodies_are_bounded(real: TestClient) -> None:
    big = {"scenario": "decode-pulses", "set": {"title": "x" * 70_000}}
    r = real.post("/api/trace", json=big)
    assert r.status_code == 413 and "65536-byte limit" in r.json()["detail"]  # only a recording may be large
    r = real.post("/api/trace", content=b"{}", headers={"content-length": str(MAX_REPLAY_BYTES + 1),
                                                         "content-type": "application/json"})
    assert r.status_code == 413


def test_body_limit_counts_a_body_without_a_length() -> None:
    app = build_app(Settings())
    app.user_middleware.clear()  # only the limit, with a tiny bound, around the real routes
    limited = TestClient(BodyLimit(app, max_bytes=100))

    def chunks() -> Iterator[bytes]:
        yield b'{"scenario": "decode-pulses", '
        yield b'"set": {"title": "' + b"x" * 200 + b'"}}'

    assert limited.post("/api/trace", content=chunks()).status_code == 413
    assert limited.post("/api/trace", content=b'{"scenario": 1}').status_code == 422  # small: parsed as usual


def test_an_app_serves_runs_again_after_its_lifespan_restarts() -> None:
    # An ASGI test client per call (schemathesis' from_asgi) starts and stops the app's lifespan each time: a
    # shutdown closes the run cache, and the next start must open it again, or every export answers 503.
    app = build_app(Settings(max_sim_work=2000))
    for steps in (3, 4):  # a run not simulated before, each time: the cache must take it
        with TestClient(app) as c:
            r = c.post("/api/trace", json={"scenario": "decode-pulses", "set": {"decode_steps": steps}})
            assert r.status_code == 200, r.text[:200]


def test_the_scenario_list_shows_a_changed_and_an_added_preset_file(client: TestClient, presets_dir: Path) -> None:
    """/api/scenarios is cached by the preset files' names, mtimes and sizes: an edit or a new file still shows."""
    import yaml

    assert client.get("/api/scenarios").json() == client.get("/api/scenarios").json()
    path = presets_dir / "two-chunks.yaml"
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, "title": "Two chunks, edited"}))
    by_name = {s["name"]: s for s in client.get("/api/scenarios").json()}
    assert by_name["two-chunks"]["title"] == "Two chunks, edited"
    (presets_dir / "three-chunks.yaml").write_text(yaml.safe_dump({**data, "name": "three-chunks", "title": "Three"}))
    by_name = {s["name"]: s for s in client.get("/api/scenarios").json()}
    assert by_name["three-chunks"]["title"] == "Three" and sorted(by_name) == ["long-decode", "three-chunks",
                                                                              "two-chunks"]
