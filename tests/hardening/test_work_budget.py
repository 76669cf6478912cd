"""Finding 2: the work limit counts what costs (the requests that fit the KV pool at once, batch width, numerics,
the compare run), and a run passing its event or CPU budget while it runs is stopped with a clear error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from hardening_util import ws_answer

from layerscope import scenario as scn
from layerscope.budget import BudgetExceeded, Cancelled, RunBudget
from layerscope.commands.serve import build_app
from layerscope.runtime.budget import estimate_work
from layerscope.runtime.engine import simulate
from layerscope.server.settings import Settings

# The run: 10,000 requests in a small pool with max_num_seqs 4096 (estimated at 4,221 steps; ~18 M events).
# The presets now run at tp 8, where 4 GiB a GPU holds ~90 such requests: a quarter GiB holds a few, as 4 GiB did
# at tp 1.
POOL_DODGE = {"workload.num_requests": 10_000, "workload.input_len": 512, "workload.output_len": 400,
              "free_hbm_gib": 0.25, "scheduler.max_num_seqs": 4096, "workload.max_concurrency": 4096}
DODGED = "serving-64-h200-tp8"


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(build_app(Settings())) as c:
        yield c


def test_presets_fit_the_default_limit() -> None:
    limit = Settings().max_sim_work
    for name in scn.preset_names():
        assert estimate_work(scn.load_preset(name)).units <= limit, name


def test_concurrency_that_does_not_fit_the_pool_is_counted(client: TestClient) -> None:
    spec = scn.apply_overrides(scn.load_preset(DODGED), POOL_DODGE)
    roomy = scn.apply_overrides(scn.load_preset(DODGED), {**POOL_DODGE, "free_hbm_gib": 60})
    # waves of the few requests the small pool holds cost steps that one wide batch does not
    assert estimate_work(spec).units > 2 * estimate_work(roomy).units > 50 * Settings().max_sim_work
    before = client.get("/api/debug/sessions").json()["simulations"]
    err = ws_answer(client, {"type": "load", "scenario": DODGED, "set": POOL_DODGE})
    assert err["type"] == "error" and err["field"] == "set.workload.num_requests", err
    assert "engine steps" in err["message"]
    assert client.get("/api/debug/sessions").json()["simulations"] == before  # refused before simulating


def test_numerics_and_its_model_are_counted(client: TestClient) -> None:
    base = {"decode_steps": 1000, "prompt_len": 4096}
    plain = estimate_work(scn.parse_spec(base)).units
    tiny = estimate_work(scn.parse_spec({**base, "numerics": True})).units
    small = estimate_work(scn.parse_spec({**base, "numerics": True, "numerics_model": "small"})).units
    assert plain < tiny < small and small >= 10 * plain
    err = ws_answer(client, {"type": "load", "spec": {**base, "numerics": True, "numerics_model": "small"}})
    assert err["type"] == "error" and "at most 10000" in err["message"], err


def test_the_compare_runs_own_overrides_are_counted() -> None:
    """A compare run that is itself heavy (numerics small, longer decode) adds its own cost, not a copy of A's."""
    light = scn.parse_spec({"decode_steps": 100, "compare": {"label": "b", "set": {}}})
    heavy = scn.parse_spec({"decode_steps": 100, "compare": {"label": "b", "set": {
        "numerics": True, "numerics_model": "small", "decode_steps": 2000}}})
    assert estimate_work(heavy).units > 20 * estimate_work(light).units


def test_batch_width_and_page_fit_are_counted() -> None:
    narrow = scn.apply_overrides(scn.load_preset("serving-64-h200-tp8"), {"scheduler.max_num_seqs": 1})
    wide = scn.load_preset("serving-64-h200-tp8")
    per_step = {s.scheduler_limits.max_num_seqs: estimate_work(s).units for s in (narrow, wide)}
    assert per_step[1] > per_step[1024]  # one at a time (vLLM's H200 default: 1024): many more steps
    assert estimate_work(wide).units > estimate_work(
        scn.apply_overrides(wide, {"workload.output_len": 1})).units  # decode steps of a wide batch cost


def test_a_running_simulation_stops_past_its_event_budget() -> None:
    spec = scn.load_preset("decode-pulses")  # 727 events
    with pytest.raises(BudgetExceeded, match="budget of 200 events"):
        simulate(spec, check=RunBudget(max_events=200, max_cpu_s=60).check)
    serving = scn.apply_overrides(scn.load_preset("serving-64-h200-tp8"), {"workload.num_requests": 16})
    with pytest.raises(BudgetExceeded, match="events"):
        simulate(serving, check=RunBudget(max_events=300, max_cpu_s=60).check)


