"""The pools' engines in their DP-group forms (runtime/pools.py): dp > 1 in the decode pool and in the prefill pool,
the DP balancer's choice of rank, lockstep steps, links per sender rank, back-pressure, and the layout checks."""

from __future__ import annotations

from typing import Any

import pytest

from layerscope.model.config import PRESETS
from layerscope.runtime.engine import simulate
from layerscope.runtime.transfer import transfer_size
from layerscope.scenario import ScenarioSpec

POOLS = {"prefill": {"tp": 4}, "decode": {"tp": 4}}


def _spec(workload: dict[str, Any], **more: Any) -> ScenarioSpec:
    dis = {**POOLS, **more.pop("dis", {})}
    dep = {"tp": 8, "disaggregation": dis, **more.pop("dep", {})}
    return ScenarioSpec(gpu="h200", workload=workload, deployment=dep, **more)


def test_a_decode_pool_with_data_parallel_attention() -> None:
    """decode.dp=4 (tp 1, ep derived = 4): the decode engine is a DP group (runtime/dp_group.py) whose ranks are
    instances 1..4 after the prefill engine; each transfer lands on one rank (the DP balancer's lowest score), the
    ranks step in lockstep (dp_step events), and the summary-only run gives the full run's figures."""
    spec = _spec({"num_requests": 16, "input_len": 1024, "output_len": 32, "request_rate": 8.0},
                 dis={"decode": {"tp": 1, "dp": 4}}, dep={"weight_dtype": "fp8"})
    assert spec.deployment is not None and spec.deployment.disaggregation is not None
    assert spec.deployment.disaggregation.num_gpus == 8
    r = simulate(spec)
    starts = [e for e in r.events if e.kind == "request" and e.what == "transfer_start"]
    assert len(starts) == 16 and {e.instance for e in starts} == {1, 2, 3, 4}  # spread over the four ranks
    dp_steps = [e for e in r.events if e.kind == "dp_step"]
    assert dp_steps and all(len(e.busy_us) == 4 for e in dp_steps)
    steps = [e for e in r.events if e.kind == "step"]
    assert {e.instance for e in steps} == {0, 1, 2, 3, 4} and all(e.prefill_tokens == 0 for e in steps if e.instance)
    for e in starts:  # every request decodes on the rank that read its KV
        mine = [s for s in steps if e.request_id in s.request_ids and s.instance > 0]
        assert mine and {s.instance for s in mine} == {e.instance}
    s = r.summary
    assert s["completed"] == 16 and s["decode_dp"] == 4 and s["num_gpus"] == 8
    assert s["decode_all2all_backend"] == "deepep_low_latency" and s["decode_a2a_share"] > 0
    assert s == simulate(spec, summary_only=True).summary


def test_pool_dp_is_checked_where_it_is_given() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="ep=2: with dp=4 x tp=1 the experts spread over all 4 GPUs"):
        _spec({"num_requests": 2}, dis={"decode": {"tp": 1, "dp": 4, "ep": 2}})
    with pytest.raises(ValidationError, match="deployment.disaggregation.decode: .* leave no KV cache"):
        _spec({"num_requests": 2}, dis={"decode": {"tp": 1, "dp": 4}})  # bf16 weights over 4 GPUs: no room left


PREFILL_DP = {"prefill": {"tp": 1, "dp": 4}, "decode": {"tp": 4}}


def test_a_prefill_pool_with_data_parallel_attention() -> None:
    """prefill.dp=4: the prefill engine is a DP group whose ranks are instances 0..3, the decode engine instance 4.
    Two prompts at once go to two ranks (the DP balancer), are prefilled in one lockstep step, and their KV leaves
    from each rank's own GPU: the two transfers do not share a link, each takes the lone transfer's time."""
    spec = _spec({"num_requests": 2, "input_len": 2048, "output_len": 4, "range_ratio": 0.0}, dis=PREFILL_DP,
                 dep={"weight_dtype": "fp8"})
    r = simulate(spec)
    sched = sorted((e.request_id, e.instance) for e in r.events if e.kind == "request" and e.what == "scheduled")
    assert sched == [(0, 0), (1, 1)]
    assert {e.instance for e in r.events if e.kind == "request" and e.what == "transfer_start"} == {4}
    size = transfer_size(PRESETS["qwen3-235b-a22b"], 2048, 1, 4, "bf16")
    lone = (size.post_us + size.lane_bytes / 450e9 * 1e6) / 1000
    s = r.summary
    assert s["mean_kv_transfer_ms"] == pytest.approx(lone, abs=1e-3) == s["p99_kv_transfer_ms"]
    assert s["prefill_dp"] == 4 and s["num_gpus"] == 8 and s["prefill_a2a_share"] > 0
    assert s == simulate(spec, summary_only=True).summary


def test_a_prefill_pool_of_dp_ranks_back_pressures_too() -> None:
    """Room for 2 decodes and small pools: ranks whose held blocks leave no room run the dummy batch, the engine
    stalls once no rank can schedule, and every request completes."""
    spec = _spec({"num_requests": 16, "input_len": 2000, "output_len": 32, "range_ratio": 0.0}, dis=PREFILL_DP,
                 dep={"weight_dtype": "fp8"}, scheduler={"max_num_seqs": 2}, free_hbm_gib=1.0)
    s = simulate(spec, summary_only=True).summary
    assert s["completed"] == 16 and s["prefill_stalls"] > 0 and s["mean_kv_wait_ms"] > 0
    assert s["max_prefill_held_requests"] * 2000 <= s["prefill_kv_tokens"]  # held within the ranks' pools
