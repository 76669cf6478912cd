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
