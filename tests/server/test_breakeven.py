"""POST /api/breakeven: the sweep panel's break-even run on the server, against the real engine; bounded, refused
with the field named, one at a time ("busy, retry"), stopped when its client leaves."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from layerscope.commands.serve import build_app
from layerscope.server.breakeven import _summaries_until
from layerscope.server.settings import Settings
from layerscope.sizing import break_even_cells
from layerscope.sweep import SweepCancelled

PRESET = "pd-disaggregated-vs-colocated"
SMALL = {"workload.num_requests": 6, "workload.output_len": 8, "workload.range_ratio": 0.0}


@pytest.fixture
def real() -> Iterator[TestClient]:
    with TestClient(build_app(Settings())) as c:
        yield c


def test_the_preset_against_its_compare_run_cell_by_cell(real: TestClient) -> None:
    """A: the preset's 1P1D, B: its colocated compare run; each cell's goodput per GPU is request_goodput over all
    8 GPUs, the winner the higher, the margin their ratio - 1; the SLOs are the preset's."""
    body = {"scenario": PRESET, "set": SMALL, "input_lens": [256, 2048], "request_rates": [4.0]}
    r = real.post("/api/breakeven", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["scenario"] == PRESET and out["deployments"] == ["1P1D tp4/tp4 over nvlink", "colocated tp 8"]
    assert out["slo"] == {"ttft": 1500.0, "tpot": 40.0}
    assert [(c["input_len"], c["request_rate"]) for c in out["cells"]] == [(256, 4.0), (2048, 4.0)]
    for c in out["cells"]:
        a, b = (c["goodput_per_gpu"][k] for k in out["deployments"])
        assert 0 < a and 0 < b
        assert c["winner"] == (out["deployments"][0] if a >= b else out["deployments"][1])
        assert c["margin"] == pytest.approx(max(a, b) / min(a, b) - 1, abs=1e-3)
    tight = real.post("/api/breakeven", json={**body, "input_lens": [256], "slo": {"ttft": 1.0}})
    assert tight.status_code == 200 and tight.json()["slo"] == {"ttft": 1.0}
    cell, = tight.json()["cells"]
    assert cell["goodput_per_gpu"] == {"1P1D tp4/tp4 over nvlink": 0.0, "colocated tp 8": 0.0}
    assert cell["margin"] is None


@pytest.mark.parametrize(
    ("body", "loc", "words"),
    [
        ({"input_lens": [256, 512, 1024], "request_rates": [1.0, 2.0, 4.0]}, ["body", "input_lens"], "9 cells"),
        ({"input_lens": [0], "request_rates": [1.0]}, ["body", "input_lens", "0"], "greater than or equal to 1"),
        ({"input_lens": [256], "request_rates": [0.0]}, ["body", "request_rates", "0"], "greater than 0"),
        ({"input_lens": [256], "request_rates": [1.0], "slo": {"itl": 5.0}}, ["body", "slo", "itl", "[key]"],
         "'ttft', 'tpot' or 'e2el'"),
        ({"scenario": "serving-long-prompt-itl", "input_lens": [256], "request_rates": [1.0]}, ["body", "slo"],
         "names no goodput SLOs"),
        ({"scenario": "real-qwen3-235b-h200", "input_lens": [256], "request_rates": [1.0]}, ["body", "scenario"],
         "needs a workload"),
        ({"input_lens": [256], "request_rates": [1.0], "jobs": 4}, ["body", "jobs"], "Extra inputs"),
    ],
)
def test_bad_bodies_get_a_422_naming_the_field(real: TestClient, body: dict[str, Any], loc: list[Any],
                                               words: str) -> None:
    r = real.post("/api/breakeven", json={"scenario": PRESET, **body})
    assert r.status_code == 422, r.text
    err = r.json()["detail"][0]
    assert err["loc"] == loc and words in err["msg"], err


def test_a_preset_without_a_compare_run_is_refused(real: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    body = {"scenario": PRESET, "set": {**SMALL, "compare": None}, "input_lens": [256], "request_rates": [1.0]}
    r = real.post("/api/breakeven", json=body)
    assert r.status_code == 422 and "no compare run" in r.json()["detail"][0]["msg"], r.text


def test_every_run_is_bounded_before_any_runs() -> None:
    with TestClient(build_app(Settings(max_sim_work=100))) as c:
        r = c.post("/api/breakeven", json={"scenario": PRESET, "input_lens": [256], "request_rates": [1.0]})
    assert r.status_code == 422, r.text
    err = r.json()["detail"][0]
    assert err["loc"] == ["body", "input_lens"] and "at most 100" in err["msg"], err


class _Held:
    """A sweep lock another request holds."""

    def locked(self) -> bool:
        return True


def test_busy_while_a_sweep_runs(real: TestClient) -> None:
    real.app.state.sweep_lock = _Held()  # type: ignore[attr-defined]
    r = real.post("/api/breakeven", json={"scenario": PRESET, "set": SMALL, "input_lens": [256],
                                          "request_rates": [1.0]})
    assert r.status_code == 503 and "retry" in r.json()["detail"] and r.headers["Retry-After"] == "5"


def test_a_client_gone_stops_the_runs() -> None:
    """The server's runner checks its stop flag before each run and at the engine's checks."""
    from layerscope.scenario import load_preset

    stop = threading.Event()
    stop.set()
    spec = load_preset(PRESET).with_overrides(SMALL)
    with pytest.raises(SweepCancelled):
        break_even_cells((("a", spec), ("b", spec)), [256], [1.0], _summaries_until(stop))
