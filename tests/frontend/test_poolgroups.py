"""frontend/static/js/poolgroups.js under Node: a disaggregated run's lanes grouped by the prefill -> decode pair
that served each request, a band per pair, and the hover's line naming where each phase ran."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parents[2] / "frontend" / "static" / "js" / "poolgroups.js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (the browser tests cover the same code)")

SCRIPT = """
import { regroupLane, poolBands, phasesLine, poolsOf, engineName } from "%s";
// 1P2D: prefill engine 0; decode engines are instances 1 and 2. Requests arrive 0..4 (all on prefill 0), then their
// transfers start, in this order, to these decode engines; request 4 has one token and never leaves prefill.
const reqs = new Map(); const order = [];
for (const id of [0, 1, 2, 3, 4]) { const r = { id, instance: 0 }; reqs.set(id, r); order.push(id); }
const seen = [];
for (const [id, dec] of [[0, 1], [1, 2], [2, 1], [3, 2]]) {
  const r = reqs.get(id); r.decodeInstance = dec; regroupLane(order, reqs, r); seen.push([...order]);
}
const one = { x: 1, pdp: 1, ddp: 1 };
const bands = poolBands({ order, requests: reqs }, 0, one);
const r = { instance: 0, decodeInstance: 2, transferAt: 5000, transferDone: 155000 };
console.log(JSON.stringify({
  seen, bands: bands.shapes.map((s) => [s.y0, s.y1]), labels: bands.annotations.map((a) => a.text),
  none: poolBands({ order: [0], requests: new Map([[0, { id: 0, instance: 0 }]]) }, 0, one).shapes.length,
  line: phasesLine(r, one, 2000), open: phasesLine({ instance: 0, decodeInstance: 1, transferAt: 10 }, one, null),
  only: phasesLine({ instance: 0 }, one, null),
  pools: [poolsOf({ disaggregated: true, prefill_instances: 2 }),
          poolsOf({ disaggregation: { prefill: { instances: 3 } } }), poolsOf({ tp: 8 }), poolsOf(null),
          poolsOf({ disaggregated: true, prefill_instances: 2, prefill_dp: 4, decode_dp: 8 }),
          poolsOf({ disaggregation: { prefill: { dp: 2 }, decode: { dp: 4 } } })],
  names: [0, 1, 2, 3].map((i) => engineName(i, { x: 2, pdp: 1, ddp: 1 })),
  ranks: [0, 5, 8, 13].map((i) => engineName(i, { x: 8, pdp: 4, ddp: 4 })),
}));
"""


def test_lanes_group_by_the_pair_of_engines_and_say_where_each_phase_ran() -> None:
    out = json.loads(subprocess.run([NODE, "--input-type=module", "-e", SCRIPT % JS.as_uri()], check=True,
                                    capture_output=True, text=True).stdout)
    # a lane whose decode engine is known joins the end of its pair's group, passing over the lanes still on their
    # prefill engine (they float); the lanes with a pair stay sorted by it, in arrival order within
    assert out["seen"] == [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 2, 1, 3, 4], [0, 2, 1, 3, 4]]
    assert out["bands"] == [[-0.5, 1.5], [1.5, 3.5], [3.5, 4.5]]
    assert out["labels"] == ["prefill 0 → decode 0", "prefill 0 → decode 1", "prefill 0 only"]
    assert out["none"] == 0  # no request has left a prefill engine: no bands
    assert out["line"] == "prefill on prefill 0 · KV wait 3.0 ms · KV transfer 150 ms · decode on decode 1"
    assert out["open"] == "prefill on prefill 0 · KV on its way · decode on decode 0"
    assert out["only"] == "prefill and its only token on prefill 0"
    one = {"pdp": 1, "ddp": 1}
    assert out["pools"] == [{"x": 2, **one}, {"x": 3, **one}, {"x": 0, **one}, {"x": 0, **one},
                            {"x": 8, "pdp": 4, "ddp": 8}, {"x": 2, "pdp": 2, "ddp": 4}]
    assert out["names"] == ["prefill 0", "prefill 1", "decode 0", "decode 1"]
    # pools of DP ranks (instances numbered on, dp a engine): engine and rank
    assert out["ranks"] == ["prefill 0 rank 0", "prefill 1 rank 1", "decode 0 rank 0", "decode 1 rank 1"]
