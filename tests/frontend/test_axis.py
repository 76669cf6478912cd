"""frontend/static/js/axis.js under Node: the shared time axis reads the run's clock scope. A one-request run's
clock is one layer's ("whole model" multiplies by the layer count); a serving run's is the whole model's ("whole
model" is the clock itself, "one layer" shows each step's one-layer window back to back)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

JS = Path(__file__).resolve().parents[2] / "frontend" / "static" / "js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (the browser tests cover the same code)")

SCRIPT = """
import { TimeAxis } from "%(url)s";
const [clock, steps, ts] = JSON.parse(process.argv[1]);
const ax = new TimeAxis();
ax.load(%(extent)s, 94, [], clock, steps);
const out = {};
for (const units of ["model", "layer"]) {
  ax.setUnits(units);
  const back = ts.map((t) => ax.fromX(ax.toX(t)));
  out[units] = { x: ts.map((t) => ax.toX(t) * ax.scale()), title: ax.title(), back };
}
console.log(JSON.stringify(out));
"""

# two engine steps on a whole-model clock: 100 µs of one layer inside a 9 500 µs model step, an idle gap
STEPS = [
    {"start_us": 0.0, "dur_us": 100.0, "model_dur_us": 9500.0},
    {"start_us": 9500.0, "dur_us": 80.0, "model_dur_us": 7600.0},
    {"start_us": 20000.0, "dur_us": 50.0, "model_dur_us": 4700.0},
]


def axis(clock: str, ts: list[float], extent: float = 24700.0) -> dict[str, Any]:
    script = SCRIPT % {"url": (JS / "axis.js").as_uri(), "extent": extent}
    arg = json.dumps([clock, STEPS if clock == "model" else [], ts])
    proc = subprocess.run(
        [NODE or "node", "--input-type=module", "-e", script, arg],
        capture_output=True, text=True, timeout=60, check=True,
    )
    return json.loads(proc.stdout)


def test_a_whole_model_clock_is_not_multiplied_again_and_one_layer_shows_each_steps_layer() -> None:
    ts = [0.0, 50.0, 100.0, 9500.0, 9580.0, 17100.0, 20000.0, 20050.0]
    out = axis("model", ts)
    assert out["model"]["x"] == pytest.approx(ts)  # the clock already is the whole model's
    assert "whole model, 94 layers" in out["model"]["title"]
    layer = out["layer"]["x"]
    # one layer: each step's first dur_us at its true length, the rest of the step squeezed out, idle / 94
    idle = (20000.0 - 17100.0) / 94
    assert layer == pytest.approx([0.0, 50.0, 100.0, 100.0, 180.0, 180.0, 180.0 + idle, 230.0 + idle], abs=1e-3)
    assert "one layer of each step" in out["layer"]["title"]
    # x back to time inside the layer windows
    assert out["layer"]["back"][1] == pytest.approx(50.0) and out["layer"]["back"][4] == pytest.approx(9580.0)


def test_a_one_layer_clock_multiplies_by_the_layer_count() -> None:
    out = axis("layer", [0.0, 10.0, 100.0], extent=100.0)
    assert out["layer"]["x"] == pytest.approx([0.0, 10.0, 100.0])
    assert out["model"]["x"] == pytest.approx([0.0, 940.0, 9400.0])


OTHERS = """
import { TimeAxis } from "%(url)s";
const [mainClock, steps, other, ts] = JSON.parse(process.argv[1]);
const ax = new TimeAxis();
ax.load(24700.0, 94, [], mainClock, mainClock === "model" ? steps : []);
const otherSteps = other.clock === "model" ? steps : [];
ax.loadOthers([{ role: "compare", clock: other.clock, end: other.end, spans: [], steps: otherSteps }]);
const run = { role: "compare" };
const out = {};
for (const units of ["model", "layer"]) {
  ax.setUnits(units);
  const sc = ax.scale();
  out[units] = {
    x: ts.map((t) => ax.of(run).toX(t) * sc), end: ax.shown()[1] * sc, mainEnd: ax.toX(24700.0) * sc,
    same: ax.of({ role: "main" }) === ax, at: ax.timeOf(run, 9500.0),
  };
}
console.log(JSON.stringify(out));
"""


def others(main_clock: str, other: dict[str, Any], ts: list[float]) -> dict[str, Any]:
    script = OTHERS % {"url": (JS / "axis.js").as_uri()}
    proc = subprocess.run(
        [NODE or "node", "--input-type=module", "-e", script, json.dumps([main_clock, STEPS, other, ts])],
        capture_output=True, text=True, timeout=60, check=True,
    )
    return json.loads(proc.stdout)


def test_a_compare_run_on_a_per_layer_clock_beside_a_serving_run_gets_its_own_mapping() -> None:
    # main: a serving run (whole-model clock); compare: one request, its events one layer's time (1 000 µs long)
    ts = [0.0, 100.0, 1000.0]
    out = others("model", {"clock": "layer", "end": 1000.0}, ts)
    # whole model: the compare's layer time times 94 layers, like the main run's whole-model clock
    assert out["model"]["x"] == pytest.approx([t * 94 for t in ts])
    assert out["model"]["end"] == pytest.approx(94_000.0)  # the longer run sets the end
    assert out["model"]["mainEnd"] == pytest.approx(24_700.0)
    # one layer: its own per-layer time, beside the main run's one layer of each step
    assert out["layer"]["x"] == pytest.approx(ts)
    assert out["model"]["same"] and out["layer"]["same"]  # the main run keeps the shared axis itself
    assert out["model"]["at"] == pytest.approx(9500.0 / 94)  # the same moment on the compare's clock


def test_a_serving_compare_run_beside_a_per_layer_run_is_not_multiplied_again() -> None:
    ts = [0.0, 50.0, 9500.0]
    out = others("layer", {"clock": "model", "end": 24700.0}, ts)
    assert out["model"]["x"] == pytest.approx(ts)  # its clock already is the whole model's
    assert out["layer"]["x"] == pytest.approx([0.0, 50.0, 100.0], abs=1e-3)  # its steps' one-layer windows


BREAKS = """
import { TimeAxis, oneOffSpans, breakLabel } from "%(url)s";
const [kernels, extent] = JSON.parse(process.argv[1]);
const run = { kernel: kernels.map(([stage, scope, start_us, dur_us]) => ({ stage, scope, start_us, dur_us })) };
const spans = oneOffSpans([run]);
const ax = new TimeAxis();
ax.load(extent, 94, spans, "layer", []);
ax.setUnits("layer");
console.log(JSON.stringify({
  spans: spans.map((s) => [s[0], s[1]]), gaps: ax.gaps.map((g) => [g.t0, g.t1]), labels: ax.gaps.map(breakLabel),
  notes: ax.breaks().annotations.map((a) => a.text), clock: ax.clockUs(extent),
}));
"""


def breaks(kernels: list[tuple[str, str, float, float]], extent: float) -> dict[str, Any]:
    script = BREAKS % {"url": (JS / "axis.js").as_uri()}
    proc = subprocess.run(
        [NODE or "node", "--input-type=module", "-e", script, json.dumps([kernels, extent])],
        capture_output=True, text=True, timeout=60, check=True,
    )
    return json.loads(proc.stdout)


def layer_work(t0: float, t1: float, step: float = 10.0) -> list[tuple[str, str, float, float]]:
    return [("attention", "layer", t, step) for t in range(int(t0), int(t1), int(step))]


def test_only_a_true_one_off_is_squeezed_never_a_steady_re_fetch() -> None:
    # per-layer work 0-1000 µs and 3000-4000; a switch-over of two back-to-back kernels between them (2000 µs);
    # a whole-model re-fetch after every 100 µs of work (steady: it comes back after per-layer work each time)
    kernels = layer_work(0, 1000) + [("switch_over", "model", 1000.0, 1200.0), ("switch_over", "model", 2210.0, 790.0)]
    kernels += layer_work(3000, 4000)
    kernels += [("kv_refetch", "model", t, 300.0) for t in (4000.0, 4400.0, 4800.0)]
    kernels += layer_work(4300, 4400) + layer_work(4700, 4800) + layer_work(5100, 5200)
    out = breaks(kernels, 5200.0)
    assert out["gaps"] == [[1000.0, 3000.0]]  # the switch-over, one break; the re-fetches stay at their length
    assert out["labels"] == ["switch_over 1.99 ms"]  # the label is the one-off's own cost, from the data
    assert out["notes"] == ["// switch_over 1.99 ms"]
    assert out["clock"] == pytest.approx(5200.0)  # the clock reads true one-layer time, not the squeezed x


def test_adjacent_one_offs_make_one_break_with_one_label() -> None:
    # two different one-off stages 10 µs of work apart (under 1% of the run): one break, one label
    kernels = layer_work(0, 1000) + [("switch_over", "model", 1000.0, 2000.0)] + layer_work(3000, 3010)
    kernels += [("kv_migrate", "model", 3010.0, 1500.0)] + layer_work(4510, 6000)
    out = breaks(kernels, 6000.0)
    assert out["gaps"] == [[1000.0, 4510.0]]
    assert out["notes"] == ["// switch_over + kv_migrate 3.50 ms"]
