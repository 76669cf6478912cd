"""HTTP surface: schemathesis over the OpenAPI schema, security headers, websocket Origin checks, loopback binding."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hardening_util import RawClient, ServerProcess
from hypothesis import HealthCheck, settings
from starlette.websockets import WebSocketDisconnect

from layerscope.commands import serve
from layerscope.commands.serve import build_app
from layerscope.server.settings import Settings

APP = build_app(Settings())
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", APP)


@SCHEMA.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_route_answers_500(case: schemathesis.Case) -> None:
    response = case.call()
    assert response.status_code < 500, (case.path, case.query, response.text[:300])


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(APP)


@pytest.mark.parametrize("path", ["/", "/api/scenarios", "/static/js/main.js", "/healthz", "/no-such-page"])
def test_security_headers(client: TestClient, path: str) -> None:
    r = client.get(path)
    csp = r.headers["content-security-policy"]
    assert "unsafe-eval" not in csp
    assert "script-src 'self'" in csp and "object-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"


def test_csp_never_echoes_a_hostile_host_header(client: TestClient) -> None:
    r = client.get("/", headers={"host": "evil.example; script-src *"})
    assert "evil" not in r.headers["content-security-policy"]


def test_page_loads_no_script_from_another_origin(client: TestClient) -> None:
    html = client.get("/").text
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html.split("<body")[0]


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://testserver.evil.example", "file://"])
def test_websocket_refuses_foreign_origins(client: TestClient, origin: str) -> None:
    with pytest.raises(WebSocketDisconnect) as e, client.websocket_connect("/ws", headers={"origin": origin}):
        pass
    assert e.value.code == 1008


def test_websocket_accepts_its_own_origin_and_listed_ones(client: TestClient) -> None:
    with client.websocket_connect("/ws", headers={"origin": "http://testserver"}) as ws:
        ws.send_json({"type": "pause"})
        assert ws.receive_json()["type"] == "error"  # served (nothing loaded yet)
    listed = TestClient(build_app(Settings(allowed_origins=["https://lab.example"])))
    with listed.websocket_connect("/ws", headers={"origin": "https://lab.example"}) as ws:
        ws.send_json({"type": "pause"})
        assert ws.receive_json()["type"] == "error"


def test_allow_list_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYERSCOPE_ALLOWED_ORIGINS", "https://a.example, https://b.example")
    assert Settings.from_env().allowed_origins == ["https://a.example", "https://b.example"]
    assert Settings.from_env(allowed_origins=["https://c.example"]).allowed_origins == ["https://c.example"]


def test_serve_binds_loopback_by_default() -> None:
    p = argparse.ArgumentParser()
    serve.add_arguments(p)
    assert p.parse_args([]).host == "127.0.0.1"
    assert Settings().host == "127.0.0.1"


def _listening(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp{,6} write them) listening on `port`."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                out.append(local.rsplit(":", 1)[0])
    return out


def test_real_server_listens_on_loopback_only_and_checks_origins() -> None:
    server = ServerProcess(args=["--allow-origin", "https://lab.example"])
    server.start()
    try:
        assert _listening(server.port) == ["0100007F"]  # 127.0.0.1, nothing on 0.0.0.0 or ::
        assert RawClient(server.port, origin="http://evil.example").status == 403
        allowed = RawClient(server.port, origin="https://lab.example")
        assert allowed.status == 101
        allowed.close()
        same = RawClient(server.port, origin=f"http://127.0.0.1:{server.port}")
        assert same.status == 101
        same.close()
    finally:
        server.stop()
    assert "refused websocket from origin http://evil.example" in server.log.read_text()
