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
    # the request lanes name each group by its DP rank, and the run by its deployment in a few words
    page.wait(f"({L}.views.requests.el.layout || {{}}).annotations", timeout_s=60)
    labels = page.js(f"({L}.views.requests.el.layout.annotations || []).map(a => a.text)")
    assert {"rank 0", "rank 7"} <= set(labels) and not any(t.startswith("replica") for t in labels), labels
    assert "A deployment=dp 8 x tp 1, ep 8, fp8 weights, deepep_low_latency" in labels, labels
    assert page.problems == []


def test_the_panel_is_hidden_without_data_parallel_ranks(page, server_url: str) -> None:
    open_preset(page, server_url, "serving-64-h200-tp8")
    page.wait("!document.querySelector('[data-panel=dp-ranks]').offsetParent")
    assert page.problems == []


TIMELINE = "document.getElementById('timeline-plot')"
STEPMIX = "document.getElementById('stepmix-plot')"


def test_the_timeline_keeps_the_slowest_and_median_rank_and_unfolds_every_rank(page, server_url: str) -> None:
    open_preset(page, server_url, "dp-attention-ep8")
    page.wait(f"({TIMELINE}.layout || {{}}).yaxis && "
              f"{TIMELINE}.layout.yaxis.categoryarray.some(n => n.includes('folded'))", timeout_s=60)
    lanes = page.js(f"{TIMELINE}.layout.yaxis.categoryarray")  # run A's lanes ("A rank 3 · comm"), then B's (TP 8)
    ranks = sorted({n.split(" · ")[0] for n in lanes if n.startswith("A rank ")})
    assert len(ranks) == 2 and "A 6 ranks folded" in lanes  # the slowest and the median of eight
    assert any(n.startswith("B ") and "rank" not in n for n in lanes)  # the compare run's one engine, unfolded
    # the slowest kept is the rank busiest over the lockstep steps, summed here from the run's dp_step events
    busy = page.js(f"(() => {{ const b = {{}}; for (const e of {STORE}.main.dp_step)"
                   " e.busy_us.forEach((v, r) => {{ b[r] = (b[r] || 0) + v; }}); return b; })()")
    slowest = max(busy, key=lambda i: (busy[i], -int(i)))
    ticks = page.js(f"{TIMELINE}.layout.yaxis.ticktext")
    assert any(f"A rank {slowest} · " in t and "(slowest)" in t for t in ticks)
    drawn = page.js(f"[...new Set({TIMELINE}.data.flatMap(t => (t.y || []).filter(v => v))"
                    ".map(v => v.split(' · ')[0]))]")
    assert sorted(d for d in drawn if d.startswith("A rank ")) == ranks  # the folded ranks' launches are not drawn
    button = page.page.get_by_test_id("timeline-unfold")
    assert button.is_visible() and button.inner_text() == "unfold ranks"
    button.click()
    page.wait(f"!{TIMELINE}.layout.yaxis.categoryarray.some(n => n.includes('folded'))")
    every = {n.split(" · ")[0] for n in page.js(f"{TIMELINE}.layout.yaxis.categoryarray") if n.startswith("A ")}
    assert every == {f"A rank {r}" for r in range(8)}  # a lane group per DP rank
    assert button.inner_text() == "fold ranks"
    assert page.problems == []


def test_the_step_composition_draws_a_row_per_rank_or_the_rank_picked(page, server_url: str) -> None:
    open_preset(page, server_url, "dp-attention-ep8")
    page.wait(f"({STEPMIX}.data || []).some(t => t.meta === 'rank 7 prefill')", timeout_s=60)
    per_rank = page.js(f"(() => {{ const c = {{}}; for (const s of {L}.serving.steps)"
                       " c[s.inst] = (c[s.inst] || 0) + 1; return c; })()")
    assert sorted(per_rank) == [str(r) for r in range(8)]
    bars = page.js(f"Object.fromEntries({STEPMIX}.data.filter(t => t.meta.endsWith(' decode'))"
                   ".map(t => [t.meta, [t.yaxis, t.x.length]]))")
    assert bars["rank 0 decode"][0] == "y" and bars["rank 1 decode"][0] == "y3" and bars["rank 7 decode"][0] == "y15"
    # each row draws its own rank's steps (thinned to a bar per pixel past 1500), none of another's
    assert all(0 < bars[f"rank {r} decode"][1] <= per_rank[str(r)] for r in range(8))
    widths = page.js(f"{STEPMIX}.data.find(t => t.meta === 'rank 0 decode').width.slice(0, 50)")
    assert min(widths) > 0  # lockstep ranks share each start: bars still span their step (not zero wide)
    # the request lanes outline every rank's step at the cursor, not one engine's
    mid = page.js(f"{L}.serving.steps[Math.floor({L}.serving.steps.length / 2)].start")
    page.js(f"(() => {{ const s = document.querySelector('[data-testid=scrubber]'); s.value = {mid};"
            " s.dispatchEvent(new Event('change')); })()")
    # the cursor's own time: the scrubber's value goes through the axis' units, so it may land a rounding before
    # `mid`, a step boundary of lockstep ranks (then the steps before it are the ones at the cursor)
    page.wait(f"Math.abs({STORE}.t - {mid}) < 1e-6 * {mid}")
    now = f"{L}.serving.stepsAt({STORE}.t)"
    want = page.js(f"{now}.flatMap(s => s.ids).sort((a, b) => a - b)")
    ranks_now = page.js(f"new Set({now}.filter(s => s.ids.length).map(s => s.inst)).size")
    assert ranks_now > 1
    page.wait(f"JSON.stringify({L}.views.requests.highlighted.slice().sort((a, b) => a - b)) === "
              f"JSON.stringify({want})")
    picker = page.page.get_by_test_id("stepmix-instance")
    assert picker.is_visible()
    assert page.js("[...document.querySelector('[data-testid=stepmix-instance]').options].map(o => o.text)")[1:] == [
        f"rank {r}" for r in range(8)]
    picker.select_option("3")
    page.wait(f"{STEPMIX}.data.every(t => !t.meta.startsWith('rank ') || t.meta.startsWith('rank 3 '))")
    rows = page.js(f"{STEPMIX}.data.filter(t => t.type === 'bar').map(t => [t.meta, t.yaxis])")
    assert sorted(rows) == [["B decode", "y3"], ["B prefill", "y3"], ["rank 3 decode", "y"], ["rank 3 prefill", "y"]]
    assert page.problems == []


