"""The run's result states its clock: a one-request run keeps a layer's, a serving run the whole model's."""

from __future__ import annotations

import json

from layerscope.export.events import jsonl_lines
from layerscope.export.trace import to_perfetto
from layerscope.result import SimResult, run_clock
from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec
from layerscope.server.overview import clock
from layerscope.server.runs import parse_recording, replay_run

ONE_REQUEST = {"model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h200", "prompt_len": 64, "decode_steps": 2}
SERVING = {"model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h200", "free_hbm_gib": 20.0,
           "workload": {"num_requests": 2, "input_len": 16, "output_len": 2}}


def test_a_one_request_run_is_on_a_layer_clock_and_a_serving_run_on_the_model_clock() -> None:
    one = simulate(ScenarioSpec.model_validate(ONE_REQUEST))
    served = simulate(ScenarioSpec.model_validate(SERVING))
    assert isinstance(one, SimResult) and isinstance(served, SimResult)
    assert (one.clock, served.clock) == ("layer", "model")
    assert (clock(one), clock(served)) == ("layer", "model")  # the server reads the stated clock
    assert run_clock(one.spec) == "layer" and run_clock(served.spec) == "model"


def test_the_perfetto_trace_names_the_runs_clock() -> None:
    served = simulate(ScenarioSpec.model_validate(SERVING))
    assert "whole model" in to_perfetto(served)["otherData"]["clock"]
    one = simulate(ScenarioSpec.model_validate(ONE_REQUEST))
    assert "one decoder layer" in to_perfetto(one)["otherData"]["clock"]


def test_a_compare_run_states_its_own_clock() -> None:
    spec = ScenarioSpec.model_validate({**ONE_REQUEST, "compare": {"label": "naive", "set": {"allocator": "naive"}}})
    r = simulate(spec)
    assert r.compare is not None and r.compare.clock == "layer"


def test_a_replayed_recording_keeps_the_clock_of_the_run_it_records() -> None:
    for spec in (ScenarioSpec.model_validate(SERVING), ScenarioSpec.model_validate(ONE_REQUEST)):
        live = simulate(spec)
        lines = [json.loads(line) for line in jsonl_lines(live)][1:]  # the recording, without its `run` line
        replayed = replay_run(spec, parse_recording(lines), live.topology)
        assert replayed.result.clock == live.clock
        assert [r["clock"] for r in replayed.overview["runs"]] == [live.clock]
