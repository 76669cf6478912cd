"""Issue 20 in headless Chromium: the DP ranks panel of dp-attention-ep8 (one row per rank, the experts' load per
GPU, the all-to-all's share) on the run's time axis, and hidden for a run without data-parallel ranks."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.browser

L = "window.__layerscope"
STORE = f"{L}.store"
PLOT = "document.getElementById('dpranks-plot')"


def open_preset(page: Any, url: str, name: str) -> None:
    page.page.goto(f"{url}/?scenario={name}")
    loaded = f"{L} && {STORE}.scenario && {STORE}.scenario.name === '{name}' && {STORE}.runs.length > 0"
    page.wait(loaded, timeout_s=120)


def test_the_dp_ranks_panel_draws_each_rank_and_each_gpus_experts(page, server_url: str) -> None:
    open_preset(page, server_url, "dp-attention-ep8")
    page.wait(f"({PLOT}.data || []).length === 3", timeout_s=60)
    assert page.page.get_by_test_id("dp-ranks").is_visible()
    # meta -> [type, rows of z, columns of x]
    traces = {t[0]: t[1:] for t in page.js(f"{PLOT}.data.map(t => [t.meta, t.type, (t.z || []).length, t.x.length])")}
    steps = page.js(f"{STORE}.main.dp_step.length")
    assert steps > 100
    assert traces["busy"][:2] == ["heatmap", 8] and traces["experts"][:2] == ["heatmap", 8]  # 8 ranks, 8 GPUs
    assert 0 < traces["busy"][2] == traces["a2a"][2] <= min(steps, 400)  # a column per (thinned) step
    busiest = page.js(f"Math.max(...{PLOT}.data[0].z.map(r => Math.max(...r)))")
    assert busiest == pytest.approx(1.0)  # the slowest rank of a step is busy all of it
    info = page.js("document.getElementById('dpranks-info').textContent")
    assert info.startswith("8 ranks") and "all-to-all" in info
    # on the run's one time axis: the panel's x range is the timeline's
    timeline = page.js("document.getElementById('timeline-plot').layout.xaxis.range")
    assert page.js(f"{PLOT}.layout.xaxis.range") == timeline
    assert page.problems == []


def test_the_panel_is_hidden_without_data_parallel_ranks(page, server_url: str) -> None:
    open_preset(page, server_url, "serving-64-h200-tp8")
    page.wait("!document.querySelector('[data-panel=dp-ranks]').offsetParent")
    assert page.problems == []
