"""The kernel detail pane says where a kernel's price comes from: the measured table it was read from, or the analytic
model."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

L = "window.__layerscope"
STORE = f"{L}.store"


def test_the_detail_pane_names_the_measured_table_or_the_analytic_model(page, server_url: str) -> None:
    page.page.goto(f"{server_url}/?scenario=real-qwen3-235b-h200")
    page.wait(f"window.__layerscope && {STORE}.scenario && {STORE}.scenario.name === 'real-qwen3-235b-h200'")
    page.wait(f"{STORE}.main && {STORE}.main.kernel && {STORE}.main.kernel.length > 0", timeout_s=60)
    detail = page.page.get_by_test_id("detail")
    page.js(f"{L}.views.detail.pin({STORE}.main, {STORE}.main.kernel.find(k => k.stage === 'qkv_proj'))")
    text = detail.inner_text()
    assert "priced from" in text and "measured table: h200_sxm" in text and "gemm_perf.parquet" in text
    page.js(f"{L}.views.detail.pin({STORE}.main, {STORE}.main.kernel.find(k => k.stage === 'input_norm'))")
    assert "analytic model" in detail.inner_text()
    assert page.problems == []
