"""frontend/static/js/replicagroups.js under Node: lanes grouped by replica, a band per group, the node's GPU boxes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parents[2] / "frontend" / "static" / "js" / "replicagroups.js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (the browser tests cover the same code)")

SCRIPT = """
import { insertLane, replicaBands, nodeDrawing, replicasOf } from "%s";
const reqs = new Map(); const order = [];
for (const [id, instance] of [[0, 0], [1, 1], [2, 0], [3, 2], [4, 1], [5, 0]]) {
  const r = { id, instance }; reqs.set(id, r); insertLane(order, reqs, r);
}
const one = new Map(); const plain = [];
for (const id of [0, 1, 2]) { const r = { id, instance: 0 }; one.set(id, r); insertLane(plain, one, r); }
const bands = replicaBands({ order, requests: reqs }, 10);
console.log(JSON.stringify({
  order, plain, bands: bands.shapes.map((s) => [s.y0, s.y1]), labels: bands.annotations.map((a) => a.text),
  none: replicaBands({ order: plain, requests: one }, 0).shapes.length,
  node: nodeDrawing({ tp: 2, replicas: 3, router: "least_outstanding_requests" }, "h200"),
  single: nodeDrawing({ tp: 8 }, "h200"), defaults: replicasOf(null),
}));
"""


def test_lanes_group_by_replica_and_the_node_colours_its_gpus() -> None:
    out = json.loads(subprocess.run([NODE, "--input-type=module", "-e", SCRIPT % JS.as_uri()], check=True,
                                    capture_output=True, text=True).stdout)
    assert out["order"] == [0, 2, 5, 1, 4, 3]  # replica 0's, then 1's, then 2's, each in arrival order
    assert out["plain"] == [0, 1, 2]  # one replica: arrival order, no bands
    assert out["bands"] == [[9.5, 12.5], [12.5, 14.5], [14.5, 15.5]] and out["none"] == 0
    assert out["labels"] == ["replica 0", "replica 1", "replica 2"]
    node = out["node"]
    assert node.count('data-replica="0"') == 2 and node.count('data-replica="2"') == 2
    assert node.count('data-replica=""') == 2 and "6 of 8 GPUs" in node and "least_outstanding_requests" in node
    assert out["single"] == "" and out["defaults"] == {"replicas": 1, "router": "round_robin"}
