"""A run's engines in the front end under Node: instances.js (names, the slowest and median kept when folded),
serving.js's steps of engines stepping in lockstep, the deployment card's nodes and its refusal-to-field mapping."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parents[2] / "frontend" / "static" / "js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (the browser tests cover the same code)")


def run(script: str) -> dict:
    src = script.replace("JS/", JS.as_uri() + "/")
    out = subprocess.run([NODE, "--input-type=module", "-e", src], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_engines_are_named_by_kind_and_folding_keeps_the_slowest_and_the_median() -> None:
    out = run("""
import { busyByEngine, engineKind, engineLabel, keptEngines } from "JS/instances.js";
const kernels = [[0, 5], [1, 9], [2, 7], [3, 6], [4, 1], [1, 1]].map(([instance, dur_us]) => ({ instance, dur_us }));
const busy = busyByEngine(kernels);
console.log(JSON.stringify({
  busy, kept: keptEngines(busy), three: keptEngines({ 0: 1, 1: 3, 2: 2 }), tie: keptEngines({ 0: 4, 1: 4, 2: 4, 3: 4 }),
  kinds: [engineKind({ dp: 8 }), engineKind({ replicas: 4 }), engineKind({ disaggregated: true }), engineKind({}),
          engineKind(null)],
  labels: [engineLabel({ dp: 8 }, 3), engineLabel({ replicas: 2 }, 1),
           engineLabel({ disaggregated: true, prefill_instances: 2 }, 1),
           engineLabel({ disaggregated: true, prefill_instances: 2 }, 3), engineLabel({}, 0)],
}));
""")
    assert out["busy"] == {"0": 5, "1": 10, "2": 7, "3": 6, "4": 1}
    # by busy time 1 (10), 2 (7), 3 (6), 0 (5), 4 (1): the slowest is 1, the median (third of five) is 3
    assert out["kept"] == [1, 3]
    assert out["three"] == [0, 1, 2]  # fewer than four engines: nothing folded
    assert out["tie"] == [0, 2]  # equal busy time: the lower instance first
    assert out["kinds"] == ["rank", "replica", "pool", "", ""]
    assert out["labels"] == ["rank 3", "replica 1", "prefill 1", "decode 1", "engine 0"]


def test_lockstep_ranks_steps_chain_on_their_own_engine() -> None:
    """Eight ranks' step events share each start (DP lockstep): each step still ends a whole-model step later, not
    at the next rank's start (the step series once interleaved the engines as one clock: zero-width bars)."""
    out = run("""
import { ServingState, stepEnd } from "JS/serving.js";
const store = { ver: {}, listeners: [], bump(k) { this.ver[k] = (this.ver[k] || 0) + 1; } };
const sv = new ServingState(store);
const events = [];
for (let i = 0; i < 3; i++) for (let r = 0; r < 4; r++) events.push({ kind: "step", t_us: i * 20000, index: i,
  start_us: i * 20000,
  dur_us: 100, model_dur_us: 20000, num_seqs: 1, prefill_tokens: 0, decode_tokens: r + 1, token_budget: 8192,
  request_ids: [], num_tokens: [], num_sampled: [], cached_blocks: null, instance: r });
for (const fn of store.listeners) fn({ events, reset: false });
console.log(JSON.stringify({ n: sv.steps.length, instances: sv.instances(),
  ends: sv.steps.map((s) => stepEnd(s) - s.start),
  stretch: sv.steps.some((s) => s.stretch), insts: sv.steps.map((s) => s.inst), model: sv.toModelUs(30000),
  at: sv.stepsAt(25000).map((s) => [s.inst, s.index]), before: sv.stepsAt(-1).length,
  after: sv.stepsAt(70000).length }));
""")
    assert out["n"] == 12 and out["instances"] == [0, 1, 2, 3]
    assert out["ends"] == [20000] * 12  # every rank's step lasts the group's whole-model step
    assert not out["stretch"] and out["model"] == 30000  # the event clock is already the client's
    assert out["insts"] == [0, 1, 2, 3] * 3
    # at the cursor, every engine's running step (the request lanes outline each one's requests)
    assert out["at"] == [[0, 1], [1, 1], [2, 1], [3, 1]] and out["before"] == 0 and out["after"] == 0


def test_the_card_draws_nodes_with_their_dp_ranks_and_maps_refusals_to_fields() -> None:
    out = run("""
import { nodeDrawing } from "JS/replicagroups.js";
import { fieldOfMessage } from "JS/views/deployment.js";
const group = { ranks: [...Array(16).keys()].map((r) => ({ rank: r, gpus: [r], experts: [[8 * r, 8 * r + 7]] })) };
const names = ["tp", "ep", "dp", "nodes", "replicas", "router", "eplb"];
console.log(JSON.stringify({
  two: nodeDrawing({ dp: 16, nodes: 2, tp: 1, all2all_backend: "deepep_low_latency" }, "h100-sxm", group),
  tp2: nodeDrawing({ dp: 2, tp: 2 }, "h200"),
  one: nodeDrawing({ tp: 8 }, "h200"),
  fields: [fieldOfMessage("dp=16 x tp=1 = 16 GPUs do not fit 1 node(s) of 8: set nodes=2", names),
           fieldOfMessage("replicas=9 x 1 GPUs each (tp=1) need 9 GPUs; the deployment has 8 (1 node(s) of 8): " +
                          "lower replicas or tp", names),
           fieldOfMessage("ep=8: with dp=2 x tp=1 the experts spread over all 2 GPUs", names),
           fieldOfMessage("weights need 120 GiB", names),
           fieldOfMessage("set: field 'deployment': eplb: expert-parallel load balancing needs dp > 1", names),
           fieldOfMessage("set: field 'deployment': ep=8: with dp=2 x tp=1 the experts spread", names)],
}));
""")
    two = out["two"]
    assert two.count('class="replica-row"') == 2 and "node 0" in two and "node 1" in two
    assert two.count('data-rank="15"') == 1 and 'data-replica=""' not in two  # 16 ranks fill both nodes
    assert "GPU 9 (node 1): DP rank 9 (tp 1), experts 72-79" in two and "16 of 16 GPUs" in two
    assert "deepep_low_latency" in two and "node link" in two
    tp2 = out["tp2"]  # two ranks of tp 2: GPUs 0-1 rank 0, 2-3 rank 1, four free
    assert tp2.count('data-rank="0"') == 2 and tp2.count('data-rank="1"') == 2 and tp2.count('data-replica=""') == 4
    assert out["one"] == ""  # one engine on one node: the card's table says it all
    assert out["fields"] == ["nodes", "replicas", "ep", "", "eplb", "ep"]
