"""Issue 17 in headless Chromium: the claims panel leads with what concerns the open preset (a serving run's SLO
figures), folds the rest away, and breaks no header mid-word."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.browser

L = "window.__layerscope"
STORE = f"{L}.store"
HEADERS_ON_ONE_LINE = """[...document.querySelectorAll('#claims-body th')].filter(th => th.offsetParent)
  .every(th => th.getClientRects().length === 1
    && th.offsetHeight < 2 * (parseFloat(getComputedStyle(th).lineHeight) || 16))"""


def open_preset(page: Any, url: str, name: str) -> None:
    page.page.goto(f"{url}/?scenario={name}")
    page.wait(f"{L} && {STORE}.scenario && {STORE}.scenario.name === '{name}' && {STORE}.runs.length > 0", timeout_s=90)
    page.wait(f"{STORE}.detailsReady && document.querySelector('#claims-body table')")  # the claims follow


def test_a_serving_pair_shows_its_slo_figures_and_folds_the_articles_claims(page, server_url: str) -> None:
    open_preset(page, server_url, "serving-long-prompt-itl")
    slo = page.page.get_by_test_id("slo-table")
    assert slo.is_visible()
    text = slo.inner_text()
    summary = page.js(f"{STORE}.main.summary")
    for name in ("TTFT", "TPOT", "ITL"):
        assert name in text
    assert f"{summary['p99_itl_ms']:.0f}" in text  # the run's own p99 ITL, whole model (ms)
    sla = page.js(f"{STORE}.scenario.sla_ms")
    missed = page.js("document.querySelector('[data-slo=itl]').classList.contains('off')")
    assert missed == (summary["p99_itl_ms"] > sla)
    assert page.page.locator("#claims-body th.b").count() >= 2  # run B's p50 and p99 beside A's
    assert not page.page.get_by_test_id("claims-table").count()  # no article claim concerns a serving run
    folded = page.page.get_by_test_id("claims-folded")
    assert folded.is_visible() and not page.page.get_by_test_id("claims-folded-table").is_visible()
    folded.locator("summary").click()
    assert page.page.get_by_test_id("claims-folded-table").is_visible()
    assert page.js(HEADERS_ON_ONE_LINE)
    assert page.problems == []


@pytest.mark.parametrize("width", [1600, 390])
def test_a_one_request_preset_leads_with_its_claims_and_no_header_breaks(browser, server_url: str, width: int) -> None:
    from browser_helpers import Page

    ctx = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = Page(ctx.new_page())
        open_preset(page, server_url, "decode-pulses")
        claims = page.js(f"{STORE}.loaded.claims")
        shown = page.js("[...document.querySelectorAll('[data-testid=claims-table] tbody tr')].length")
        folded = page.js("[...document.querySelectorAll('[data-testid=claims-folded-table] tbody tr')].length")
        assert shown == sum(c["concerns"] for c in claims) > 0 and folded == len(claims) - shown > 0
        assert not page.page.get_by_test_id("slo-table").count()
        assert page.js(HEADERS_ON_ONE_LINE)
        assert page.js("document.documentElement.scrollWidth <= window.innerWidth + 1")  # no page overflow
        assert page.problems == []
    finally:
        ctx.close()


def test_a_two_run_claims_table_fits_its_panel_at_1280_with_each_verdict_shown(browser, server_url: str) -> None:
    from browser_helpers import Page

    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    try:
        page = Page(ctx.new_page())
        open_preset(page, server_url, "article-vs-real")
        page.page.locator(".claims-rest summary").click()
        widths = page.js("[...document.querySelectorAll('#claims-body table')]"
                         ".map(t => [t.scrollWidth, t.parentElement.clientWidth])")
        assert widths and all(w <= room + 1 for w, room in widths), widths  # no column scrolled out of the panel
        rows = page.js("[...document.querySelectorAll('[data-testid=claims-table] tbody tr')]"
                       ".map(r => [r.dataset.verdict, r.cells[0].innerText])")
        assert rows and all(v.split("-")[0] in text for v, text in rows), rows  # the verdict sits under its claim
        assert page.js(HEADERS_ON_ONE_LINE)
        assert page.problems == []
    finally:
        ctx.close()
