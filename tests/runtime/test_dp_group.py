"""runtime/dp_group.py: DP ranks in lockstep (issue 20)."""

from __future__ import annotations

import numpy as np
import pytest

from layerscope.events import DPStepEvent, RequestEvent, StepEvent
from layerscope.runtime.dp_group import DPGroup
from layerscope.runtime.engine import simulate
from layerscope.runtime.loop import Client, Loop
from layerscope.runtime.request import Request
from layerscope.scenario import ScenarioSpec

BASE = dict(name="dp", model="qwen3-30b-a3b", runtime="vllm", gpu="h100-sxm")


def spec(dp: int = 2, **workload: object) -> ScenarioSpec:
    w = {"num_requests": 8, "input_len": 256, "output_len": 16, "seed": 0, **workload}
    return ScenarioSpec.model_validate({**BASE, "deployment": {"dp": dp}, "workload": w})


def request(rid: int, arrival_us: float, input_len: int, output_len: int) -> Request:
    return Request(rid, arrival_us, input_len, output_len, np.arange(input_len + output_len, dtype=np.int32) + rid)


def test_a_long_prefill_on_one_rank_stalls_the_others_decode() -> None:
    """Two short requests decode, one per rank; then a long prompt lands on rank 0. The step that prefills it
    lasts as long as rank 0's work, and rank 1, with one decode token, idles through it: its token comes only
    when the group's step ends."""
    s = spec()
    events: list = []
    group = DPGroup(s, events, None)
    reqs = [request(0, 0.0, 64, 40), request(1, 0.0, 64, 40), request(2, 50_000.0, 8000, 4)]
    group.expect(reqs)
    Loop([group], Client(reqs, None), events=events).run()
    steps = [e for e in events if isinstance(e, DPStepEvent)]
    long_step = max(steps, key=lambda e: e.tokens[0])
    assert long_step.tokens[0] >= 8000 and long_step.tokens[1] == 1  # rank 0's prefill beside rank 1's decode
    assert long_step.slowest_rank == 0
    assert long_step.busy_us[1] < 0.5 * long_step.dur_us  # rank 1 idles most of the step
    quiet = [e for e in steps if e.tokens == [1, 1]]
    assert quiet and long_step.dur_us > 3 * max(e.dur_us for e in quiet)
    # rank 1's own step event carries the group's duration: its decode token waits for rank 0
    rank1 = [e for e in events if isinstance(e, StepEvent) and e.instance == 1 and e.start_us == long_step.start_us]
    assert len(rank1) == 1 and rank1[0].model_dur_us == pytest.approx(long_step.dur_us)
    served = {e.request_id: e.instance for e in events if isinstance(e, RequestEvent) and e.what == "scheduled"}
    assert served == {0: 0, 1: 1, 2: 0}  # least loaded first, ties to the lowest rank (vLLM's DP coordinator)


def test_a_rank_with_no_work_runs_a_dummy_step() -> None:
    s = spec()
    events: list = []
    group = DPGroup(s, events, None)
    reqs = [request(0, 0.0, 512, 8)]
    group.expect(reqs)
    Loop([group], Client(reqs, None), events=events).run()
    steps = [e for e in events if isinstance(e, DPStepEvent)]
    assert steps and all(e.tokens[1] == 0 for e in steps)  # rank 1 never had a request
    assert all(0 < e.busy_us[1] < e.busy_us[0] for e in steps)  # yet it ran a (shorter) dummy step every time
    assert not [e for e in events if isinstance(e, StepEvent) and e.instance == 1]


def test_kernel_events_carry_the_rank_and_all_to_all_on_the_comm_stream() -> None:
    r = simulate(spec(num_requests=4))
    kernels = [e for e in r.events if e.kind == "kernel"]
    assert {e.rank for e in kernels} == {0, 1}
    a2a = [e for e in kernels if e.stage in ("ep_dispatch", "ep_combine")]
    assert a2a and {e.stream for e in a2a} == {"comm"}
    assert not [e for e in kernels if e.stage == "moe_all_reduce"]  # the combine replaces the MoE all-reduce
    group = [e for e in r.events if e.kind == "dp_group"]
    assert len(group) == 1 and group[0].ep == 2 and [x["experts"] for x in group[0].ranks] == [[[0, 63]], [[64, 127]]]


def test_summary_only_run_matches_the_full_run() -> None:
    s = spec(num_requests=6)
    full, quick = simulate(s).summary, simulate(s, summary_only=True).summary
    for key in ("completed", "duration", "median_ttft_ms", "median_tpot_ms", "num_steps"):
        assert quick[key] == full[key], key


def test_same_spec_same_events() -> None:
    from layerscope.export.events import to_jsonl

    assert to_jsonl(simulate(spec(num_requests=4))) == to_jsonl(simulate(spec(num_requests=4)))


def test_eplb_evens_the_expert_load_after_its_interval() -> None:
    """power_law routing loads one GPU's experts more than the other's; once EPLB re-places them (after
    step_interval steps) the busiest GPU's rows come down toward the mean."""
    s = ScenarioSpec.model_validate({**BASE, "deployment": {"dp": 2, "eplb": {"num_redundant_experts": 16,
                                                                             "step_interval": 4}},
                                     "workload": {"num_requests": 8, "input_len": 256, "output_len": 12, "seed": 0,
                                                  "routing": "power_law:1.2"}})
    steps = [e for e in simulate(s).events if e.kind == "dp_step"]
    assert [e.eplb_rebalanced for e in steps].index(True) == 4
    def spread(e: DPStepEvent) -> float:
        return max(e.expert_rows) / (sum(e.expert_rows) / len(e.expert_rows))
    before = [spread(e) for e in steps[:4]]
    after = [spread(e) for e in steps[4:]]
    assert max(after) < min(before)


def test_one_request_shorthand_refuses_dp() -> None:
    s = ScenarioSpec.model_validate({**BASE, "deployment": {"dp": 2}, "prompt_len": 256, "decode_steps": 2})
    with pytest.raises(ValueError, match="deployment.dp: data-parallel ranks serve a workload"):
        simulate(s)