def test_a_running_simulation_stops_past_its_cpu_budget() -> None:
    budget = RunBudget(max_events=10**9, max_cpu_s=0.0)
    budget.start()
    with pytest.raises(BudgetExceeded, match="CPU-seconds"):
        simulate(scn.load_preset("decode-pulses"), check=budget.check)


def test_a_cancelled_simulation_stops_at_its_next_check() -> None:
    budget = RunBudget(max_events=10**9, max_cpu_s=60)
    calls: list[int] = []

    def check(n: int) -> None:
        calls.append(n)
        if len(calls) == 2:
            budget.cancel()
        budget.check(n)

    with pytest.raises(Cancelled):
        simulate(scn.load_preset("decode-pulses"), check=check)
    assert len(calls) == 2  # the check right after the cancel stopped it (of 6 in the whole run)


def test_the_server_answers_a_run_stopped_by_its_budget_with_an_error() -> None:
    with TestClient(build_app(Settings(max_run_events=300))) as c, c.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": "decode-pulses"})
        err = ws.receive_json()
        assert err["type"] == "error" and "budget of 300 events" in err["message"], err
        ws.send_json({"type": "load", "spec": {"prompt_len": 16, "decode_steps": 2}})
        assert ws.receive_json()["type"] == "loaded"  # the connection and the slot are free again


# issue 21: two-node-1p3d with its three decode engines made 8 DP ranks of tp 1 each (wide EP): 24 decode ranks
# stepping in lockstep record ~262k events, which the estimate, counting one engine's steps, let through
WIDE_EP_1P3D = {"deployment.weight_dtype": "fp8", "deployment.ep": 8, "deployment.disaggregation.prefill.ep": 8,
                "deployment.disaggregation.decode.tp": 1, "deployment.disaggregation.decode.dp": 8}


def test_every_decode_rank_of_a_disaggregated_run_is_counted(client: TestClient) -> None:
    base = scn.load_preset("two-node-1p3d")
    wide = scn.apply_overrides(base, WIDE_EP_1P3D)
    assert estimate_work(wide).units > Settings().max_sim_work >= estimate_work(base).units
    before = client.get("/api/debug/sessions").json()["simulations"]
    err = ws_answer(client, {"type": "load", "scenario": "two-node-1p3d", "set": WIDE_EP_1P3D})
    assert err["type"] == "error" and err["field"] == "set.deployment.disaggregation.decode.dp", err
    assert "engine steps" in err["message"] and "at most 10000" in err["message"]
    assert client.get("/api/debug/sessions").json()["simulations"] == before  # refused before simulating


def test_a_disaggregated_runs_estimate_follows_its_decode_ranks() -> None:
    """The real engine, small: events per unit of work stay alike from 1 decode rank to 4 (the estimate grows
    with the ranks as the events do)."""
    def spec(dp: int) -> scn.ScenarioSpec:
        return scn.ScenarioSpec(gpu="h200", deployment={"tp": 8, "weight_dtype": "fp8", "disaggregation": {
            "prefill": {"tp": 4}, "decode": {"tp": 4 // dp, "dp": dp}}},
            workload={"num_requests": 8, "input_len": 512, "output_len": 16, "request_rate": 8.0})
    per_unit = [len(simulate(spec(dp)).events) / estimate_work(spec(dp)).units for dp in (1, 4)]
    assert 0.5 < per_unit[1] / per_unit[0] < 2.0, per_unit


def test_a_colocated_runs_estimate_counts_every_replica() -> None:
    """Every replica steps on its own: 4 replicas of 8 requests each step 4x as often as one engine of 32, each step
    a quarter as wide. The estimate counted one engine's steps (195 units at replicas 1 and 4 alike) while CPU grew
    ~4x (48 -> 185 ms measured with 8 replicas of 64 requests)."""
    def spec(replicas: int) -> scn.ScenarioSpec:
        workload = {"num_requests": 32, "input_len": 256, "output_len": 64, "max_concurrency": 32}
        deployment = {"tp": 1, "replicas": replicas}
        return scn.ScenarioSpec(gpu="h200", model="qwen3-30b-a3b", deployment=deployment, workload=workload)

    one = estimate_work(spec(1)).units
    steps = sum(e.kind == "step" for e in simulate(spec(4)).events)
    assert steps == 4 * sum(e.kind == "step" for e in simulate(spec(1)).events)
    assert 1.5 * one < estimate_work(spec(4)).units < 4 * one
    assert estimate_work(spec(4)).field == "deployment.replicas"