def test_the_deployment_card_draws_the_ranks_and_its_form_sets_dp_and_nodes(page, server_url: str) -> None:
    open_preset(page, server_url, "dp-attention-ep8")
    node = page.page.get_by_test_id("replica-node")
    page.wait("document.querySelectorAll('[data-testid=replica-node] .replica-gpus i').length === 8", timeout_s=60)
    ranks = page.js("[...document.querySelectorAll('[data-testid=replica-node] .replica-gpus i')]"
                    ".map(n => n.dataset.rank)")
    assert ranks == [str(r) for r in range(8)]  # one GPU per DP rank, tp 1
    assert "8 DP ranks" in node.inner_text() and "8 of 8 GPUs" in node.inner_text()
    title = page.js("document.querySelector('[data-testid=replica-node] .replica-gpus i[data-rank=\"1\"]').title")
    assert "experts 16-31" in title  # 128 experts over 8 GPUs, from the run's dp_group event
    form = "#deployment-form"
    assert page.page.locator(f"{form} input[name=dp]").input_value() == "8"
    assert page.js("document.querySelector('#deployment-form select[name=ep]').disabled")  # ep = dp x tp
    page.page.locator(f"{form} input[name=dp]").fill("16")
    page.page.get_by_test_id("deployment-apply").click()
    page.wait("document.getElementById('deployment-error').textContent.includes('nodes=2')", timeout_s=60)
    nodes = "document.querySelector('#deployment-form input[name=nodes]')"
    assert page.js(f"{nodes}.getAttribute('aria-invalid')") == "true"
    assert page.js(f"{STORE}.scenario.deployment.dp") == 8  # the run on screen stays
    page.page.locator(f"{form} input[name=dp]").fill("1")  # EPLB without DP ranks: refused, its input marked
    page.page.locator(f"{form} input[name=eplb]").fill("8")
    page.page.get_by_test_id("deployment-apply").click()
    page.wait("document.getElementById('deployment-error').textContent.includes('needs dp > 1')", timeout_s=60)
    eplb = "document.querySelector('#deployment-form input[name=eplb]')"
    assert page.js(f"{eplb}.getAttribute('aria-invalid')") == "true"
    page.page.locator(f"{form} input[name=eplb]").fill("")
    page.page.locator(f"{form} input[name=dp]").fill("4")
    page.page.locator(f"{form} select[name=all2all_backend]").select_option("pplx")
    page.page.get_by_test_id("deployment-apply").click()
    page.wait(f"{STORE}.scenario.deployment.dp === 4 && "
              "document.querySelectorAll('[data-testid=replica-node] .replica-gpus i[data-replica=\"\"]').length === 4",
              timeout_s=120)
    assert page.js(f"{STORE}.scenario.deployment.all2all_backend") == "pplx"
    assert page.problems == []


def test_sixteen_ranks_on_two_nodes_open_folded_and_on_one_ranks_steps(page, server_url: str) -> None:
    open_preset(page, server_url, "two-nodes-wide-ep")
    page.wait(f"({TIMELINE}.layout || {{}}).yaxis && "
              f"{TIMELINE}.layout.yaxis.categoryarray.includes('A 14 ranks folded')", timeout_s=60)
    # the step composition opens on one rank of sixteen (rows for all of them on request)
    page.wait(f"({STEPMIX}.data || []).some(t => t.meta === 'rank 0 prefill')", timeout_s=60)
    assert page.page.get_by_test_id("stepmix-instance").input_value() == "0"
    assert not page.js(f"{STEPMIX}.data.some(t => t.meta.startsWith('rank 1 '))")
    page.page.get_by_test_id("stepmix-instance").select_option("all")
    page.wait(f"{STEPMIX}.data.some(t => t.meta === 'rank 15 prefill')")
    # the deployment card: two rows of eight GPUs, one DP rank each
    rows = page.js("[...document.querySelectorAll('[data-testid=replica-node] .replica-row')]"
                   ".map(r => [r.querySelector('.node-name').textContent, r.querySelectorAll('i').length])")
    assert rows == [["node 0", 8], ["node 1", 8]]
    assert page.problems == []
