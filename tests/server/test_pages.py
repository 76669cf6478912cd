"""The dashboard page (server/pages.py): what it asks the browser to load first."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from layerscope.paths import frontend_dir
from layerscope.scenario import preset_names


def test_index_preloads_every_module_and_plotly_without_running_it(client: TestClient) -> None:
    """The whole module graph is asked for at once (modulepreload), nested views included, each URL served, and
    Plotly is fetched beside it (preload) but not run by the page itself: main.js runs it after the first screen."""
    html = client.get("/").text
    preloaded = re.findall(r'<link rel="modulepreload" href="([^"]+)">', html)
    js = frontend_dir() / "static" / "js"
    on_disk = {f"/static/js/{p.relative_to(js).as_posix()}" for p in js.rglob("*.js")} - {"/static/js/main.js"}
    assert set(preloaded) == on_disk and "/static/js/views/timeline.js" in preloaded
    assert all(client.get(u).status_code == 200 for u in preloaded)
    assert '<link rel="preload" href="/vendor/plotly.min.js" as="script">' in html
    assert not re.search(r"<script[^>]*plotly", html)
    # the presets are named on the page, so the URL's run is asked for before the menu's titles arrive
    assert f'data-presets="{",".join(preset_names())}"' in html


def test_a_preset_as_shipped_is_preloaded_and_its_loaded_is_the_websockets_text(client: TestClient) -> None:
    """The page preloads its first run's `loaded` (GET /api/loaded/NAME) beside its scripts when the URL names a
    preset as shipped (a theme, units or a moment do not change the run); the text is the websocket's answer, and
    a `load` with `loaded: false` is answered with `details` and `state` alone."""
    name = preset_names()[0]
    link = f'<link rel="preload" href="/api/loaded/{name}" as="fetch" crossorigin="anonymous" data-loaded="{name}">'
    assert link in client.get(f"/?scenario={name}&theme=light&t=5&x0=1&x1=9").text
    assert link in client.get("/").text  # the default preset
    for query in (f"?scenario={name}&prompt_len=4096", "?scenario=no-such-preset", f"?scenario={name}&fault=ecc"):
        assert "data-loaded" not in client.get(f"/{query}").text, query
    http = client.get(f"/api/loaded/{name}")
    assert http.status_code == 200 and http.headers["content-type"] == "application/json"
    with client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": name})
        assert ws.receive_text() == http.text
        assert [ws.receive_json()["type"] for _ in range(2)] == ["details", "state"]
        ws.send_json({"type": "load", "scenario": name, "loaded": False})
        assert [ws.receive_json()["type"] for _ in range(2)] == ["details", "state"]  # no second `loaded`
        ws.send_json({"type": "pause"})
        assert ws.receive_json()["type"] == "state"
    assert client.get("/api/loaded/no-such-preset").status_code == 404
    assert client.get("/api/loaded/..%2Fetc").status_code in (404, 422)


def test_a_run_in_memory_is_sent_gzipped_to_a_client_that_takes_gzip_and_as_text_to_one_that_does_not(
        client: TestClient) -> None:
    """GET /api/loaded/NAME of a run in memory: gzip bytes that decompress to the websocket's `loaded` text, or
    that text itself without Accept-Encoding: gzip."""
    import gzip

    name = preset_names()[0]
    with client.websocket_connect("/ws") as ws:  # the run simulated and held in memory
        ws.send_json({"type": "load", "scenario": name})
        loaded = ws.receive_text()
    with client.stream("GET", f"/api/loaded/{name}", headers={"Accept-Encoding": "gzip"}) as r:
        raw = b"".join(r.iter_raw())
        assert r.headers["content-encoding"] == "gzip" and r.headers["vary"] == "Accept-Encoding"
    assert gzip.decompress(raw).decode("utf-8") == loaded
    plain = client.get(f"/api/loaded/{name}", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.text == loaded
