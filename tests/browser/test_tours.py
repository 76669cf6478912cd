"""Issue 17 in headless Chromium: a tour step lands on its moment (forward, one moment per step), zooms the shared
axis to its window and highlights panels the run shows; screenshots of a serving tour at three sizes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "tours"
L = "window.__layerscope"
STORE = f"{L}.store"


def open_preset(page: Any, url: str, name: str) -> None:
    page.page.goto(f"{url}/?scenario={name}")
    page.wait(f"{L} && {STORE}.scenario && {STORE}.scenario.name === '{name}' && {STORE}.runs.length > 0 && "
              f"{STORE}.detailsReady", timeout_s=90)  # the tour's checks come after the first screen
    page.wait(f"{L}.stats.raf > 5")


def walk(page: Any, name: str, shots: Path | None = None) -> list[dict[str, Any]]:
    """Click through the whole tour; at each step check its moment, its zoom and its panels."""
    results = page.js(f"{STORE}.loaded.tour_results")
    steps = page.js(f"{STORE}.scenario.tour")
    assert results and len(results) == len(steps)
    assert all(r["passed"] and not r["error"] for r in results), [r["error"] for r in results]
    times = [r["t_us"] for r in results]
    assert all(b > a for a, b in zip(times, times[1:], strict=False)), times  # forward, one moment per step
    for i, (step, r) in enumerate(zip(steps, results, strict=True)):
        page.page.get_by_test_id("tour-next").click()
        page.wait(f"document.getElementById('tour-body').textContent.includes({step['title']!r})", timeout_s=30)
        page.wait(f"Math.abs({STORE}.t - {r['t_us']}) < 1e-3 * Math.max(1, {r['t_us']})", timeout_s=30)
        page.wait("document.getElementById('tour-check')?.isConnected !== false && "
                  "!!document.querySelector('[data-testid=tour-check]')", timeout_s=30)  # the moment is reached
        rng = page.js(f"{STORE}.axis.range")
        if r["zoom"]:
            x0, x1 = r["zoom"]
            assert rng is not None and abs(rng[0] - x0) < 1e-6 * max(1, x1) and abs(rng[1] - x1) < 1e-6 * max(1, x1)
            assert rng[0] <= r["t_us"] <= rng[1]  # the moment is in the window
        else:
            assert rng is None  # no window: the whole run
        lit = page.js("[...document.querySelectorAll('.panel.highlight')].map(n => n.dataset.panel).sort()")
        assert lit == sorted(step["highlight"]), (i, lit)
        for panel in step["highlight"]:  # each highlighted panel is on screen, not collapsed or hidden
            assert page.page.locator(f"[data-panel='{panel}']").is_visible(), panel
        if shots is not None:
            shots.mkdir(parents=True, exist_ok=True)
            page.page.screenshot(path=str(shots / f"{name}-step{i + 1}.png"))
    assert page.problems == []
    return results


@pytest.mark.parametrize("name", ["serving-long-prompt-itl", "serving-kv-preemption", "serving-64-h200-tp8",
                                  "decode-pulses", "dp-attention-ep8", "two-nodes-wide-ep"])
def test_a_tour_lands_on_each_moment_window_and_panel(page, server_url: str, name: str) -> None:
    open_preset(page, server_url, name)
    results = walk(page, name)
    if name.startswith("serving"):  # the serving panels, never the decode-latency panel these runs hide
        lit = {p for s in page.js(f"{STORE}.scenario.tour") for p in s["highlight"]}
        assert lit & {"requests", "step-mix", "latency-dist"} and "latency" not in lit
        assert not page.page.locator("[data-panel='latency']").is_visible()
    if name == "decode-pulses":  # the tallest bar: the switch-over step is in the zoomed window of step 2
        x0, x1 = results[1]["zoom"]
        first = page.js(f"{STORE}.main.decode_step[0]")
        assert x0 <= first["t_us"] <= x1
    page.page.get_by_test_id("tour-next").click()  # finish: the whole run again
    page.wait(f"{STORE}.axis.range === null")


@pytest.mark.parametrize(("name", "size"), [("serving-long-prompt-itl", (1600, 1000)),
                                           ("serving-long-prompt-itl", (1280, 720)),
                                           ("serving-long-prompt-itl", (390, 844)),
                                           ("serving-kv-preemption", (1600, 1000))])
def test_screenshots_of_a_serving_tour(browser, server_url: str, name: str, size: tuple[int, int]) -> None:
    from browser_helpers import Page

    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]})
    try:
        page = Page(ctx.new_page())
        open_preset(page, server_url, name)
        shots = ARTIFACTS / f"{size[0]}x{size[1]}"
        results = walk(page, name, shots)
        assert len(list(shots.glob(f"{name}-step*.png"))) == len(results)
    finally:
        ctx.close()
