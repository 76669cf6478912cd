"""frontend/static/js/serving.js under Node: the lanes, token times and latency figures it derives from the
request and step events of a known run (tests/browser/servingfake.py), checked against figures computed here
independently from the same events."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from layerscope.scenario import ScenarioSpec

ROOT = Path(__file__).resolve().parents[2]
JS = ROOT / "frontend" / "static" / "js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (the browser tests cover the same code)")

_spec = importlib.util.spec_from_file_location("servingfake", ROOT / "tests" / "browser" / "servingfake.py")
assert _spec and _spec.loader
servingfake = importlib.util.module_from_spec(_spec)
sys.modules["servingfake"] = servingfake
_spec.loader.exec_module(servingfake)

SCRIPT = """
import { ServingState, percentile } from "%(url)s";
let text = "";
for await (const chunk of process.stdin) text += chunk;
const events = JSON.parse(text);
const store = { ver: {}, listeners: [], bump(k) { this.ver[k] = (this.ver[k] || 0) + 1; } };
const sv = new ServingState(store);
for (let i = 0; i < events.length; i += %(frame)d) {
  for (const fn of store.listeners) fn({ events: events.slice(i, i + %(frame)d), reset: false });
}
const end = events[events.length - 1].t_us;
const out = { requests: {}, stats: {}, ver: store.ver, p: percentile([1, 2, 3, 4], 0.5) };
for (const id of sv.order) {
  const r = sv.requests.get(id);
  out.requests[id] = {
    tokens: r.tokens.length, ttft: r.ttftMs, tpot: r.tpotMs, e2el: r.e2elMs, preemptions: r.preemptions,
    states: [...new Set(sv.lanes(r, end).map((s) => s.state))].sort(), chunks: (r.chunks || []).map((c) => c.n),
  };
}
for (const k of ["ttft", "tpot", "itl", "e2el"]) {
  const s = sv.stats(k);
  out.stats[k] = { n: s.n, p50: s.p50, p99: s.p99 };
}
out.kv = sv.kv.used.length;
const fo = sv.finishOrder();
const by = [fo.t[3], fo.t[3] - 1e-6].map((t) => sv.finishedBy(t));
out.finish = { t: fo.t, ends: fo.ends, p50: fo.p50.ttft, p99: fo.p99.itl, by };
console.log(JSON.stringify(out));
"""


def run_js(events: list[dict[str, Any]], frame: int) -> dict[str, Any]:
    script = SCRIPT % {"url": (JS / "serving.js").as_uri(), "frame": frame}
    proc = subprocess.run(
        [NODE, "--input-type=module", "-e", script], input=json.dumps(events), capture_output=True, text=True,
        timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def model_us(steps: list[dict[str, Any]], t: float) -> float:
    """Whole-model time of timeline time t: every step stretched to its model duration (computed apart from JS)."""
    return t + sum(min(t - s["start_us"], s["dur_us"]) * (s["model_dur_us"] / s["dur_us"] - 1)
                   for s in steps if s["start_us"] < t)


@pytest.fixture(scope="module")
def run() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    result = servingfake.fake_serving(ScenarioSpec())
    events = sorted((e.model_dump(mode="json") for e in result.events), key=lambda e: e["t_us"])
    return events, run_js(events, frame=7)


def test_every_request_gets_exactly_its_output_tokens_through_a_preemption(run) -> None:
    events, out = run
    assert len(out["requests"]) == len(servingfake.INPUTS)
    for rid, r in out["requests"].items():
        assert r["tokens"] == servingfake.OUTPUTS[int(rid)], rid
    preempted = [rid for rid, r in out["requests"].items() if r["preemptions"]]
    assert preempted == ["10"]
    assert out["requests"]["10"]["states"] == ["decode", "preempted", "prefill", "recompute", "waiting"]
    assert out["requests"]["0"]["states"] == ["decode", "prefill", "waiting"]
    # prefill chunks: the 130-token prompt of request 2 took more than one step
    assert sum(out["requests"]["2"]["chunks"]) == 130 and len(out["requests"]["2"]["chunks"]) > 1
    assert out["stats"]["itl"]["n"] == sum(servingfake.OUTPUTS) - len(servingfake.OUTPUTS)
    assert out["kv"] == sum(e["kind"] == "banks" for e in events)
    assert out["p"] == 2.5  # numpy's linear percentile


def test_latencies_are_whole_model_as_vllm_defines_them(run) -> None:
    events, out = run
    steps = [e for e in events if e["kind"] == "step"]
    req = [e for e in events if e["kind"] == "request"]
    for rid, r in out["requests"].items():
        mine = {e["what"]: e["t_us"] for e in req if e["request_id"] == int(rid) and e["what"] != "preempted"}
        ttft = (model_us(steps, mine["first_token"]) - model_us(steps, mine["arrive"])) / 1e3
        e2el = (model_us(steps, mine["finished"]) - model_us(steps, mine["arrive"])) / 1e3
        assert r["ttft"] == pytest.approx(ttft, rel=1e-9), rid
        assert r["e2el"] == pytest.approx(e2el, rel=1e-9), rid
        assert r["tpot"] == pytest.approx((e2el - ttft) / (servingfake.OUTPUTS[int(rid)] - 1), rel=1e-9), rid
    ttfts = sorted(r["ttft"] for r in out["requests"].values())
    assert out["stats"]["ttft"]["n"] == 12
    assert out["stats"]["ttft"]["p50"] == pytest.approx((ttfts[5] + ttfts[6]) / 2)


def test_frames_of_any_size_give_the_same_state(run) -> None:
    events, out = run
    one = run_js(events, frame=1)
    assert one["requests"] == out["requests"] and one["stats"] == out["stats"]


@pytest.mark.parametrize("preset", ["serving-kv-preemption", "serving-long-prompt-itl"])
def test_the_views_figures_equal_the_servers_summary_on_a_real_run(preset: str) -> None:
    """The histograms' TTFT / TPOT / ITL (from events, in the browser) match the engine's vllm-bench summary."""
    from layerscope.runtime.engine import simulate
    from layerscope.scenario import load_preset

    result = simulate(load_preset(preset).model_copy(update={"compare": None}))
    events = sorted((e.model_dump(mode="json") for e in result.events), key=lambda e: e["t_us"])
    kinds = {"request", "step"}
    out = run_js([e for e in events if e["kind"] in kinds] + [events[-1]], frame=500)
    s = result.summary
    assert out["stats"]["ttft"]["n"] == s["completed"] == len(out["requests"])
    for key in ("ttft", "tpot", "itl"):
        assert out["stats"][key]["p50"] == pytest.approx(s[f"median_{key}_ms"], rel=1e-3), key
        assert out["stats"][key]["p99"] == pytest.approx(s[f"p99_{key}_ms"], rel=1e-3), key
    assert sum(r["preemptions"] for r in out["requests"].values()) == s["num_preemptions"]
    want = {str(e["request_id"]): e["output_len"] for e in events if e["kind"] == "request"}
    assert {rid: r["tokens"] for rid, r in out["requests"].items()} == want  # every token counted, none twice


def test_finish_order_gives_each_finished_prefix_its_values_and_exact_percentiles(run) -> None:
    """What the histograms show at a cursor: the requests finished by then, their values and percentiles."""
    events, out = run
    fin = sorted((e["t_us"], e["request_id"]) for e in events if e["kind"] == "request" and e["what"] == "finished")
    f = out["finish"]
    assert f["t"] == [t for t, _ in fin]
    assert f["by"] == [4, 3]  # at the 4th finish: 4 requests; just before it: 3
    reqs = out["requests"]
    gaps = [0]
    for _, rid in fin:
        gaps.append(gaps[-1] + reqs[str(rid)]["tokens"] - 1)
    assert f["ends"]["itl"] == gaps and f["ends"]["ttft"] == list(range(len(fin) + 1))
    for k in range(1, len(fin) + 1):
        ttfts = sorted(reqs[str(rid)]["ttft"] for _, rid in fin[:k])
        assert f["p50"][k] == pytest.approx(float(np.percentile(ttfts, 50)), rel=1e-12), k
    assert f["p50"][0] is None  # NaN: no finished request yet
    assert f["p99"][-1] == pytest.approx(out["stats"]["itl"]["p99"], rel=1e-12)
