"""Finding 10: the protocol contract. Huge integers, NaN, lone surrogates: one `error` on the websocket (connection
kept) or a 422 JSON naming the field over HTTP; never a plain 500, never a server path in the text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from layerscope.commands.serve import build_app
from layerscope.server.settings import Settings


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(build_app(Settings()), raise_server_exceptions=False) as c:
        yield c


def _one_error_then_usable(client: TestClient, text: str) -> dict[str, Any]:
    with client.websocket_connect("/ws") as ws:
        ws.send_text(text)
        err = ws.receive_json()
        ws.send_json({"type": "load", "scenario": "decode-pulses"})
        assert ws.receive_json()["type"] == "loaded"
    return err


@pytest.mark.parametrize(
    "text",
    [
        '{"type": "seek", "t_us": ' + "9" * 5000 + "}",
        '{"type": "load", "scenario": "decode-pulses", "set": {"seed": ' + "1" * 5000 + "}}",
        '{"type": "load", "scenario": "decode-pulses", "set": {"prompt_len": NaN}}',
        '{"type": "load", "scenario": "decode-pulses", "set": {"\\ud800": 1}}',
        '{"type": "load", "spec": {"\\udfff": NaN}}',
        '{"type": "seek", "t_us": Infinity}',
    ],
    ids=["huge-int", "huge-int-in-set", "nan", "lone-surrogate-key", "surrogate-and-nan", "infinity"],
)
def test_websocket_hostile_numbers_and_strings_get_one_error(client: TestClient, text: str) -> None:
    err = _one_error_then_usable(client, text)
    assert err["type"] == "error" and err["message"], err


@pytest.mark.parametrize(
    ("body", "loc_part"),
    [
        ('{"scenario": "decode-pulses", "bogus": NaN}', "bogus"),
        ('{"scenario": "decode-pulses", "\\ud800": 1}', "body"),  # the body as a whole: not valid Unicode
        ('{"scenario": "decode-pulses", "set": {"prompt_len": NaN}}', "prompt_len"),
        ('{"scenario": "decode-pulses", "set": {"seed": ' + "7" * 5000 + "}}", None),
    ],
    ids=["nan-unknown-field", "surrogate-key", "nan-value", "huge-int"],
)
@pytest.mark.parametrize("route", ["/api/events", "/api/trace", "/api/sweep"])
def test_http_hostile_bodies_get_a_json_4xx(client: TestClient, route: str, body: str, loc_part: str | None) -> None:
    r = client.post(route, content=body.encode(), headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    detail = r.json()["detail"]
    if loc_part is not None and route != "/api/sweep":
        assert any(loc_part in ".".join(map(str, d["loc"])) for d in detail), detail


def test_engine_errors_never_echo_a_server_path(client: TestClient) -> None:
    app = client.app

    def boom(spec: Any) -> Any:
        raise IsADirectoryError(21, "Is a directory", "/srv/secret/traces")

    runs = app.state.runs  # type: ignore[attr-defined]
    real, runs._simulate = runs._simulate, boom
    try:
        err = _one_error_then_usable_with(client, {"type": "load", "spec": {"decode_steps": 7}}, runs, real)
        runs._simulate = boom
        r = client.post("/api/events", json={"spec": {"decode_steps": 8}})
    finally:
        runs._simulate = real
    assert "IsADirectoryError" in err["message"] and "/srv" not in err["message"]
    assert r.status_code == 500 and "/srv" not in r.text and r.json()["detail"]

    def refuse(spec: Any) -> Any:
        raise ValueError("/srv/secret/x.csv: line 3: bad")

    runs._simulate = refuse
    try:
        r = client.post("/api/events", json={"spec": {"decode_steps": 9}})
    finally:
        runs._simulate = real
    assert r.status_code == 422 and "/srv" not in r.text and "<path>" in r.text


def _one_error_then_usable_with(client: TestClient, cmd: dict[str, Any], runs: Any, real: Any) -> dict[str, Any]:
    with client.websocket_connect("/ws") as ws:
        ws.send_json(cmd)
        err = ws.receive_json()
        runs._simulate = real
        ws.send_json({"type": "load", "scenario": "decode-pulses"})
        assert ws.receive_json()["type"] == "loaded"
    return err
