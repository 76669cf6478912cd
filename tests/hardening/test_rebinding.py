"""Finding 3: DNS rebinding. A request whose Host is not a name the server is reached by (the bound host, 127.0.0.1,
localhost, ::1, or one `--allowed-host` adds) is refused, HTTP with 403 and a websocket before it opens, even with
a matching Origin; POST routes check Origin too."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from hardening_util import ServerProcess
from starlette.websockets import WebSocketDisconnect

from layerscope.commands.serve import build_app
from layerscope.server.security import host_allowed
from layerscope.server.settings import Settings

EVIL = "evil.example"


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(build_app(Settings(allowed_hosts=["testserver"]))) as c:
        yield c


@pytest.mark.parametrize("path", ["/", "/api/scenarios", "/healthz", "/api/trace?scenario=decode-pulses"])
def test_foreign_host_is_refused_on_http(client: TestClient, path: str) -> None:
    r = client.get(path, headers={"host": EVIL})
    assert r.status_code == 403 and "host not allowed" in r.text
    assert r.headers["x-frame-options"] == "DENY"  # a refusal carries the security headers too
    assert client.get(path, headers={"host": "127.0.0.1:8000"}).status_code == 200


def test_foreign_host_with_matching_origin_cannot_open_the_websocket(client: TestClient) -> None:
    with pytest.raises(WebSocketDisconnect) as e:
        with client.websocket_connect("/ws", headers={"host": EVIL, "origin": f"http://{EVIL}"}):
            pass
    assert e.value.code == 1008


def test_post_from_a_foreign_origin_is_refused(client: TestClient) -> None:
    body = {"scenario": "decode-pulses"}
    assert client.post("/api/events", json=body, headers={"origin": "http://evil.example"}).status_code == 403
    assert client.post("/api/sweep", json={**body, "grid": {"chunk_size": [256]}},
                       headers={"origin": "http://evil.example"}).status_code == 403
    assert client.post("/api/events", json=body, headers={"origin": "http://testserver"}).status_code == 200


@pytest.mark.parametrize(
    ("host", "bound", "allowed", "ok"),
    [
        ("127.0.0.1:8000", "127.0.0.1", [], True),
        ("localhost:8000", "127.0.0.1", [], True),
        ("[::1]:8000", "127.0.0.1", [], True),
        ("evil.example:8000", "127.0.0.1", [], False),
        ("evil.example", "0.0.0.0", [], False),  # a name must be listed even on every interface
        ("192.168.1.20:8000", "0.0.0.0", [], True),  # an address cannot be rebound
        ("192.168.1.20:8000", "127.0.0.1", [], False),
        ("lab.example:8000", "127.0.0.1", ["lab.example"], True),
        ("LAB.example", "127.0.0.1", ["lab.example"], True),
        (None, "127.0.0.1", [], False),
    ],
)
def test_host_rules(host: str | None, bound: str, allowed: list[str], ok: bool) -> None:
    assert host_allowed(host, bound, allowed) is ok


def _raw_status(port: int, host: str, path: str = "/healthz", upgrade: bool = False) -> int:
    extra = ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             f"Sec-WebSocket-Version: 13\r\nOrigin: http://{host}\r\n") if upgrade else ""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode())
        return int(s.recv(4096).split(b" ", 2)[1])


def test_the_real_server_checks_host_and_takes_allowed_host() -> None:
    server = ServerProcess(args=["--allowed-host", "lab.example"])
    server.start()
    try:
        assert _raw_status(server.port, EVIL) == 403
        assert _raw_status(server.port, EVIL, "/ws", upgrade=True) == 403  # refused before the handshake
        assert _raw_status(server.port, "lab.example:80") == 200
        assert _raw_status(server.port, f"localhost:{server.port}") == 200
    finally:
        server.stop()
