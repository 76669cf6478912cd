"""Issue 20 in headless Chromium: the replicas-prefix-router preset, its tour landing on each moment, the request
lanes grouped and coloured by the replica that served each request, and the deployment card's node drawing."""

from __future__ import annotations

import sys
from typing import Any

import pytest

pytestmark = pytest.mark.browser

# test_tours' open_preset and walk: the checks every preset's tour gets
tours = sys.modules["browser_helpers"].sibling("test_tours")

L = "window.__layerscope"
NAME = "replicas-prefix-router"


def test_the_replicas_preset_tour_lanes_and_node(page: Any, server_url: str) -> None:
    tours.open_preset(page, server_url, NAME)
    tours.walk(page, NAME)
    # lanes: grouped by replica (non-decreasing instance down the rows), all four replicas present
    instances = page.js(f"{L}.serving.order.map(id => {L}.serving.requests.get(id).instance)")
    assert len(instances) == 160 and sorted(set(instances)) == [0, 1, 2, 3]
    assert instances == sorted(instances)
    bands = page.js(f"({L}.views.requests.el.layout.shapes || []).filter(s => s.type === 'rect' && s.x1 === 0.008)"
                    ".map(s => s.fillcolor)")
    assert len(bands) >= 4 and len(set(bands)) >= 4  # run A's four replicas, each its colour (and run B's)
    labels = page.js(f"({L}.views.requests.el.layout.annotations || []).map(a => a.text)")
    assert {"replica 0", "replica 3"} <= set(labels)
    # the deployment card: the node's 8 GPUs, 4 of them one replica each, 4 free
    node = page.page.get_by_test_id("replica-node")
    assert node.is_visible()
    owners = page.js("[...document.querySelectorAll('[data-testid=replica-node] .replica-gpus i')]"
                     ".map(n => n.dataset.replica)")
    assert owners == ["0", "1", "2", "3", "", "", "", ""]
    assert "prefix_cache_aware" in node.inner_text() and "4 of 8 GPUs" in node.inner_text()
    # the card's form: replicas past the node are refused naming the GPUs, the run on screen stays; 2 replicas load
    form = "#deployment-form"
    assert page.page.locator(f"{form} input[name=replicas]").input_value() == "4"
    page.page.locator(f"{form} input[name=replicas]").fill("9")
    page.page.get_by_test_id("deployment-apply").click()
    page.wait("document.getElementById('deployment-error').textContent.includes('need 9 GPUs')", timeout_s=60)
    assert page.js(f"{L}.store.scenario.deployment.replicas") == 4
    page.page.locator(f"{form} input[name=replicas]").fill("2")
    page.page.locator(f"{form} select[name=router]").select_option("round_robin")
    page.page.get_by_test_id("deployment-apply").click()
    page.wait(f"{L}.store.scenario.deployment.replicas === 2 && "
              "document.querySelectorAll('[data-testid=replica-node] [data-replica=\"1\"]').length === 1", timeout_s=90)
    assert "deployment.replicas=2" in page.page.url and "deployment.router=round_robin" in page.page.url
    assert page.problems == []


TIMELINE = "document.getElementById('timeline-plot')"
STEPMIX = "document.getElementById('stepmix-plot')"


def test_each_replica_gets_a_lane_group_and_a_step_composition_row(page: Any, server_url: str) -> None:
    tours.open_preset(page, server_url, NAME)
    page.wait(f"({TIMELINE}.layout || {{}}).yaxis && "
              f"{TIMELINE}.layout.yaxis.categoryarray.some(n => n.includes('steps'))", timeout_s=60)
    button = page.page.get_by_test_id("timeline-unfold")
    assert button.inner_text() == "unfold replicas"
    button.click()
    page.wait(f"{TIMELINE}.layout.yaxis.categoryarray"
              ".filter(n => n.startsWith('A ') && n.endsWith(' · steps')).length === 4")
    lanes = page.js(f"{TIMELINE}.layout.yaxis.categoryarray")
    assert [n for n in lanes if n.startswith("A ") and n.endswith("steps")] == [
        f"A replica {i} · steps" for i in range(4)]
    assert "A replica 0 · compute" in lanes  # replica 0's kernels (the only replica whose kernels are recorded)
    # each replica's steps lane draws that replica's steps, and only its own
    steps = page.js(f"(() => {{ const c = {{}}; for (const e of {L}.store.main.step)"
                    " c[e.instance] = (c[e.instance] || 0) + 1; return c; })()")
    drawn = page.js(f"(() => {{ const c = {{}}; for (const t of {TIMELINE}.data"
                    ".filter(t => (t.meta || '').endsWith('-steps')))"
                    " for (const y of t.y) if (y && y.startsWith('A ')) c[y] = (c[y] || 0) + 0.5;"
                    " return c; })()")
    for i in range(4):
        assert 0 < drawn[f"A replica {i} · steps"] <= steps[str(i)]  # a bar a step (one a pixel where they crowd)
    legend = page.js("[...document.querySelectorAll('#timeline-legend [data-key=steps]')].map(k => k.textContent)")
    assert legend == ["prefill step", "decode step"]  # the steps lanes' two colours
    button.click()  # folded again: the slowest and the median replica, replica 0's kernels kept
    page.wait(f"{TIMELINE}.layout.yaxis.categoryarray.some(n => n.includes('folded'))")
    # the step composition: a row per replica on the shared time axis (run B's below)
    page.wait(f"({STEPMIX}.data || []).some(t => t.meta === 'replica 3 prefill')", timeout_s=60)
    axes = page.js(f"Object.fromEntries({STEPMIX}.data.filter(t => t.type === 'bar' && t.meta.endsWith('prefill'))"
                   ".map(t => [t.meta, t.yaxis]))")
    assert [axes[f"replica {i} prefill"] for i in range(4)] == ["y", "y3", "y5", "y7"]
    assert page.js(f"{STEPMIX}.layout.xaxis.range") == page.js(f"{TIMELINE}.layout.xaxis.range")
    assert page.problems == []
