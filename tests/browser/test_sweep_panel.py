"""Issue 17 in headless Chromium: each preset's sweep panel opens with a grid that runs, labels its points, and
is hidden where no sweep applies."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.browser

L = "window.__layerscope"
STORE = f"{L}.store"


def open_preset(page: Any, url: str, name: str) -> None:
    page.page.goto(f"{url}/?scenario={name}")
    page.wait(f"{L} && {STORE}.scenario && {STORE}.scenario.name === '{name}' && {STORE}.runs.length > 0", timeout_s=90)


@pytest.mark.parametrize(("name", "points"), [("serving-long-prompt-itl", 4), ("chunk-size-sweep-numa", 4)])
def test_the_panel_opens_with_the_presets_grid_which_runs_with_labelled_points(page, server_url: str, name: str,
                                                                               points: int) -> None:
    open_preset(page, server_url, name)
    sweep = page.js(f"{STORE}.scenario.sweep")
    assert page.page.get_by_test_id("sweep").is_visible()
    expected = "; ".join(f"{k}={','.join(str(v) for v in vs)}" for k, vs in sweep["grid"].items())
    assert page.page.get_by_test_id("sweep-grid").input_value() == expected
    page.page.get_by_test_id("sweep-run").click()
    page.wait("(document.getElementById('sweep-plot').data || []).length > 0", timeout_s=120)
    assert not page.page.get_by_test_id("sweep-error").is_visible()
    trace = page.js("document.getElementById('sweep-plot').data.find(t => t.meta === 'points')")
    assert len(trace["x"]) == points and len(trace["text"]) == points
    field = next(iter(sweep["grid"]))
    short = field.split(".")[-1]
    assert trace["text"] == [f"{short}={v}" for v in sweep["grid"][field]]  # each point says its setting
    labels = page.js("[...document.querySelectorAll('#sweep-plot .textpoint')].map(n => n.textContent)")
    assert sorted(labels) == sorted(trace["text"])  # drawn on the plot, not only in the hover
    if sweep.get("metric"):
        assert page.js("document.getElementById('sweep-plot').layout.yaxis.title.text").startswith("prefill")
        ticks = page.js("[...document.querySelectorAll('#sweep-plot .xtick text')].map(n => n.textContent)")
        assert ticks == [str(v) for v in sweep["grid"][field]]  # the grid's values, not Plotly's 1000, 2, 3 ... 9
    assert page.problems == []


def test_the_panel_is_hidden_where_no_sweep_applies(page, server_url: str) -> None:
    open_preset(page, server_url, "decode-pulses")
    page.wait(f"{STORE}.scenario.sweep === null || {STORE}.scenario.sweep === undefined")
    page.wait("!document.querySelector('[data-panel=sweep]').offsetParent")
    open_preset(page, server_url, "serving-64-h200-tp8")
    page.wait("!!document.querySelector('[data-panel=sweep]').offsetParent")
    assert page.page.get_by_test_id("sweep-grid").input_value() == "workload.max_concurrency=16,32,64"
    assert page.problems == []
