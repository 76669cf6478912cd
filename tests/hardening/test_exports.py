"""Finding 6: exports do not amplify. An export of a cached run is built once (then served from the export cache),
at most `max_concurrent_exports` build at once with a bounded queue (then 503, retry), and an export GET started
by another site (an <img> or a link on any page) is refused."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from layerscope.commands.serve import build_app
from layerscope.server.runs import Busy, ExportCache
from layerscope.server.settings import Settings

BODY = {"scenario": "decode-pulses", "set": {"decode_steps": 20}}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(build_app(Settings())) as c:
        yield c


def _built(client: TestClient) -> int:
    return int(client.get("/api/debug/sessions").json()["exports_built"])


@pytest.mark.parametrize("route", ["/api/report", "/api/trace", "/api/events"])
def test_repeated_exports_of_a_run_are_built_once(client: TestClient, route: str) -> None:
    before = _built(client)
    first = client.post(route, json=BODY)
    again = [client.post(route, json=BODY) for _ in range(3)]
    assert first.status_code == 200 and all(r.content == first.content for r in again)
    assert _built(client) == before + 1


@pytest.mark.parametrize(
    "headers",
    [
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
        {"referer": "https://evil.example/page.html"},
        {"origin": "https://evil.example"},
    ],
)
@pytest.mark.parametrize("route", ["/api/report", "/api/trace"])
def test_export_gets_started_by_another_site_are_refused(client: TestClient, route: str, headers: dict) -> None:
    r = client.get(route, params={"scenario": "decode-pulses"}, headers=headers)
    assert r.status_code == 403 and "another site" in r.text


@pytest.mark.parametrize(
    "headers", [{}, {"sec-fetch-site": "same-origin"}, {"sec-fetch-site": "none"},
                {"referer": "http://testserver/?scenario=x"}]
)
def test_export_gets_from_the_dashboard_or_the_address_bar_work(client: TestClient, headers: dict) -> None:
    assert client.get("/api/trace", params={"scenario": "decode-pulses"}, headers=headers).status_code == 200


def test_exports_build_one_at_a_time_and_refuse_past_the_queue() -> None:
    gate = threading.Event()
    active: list[int] = []
    peak: list[int] = [0]

    def build() -> str:
        active.append(1)
        peak[0] = max(peak[0], len(active))
        gate.wait(10)
        time.sleep(0.01)
        active.pop()
        return "x"

    async def go() -> None:
        cache = ExportCache(max_bytes=1000, slots=1, max_queue=2)
        tasks = [asyncio.create_task(cache.get((str(i), "report"), build)) for i in range(3)]
        await asyncio.sleep(0.1)
        with pytest.raises(Busy):
            await cache.get(("3", "report"), build)
        gate.set()
        assert await asyncio.gather(*tasks) == ["x"] * 3

    asyncio.run(go())
    assert peak[0] == 1


def test_export_cache_is_bounded_in_bytes() -> None:
    async def go() -> ExportCache:
        cache = ExportCache(max_bytes=10, slots=1, max_queue=1)
        for i in range(5):
            await cache.get((str(i), "trace"), lambda: "abcd")
        await cache.get(("4", "trace"), lambda: "never built")
        return cache

    cache = asyncio.run(go())
    assert cache.built == 5 and sum(len(v) for v in cache._items.values()) <= 10
