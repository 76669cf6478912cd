"""Issue 21 in headless Chromium: the disaggregated preset's tour lands on its moments; the KV transfers are a
kv_transfer lane of the timeline; every request's TTFT (its first token with the KV, transfer_done) is counted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser
_spec = importlib.util.spec_from_file_location("tours", Path(__file__).with_name("test_tours.py"))
assert _spec and _spec.loader
tours = importlib.util.module_from_spec(_spec)
sys.modules["tours"] = tours
_spec.loader.exec_module(tours)

L = "window.__layerscope"
STORE = f"{L}.store"


@pytest.mark.parametrize("name", ["pd-disaggregated-vs-colocated", "two-node-1p3d"])
def test_disaggregated_tour_transfer_lane_and_ttft(page: Any, server_url: str, name: str) -> None:
    tours.open_preset(page, server_url, name)
    assert page.js(f"{STORE}.main.kernel.some(k => k.stream === 'kv_transfer')")
    assert not page.js(f"{STORE}.runs.find(r => r.role === 'compare').kernel.some(k => k.stream === 'kv_transfer')")
    n = page.js(f"{STORE}.scenario.workload.num_requests")
    page.wait(f"{L}.serving.lat.ttft.length === {n}", timeout_s=60)  # transfer_done gives each its first token
    tours.walk(page, name)
