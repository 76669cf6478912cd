"""Issue 20 in headless Chromium: the replicas-prefix-router preset, its tour landing on each moment, the request
lanes grouped and coloured by the replica that served each request, and the deployment card's node drawing."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

_spec = importlib.util.spec_from_file_location("tours_walk", Path(__file__).with_name("test_tours.py"))
assert _spec and _spec.loader
tours = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tours)  # its open_preset and walk: the tour checks every preset's tour gets

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
