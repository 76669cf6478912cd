"""frontend/static/js/panels under Node: the registry the page is built from, and the time-track base."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parents[2] / "frontend" / "static" / "js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (the browser tests cover the same code)")
# the modules read window / document only where they draw; these stand-ins let them load outside a page
STUBS = "globalThis.window = {}; globalThis.document = { getElementById: () => null };"


def run(body: str) -> object:
    script = f"{STUBS}\n{body}"
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_every_panel_has_an_id_a_title_a_kind_and_creates_its_views() -> None:
    panels = run(
        f'const {{ PANELS }} = await import("{(JS / "panels" / "index.js").as_uri()}");'
        "console.log(JSON.stringify(PANELS.map((p) => ({ id: p.id, title: p.title, kind: p.kind,"
        " create: typeof p.create, has: typeof p.has, where: p.area || p.size, serving: Boolean(p.serving) }))));"
    )
    assert isinstance(panels, list)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)) and ids[0] == "timeline"  # the timeline first: the first screen draws it
    assert {"timeline", "requests", "memory", "banks", "tour", "claims", "log"} <= set(ids)
    for p in panels:
        assert p["title"] and p["kind"] in ("time", "plot", "frame", "text") and p["create"] == "function", p
        assert p["where"] in ("wide", "half", "side"), p
        assert not p["serving"] or p["has"] == "function", p  # a serving panel says when it has something to show
    assert [p["id"] for p in panels if p["serving"]] == ["requests", "step-mix", "dp-ranks", "latency-dist"]


def test_a_time_track_draws_its_figure_on_the_shared_axis_only_when_what_it_reads_moved() -> None:
    calls = run(
        f'const {{ TimeTrack }} = await import("{(JS / "panels" / "track.js").as_uri()}");'
        f'const {{ Store }} = await import("{(JS / "store.js").as_uri()}");'
        "const drawn = []; globalThis.Plotly = { Icons: { home: {} },"
        "  react: (el, traces, layout) => drawn.push([traces.length,"
        " Boolean(layout.xaxis), layout.yaxis.title, layout.paper_bgcolor !== undefined]) };"
        "class Track extends TimeTrack {"
        "  constructor(el, store) { super(el, store, { id: 't', title: 't', keys: ['requests'] });"
        "    this.empty = false; }"
        "  figure(ax, breaks) { return this.empty ? null : { traces: [{ x: [0], y: [1] }],"
        "    layout: { yaxis: { title: 'y' }, shapes: breaks.shapes } }; } }"
        "const store = new Store(); const el = { clientWidth: 800, dataset: {}, on: () => {} };"
        "const t = new Track(el, store); const out = [];"
        "out.push(t.render()); out.push(t.render());"  # drawn once, then nothing moved
        "store.bump('requests'); out.push(t.render());"  # a counter it reads moved
        "store.bump('steps'); out.push(t.render());"  # one it does not read
        "t.empty = true; store.bump('theme'); out.push(t.render());"  # nothing to draw for this run
        "out.push(el.dataset.zoomBound === '1');"
        "console.log(JSON.stringify({ out, drawn }));"
    )
    assert isinstance(calls, dict)
    assert calls["out"] == [True, False, True, False, True, True]
    assert calls["drawn"] == [[1, True, "y", True], [1, True, "y", True]]  # the shared x axis, the page's theme
