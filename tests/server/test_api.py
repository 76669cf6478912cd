"""REST routes, page, vendored Plotly and security headers."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from layerscope.server.app import create_app


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
    for panel in ["topology", "timeline", "banks", "memory", "latency", "stages", "claims", "experts", "controls"]:
        assert f'data-testid="{panel}"' in html
    assert "/vendor/plotly.min.js" in html
    assert "cdn" not in html.lower()


def test_plotly_served_from_package(client: TestClient) -> None:
    r = client.get("/vendor/plotly.min.js")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/javascript")
    assert b"plotly.js" in r.content[:200]


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
    assert create_app().state.settings.host == "127.0.0.1"
