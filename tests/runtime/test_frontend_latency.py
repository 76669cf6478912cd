"""What lies between the client and the engine: TTFT's parts outside the engine, per engine."""

from __future__ import annotations

import pytest

from layerscope.runtime.engine import simulate
from layerscope.runtime.frontend_latency import FRONTENDS, lagged_arrival
from layerscope.scenario import ScenarioSpec


def spec(engine: str = "vllm", concurrency: int = 1, input_len: int = 500, async_scheduling: bool = True,
         **dep: object) -> ScenarioSpec:
    return ScenarioSpec(name="f", gpu="b200", deployment={"tp": 8, "engine": engine,
                                                          "async_scheduling": async_scheduling, **dep},
                        workload={"num_requests": 4, "input_len": input_len, "output_len": 32,
                                  "max_concurrency": concurrency})


def test_parts_sum_to_the_total_and_grow_with_the_prompt():
    for f in FRONTENDS.values():
        short, long = f.parts_us(100), f.parts_us(8000)
        assert sum(short.values()) == pytest.approx(f.total_us(100))
        assert long["tokenize"] > short["tokenize"] and long["request"] == short["request"]
        assert f.total_us(8000) - f.total_us(100) == pytest.approx(7900 * f.tokenize_us_per_token)


def test_ttft_and_e2el_carry_the_front_end_tpot_does_not():
    s = simulate(spec()).summary
    front = FRONTENDS["vllm"].total_us(500) / 1000
    assert s["mean_frontend_ms"] == pytest.approx(front, rel=1e-3)
    assert s["mean_frontend_tokenize_ms"] + s["mean_frontend_request_ms"] + s["mean_frontend_response_ms"] \
        == pytest.approx(s["mean_frontend_ms"], abs=1e-3)
    assert s["mean_ttft_ms"] > front
    # TPOT is (E2EL - TTFT) / (tokens - 1): the same shift on both leaves it alone
    assert s["mean_tpot_ms"] == pytest.approx((s["mean_e2el_ms"] - s["mean_ttft_ms"]) / 31, rel=1e-3)


def test_sglang_prefills_eagerly_and_its_front_end_differs():
    vllm, sglang = simulate(spec("vllm")).summary, simulate(spec("sglang")).summary
    engine_vllm = vllm["mean_ttft_ms"] - vllm["mean_frontend_ms"]
    engine_sglang = sglang["mean_ttft_ms"] - sglang["mean_frontend_ms"]
    assert engine_sglang > engine_vllm + 3.0  # ~600 kernels of a 500-token prefill each wait for their launch
    # decode replays graphs in both; SGLang's unfused q/k norm and rope add one small kernel a layer (runtime/vllm.py)
    assert vllm["mean_tpot_ms"] < sglang["mean_tpot_ms"] < 1.03 * vllm["mean_tpot_ms"]


def test_lagged_arrival_only_when_busy_and_scheduling_ahead():
    assert lagged_arrival(True, True, 10.0, 25.0) == 10.0
    assert lagged_arrival(True, False, 10.0, 25.0) == 25.0  # an idle engine takes the request at once
    assert lagged_arrival(False, True, 10.0, 25.0) == 25.0


def first_steps(async_scheduling: bool) -> list[int]:
    """For each request that arrived while a step ran: how many step boundaries passed before it was scheduled."""
    sp = ScenarioSpec(name="f", gpu="h200", deployment={"tp": 8, "async_scheduling": async_scheduling},
                      workload={"num_requests": 24, "input_len": 256, "output_len": 24, "request_rate": 40.0})
    events = simulate(sp).events
    starts = sorted(e.start_us for e in events if e.kind == "step")
    arrive = {e.request_id: e.t_us for e in events if e.kind == "request" and e.what == "arrive"}
    out = []
    for e in events:
        if e.kind == "request" and e.what == "scheduled":
            a = arrive[e.request_id]
            running = [s for s in starts if s < a]
            if running and a < e.t_us:  # arrived while the engine ran a step
                out.append(sum(1 for s in starts if running[-1] < s <= e.t_us))
    return out


def test_async_scheduling_delays_requests_that_arrive_while_the_engine_is_busy():
    # synchronous: a request joins the next step; scheduling ahead, the next step was already planned: one more
    sync, ahead = first_steps(False), first_steps(True)
    assert sync and ahead
    assert set(sync) == {1} and set(ahead) == {2}
