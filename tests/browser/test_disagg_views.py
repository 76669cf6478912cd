"""Issue 21 in headless Chromium: the disaggregated preset's tour lands on its moments; the KV transfers are a
kv_transfer lane of the timeline; every request's TTFT (its first token with the KV, transfer_done) is counted."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser
tours = sys.modules["browser_helpers"].sibling("test_tours")

L = "window.__layerscope"
STORE = f"{L}.store"


@pytest.mark.parametrize("name", ["pd-disaggregated-vs-colocated", "two-node-1p3d"])
def test_disaggregated_tour_transfer_lane_and_ttft(page: Any, server_url: str, name: str) -> None:
    tours.open_preset(page, server_url, name)
    assert page.js(f"{STORE}.main.kernel.some(k => k.stream === 'kv_transfer')")
    assert not page.js(f"{STORE}.runs.find(r => r.role === 'compare').kernel.some(k => k.stream === 'kv_transfer')")
    lanes = page.js(f"{L}.views.timeline.lanes().map(l => l.name)")
    decodes = page.js(f"{STORE}.main.summary.decode_instances")
    assert "A prefill 0 · compute" in lanes and "A decode 0 · kv_transfer" in lanes, lanes  # pools' own lanes
    assert {f"A decode {j} · compute" for j in range(decodes)} <= set(lanes)
    assert not any("kv_transfer" in x for x in lanes if x.startswith("B ")), lanes
    n = page.js(f"{STORE}.scenario.workload.num_requests")
    page.wait(f"{L}.serving.lat.ttft.length === {n}", timeout_s=60)  # transfer_done gives each its first token
    tours.walk(page, name)


def test_request_lanes_grouped_by_pool_with_the_transfer(page: Any, server_url: str) -> None:
    """1P3D: run A's lanes grouped by prefill -> decode pair (three groups, one per decode engine, each its colour),
    each lane with a KV transfer segment (its own colour) between its prefill and its decode; the hover names the
    engine of each phase; run B (colocated replicas) keeps its replica bands."""
    tours.open_preset(page, server_url, "two-node-1p3d")
    sv = f"{L}.serving"
    pairs = page.js(f"{sv}.order.map(id => {{ const r = {sv}.requests.get(id); "
                    "return [r.instance, r.decodeInstance]; })")
    assert len(pairs) == 48 and {p[0] for p in pairs} == {0} and {p[1] for p in pairs} == {1, 2, 3}
    assert pairs == sorted(pairs)  # grouped: prefill engine, then decode engine
    labels = page.js(f"({L}.views.requests.el.layout.annotations || []).map(a => a.text)")
    assert [x for x in labels if "→" in x] == ["prefill 0 → decode 0", "prefill 0 → decode 1", "prefill 0 → decode 2"]
    assert "replica 0" in labels  # run B's replicas
    transfer = page.js(f"{L}.views.requests.el.data.find(t => t.meta === 'transfer')")
    assert transfer["line"]["color"] != page.js(f"{L}.views.requests.el.data.find(t => t.meta === 'decode').line.color")
    assert len([x for x in transfer["x"] if x is not None]) == 2 * 48  # one segment a request
    hover = page.js(f"(() => {{ const id = {sv}.order[47]; "
                    f"return {L}.views.requests.hover({sv}.requests.get(id), {sv}, 'A '); }})()")
    assert "prefill on prefill 0" in hover and "KV transfer" in hover and "decode on decode 2" in hover, hover
    legend = page.js("document.getElementById('requests-legend')?.textContent || ''")
    assert "transfer" in legend and "kv_wait" in legend, legend
    assert page.problems == []


WIDE_EP = ("deployment.weight_dtype=fp8&deployment.ep=8&deployment.disaggregation.prefill.ep=8"
           "&deployment.disaggregation.decode.instances=1&deployment.disaggregation.decode.tp=1"
           "&deployment.disaggregation.decode.dp=8&workload.num_requests=16")


def test_a_too_wide_decode_pool_is_refused_with_the_limit_named(page: Any, server_url: str) -> None:
    """The full 1P3D with three decode engines of 8 DP ranks (~262k events) is refused before it simulates: the
    page says why, naming the work limit, and falls back to the default preset instead of loading forever."""
    full = WIDE_EP.replace("&deployment.disaggregation.decode.instances=1", "").replace("&workload.num_requests=16",
                                                                                       "")
    page.page.goto(f"{server_url}/?scenario=two-node-1p3d&{full}")
    page.wait("document.getElementById('story-line').textContent.includes('engine steps')", timeout_s=60)
    line = page.js("document.getElementById('story-line').textContent")
    assert "at most 10000" in line and "showing the default preset" in line, line


def test_a_decode_pool_of_dp_ranks_from_the_url(page: Any, server_url: str) -> None:
    """two-node-1p3d made 1P1D with the decode engine 8 DP ranks of tp 1 (wide EP), asked for in the URL (nested
    dotted fields): the lanes' groups name the decode engine and the rank that read each request's KV; the page
    raises no error."""
    page.page.goto(f"{server_url}/?scenario=two-node-1p3d&{WIDE_EP}")
    page.wait(f"{STORE}.scenario && {STORE}.scenario.deployment.disaggregation?.decode?.dp === 8 && "
              f"{STORE}.runs.length > 1 && {STORE}.main.summary.decode_dp === 8", timeout_s=180)
    page.wait(f"{L}.views.requests.el.layout?.annotations?.some(a => a.text.includes('rank'))", timeout_s=30)
    labels = [x for x in page.js(f"{L}.views.requests.el.layout.annotations.map(a => a.text)") if "→" in x]
    assert labels and all(x.startswith("prefill 0 → decode ") and " rank " in x for x in labels), labels
    assert {x.split(" ")[4] for x in labels} == {"0"} and len({x.split(" ")[6] for x in labels}) > 1  # its ranks
    assert page.problems == []


def test_break_even_view_in_the_sweep_panel(page: Any, server_url: str, tmp_path: Path) -> None:
    """A `plan --break-even --json` file loaded in the sweep panel: a heatmap over input length x request rate,
    each cell naming the winner (A or B) and its margin; hover gives both goodputs per GPU."""
    a, b = "colocated tp8", "1P1D tp4"
    cells = [{"input_len": n, "request_rate": r, "goodput_per_gpu": {a: ga, b: gb},
              "winner": a if ga >= gb else b, "margin": round(max(ga, gb) / min(ga, gb) - 1, 4)}
             for n, r, ga, gb in ((1000, 2.0, 0.25, 0.2), (1000, 8.0, 0.5, 0.6), (4000, 2.0, 0.2, 0.3),
                                  (4000, 8.0, 0.3, 0.6))]
    path = tmp_path / "be.json"
    path.write_text(json.dumps({"slo": {"ttft": 1500.0, "tpot": 40.0}, "deployments": [a, b], "cells": cells}))
    tours.open_preset(page, server_url, "pd-disaggregated-vs-colocated")
    page.page.get_by_test_id("sweep-file").set_input_files(str(path))
    page.wait("document.getElementById('sweep-plot').data?.[0]?.type === 'heatmap'")
    trace = page.js("(() => { const t = document.getElementById('sweep-plot').data[0]; "
                    "return {x: t.x, y: t.y, text: t.text, z: t.z}; })()")
    assert trace["x"] == ["2", "8"] and trace["y"] == ["1000", "4000"]
    assert trace["text"] == [["A +25%", "B +20%"], ["B +50%", "B +100%"]]
    assert trace["z"][0][0] == pytest.approx(0.25) and trace["z"][1][1] == pytest.approx(-1.0)
    assert "break-even" in page.js("document.getElementById('sweep-info').textContent")
    assert page.problems == []


def test_break_even_runs_from_the_panel(page: Any, server_url: str) -> None:
    """"run break-even" posts the grid's input lengths x request rates to the server: the preset's 1P1D (A) against
    its colocated compare run (B), a heatmap cell each naming the winner and its margin; a grid past the server's
    bound is refused in the panel with the server's reason; a preset without a compare run has no button."""
    tours.open_preset(page, server_url, "pd-disaggregated-vs-colocated")
    button = page.page.get_by_test_id("breakeven-run")
    assert button.is_visible()
    grid = page.page.get_by_test_id("sweep-grid")
    grid.fill("workload.input_len=1000,2000,4000; workload.request_rate=1,2,4")
    button.click()
    page.wait("!document.getElementById('sweep-error').classList.contains('hidden')", timeout_s=30)
    assert "9 cells" in page.js("document.getElementById('sweep-error').textContent")
    grid.fill("workload.input_len=1000; workload.request_rate=2,8")
    button.click()
    page.wait("document.getElementById('sweep-plot').data?.[0]?.type === 'heatmap'", timeout_s=120)
    trace = page.js("(() => { const t = document.getElementById('sweep-plot').data[0]; return {x: t.x, y: t.y, "
                    "text: t.text, hover: t.customdata}; })()")
    assert trace["x"] == ["2", "8"] and trace["y"] == ["1000"]
    assert all(t.startswith(("A ", "B ")) for t in trace["text"][0]), trace["text"]
    assert "1P1D tp4/tp4 over nvlink" in trace["hover"][0][0] and "colocated tp 8" in trace["hover"][0][0]
    info = page.js("document.getElementById('sweep-info').textContent")
    assert "A 1P1D tp4/tp4 over nvlink wins" in info and "of 2 cells" in info and "from the server" in info, info
    assert page.js("document.getElementById('sweep-error').classList.contains('hidden')")
    tours.open_preset(page, server_url, "decode-pulses")
    assert not button.is_visible()
    assert page.problems == ["console: Failed to load resource: the server responded with a status of 422 "
                             "(Unprocessable Entity)"]  # the refused grid's answer, and nothing else
