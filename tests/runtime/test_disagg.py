"""Prefill and decode apart (runtime/disagg.py): a request's life through both pools, back-pressure, the pools'
figures, and the summary-only run giving the full run's figures."""

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


def test_one_requests_life_through_both_pools() -> None:
    """arrive and the prompt's step on the prefill engine (instance 0); the KV's transfer and every decode step
    on the decode engine (instance 1); TTFT ends at transfer_done, which is the post (its descriptors) + lane bytes /
    NVLink later than the transfer's start."""
    spec = _spec({"num_requests": 1, "input_len": 2000, "output_len": 8, "range_ratio": 0.0})
    r = simulate(spec)
    life = [(e.what, e.instance) for e in r.events if e.kind == "request"]
    assert life == [("arrive", 0), ("scheduled", 0), ("transfer_start", 1), ("transfer_done", 1), ("finished", 1)]
    steps = [e for e in r.events if e.kind == "step"]
    assert {(e.instance, e.prefill_tokens > 0) for e in steps} == {(0, True), (1, False)}
    assert sum(e.decode_tokens for e in steps if e.instance == 1) == 8 - 1  # the first token came from prefill
    ev = {e.what: e for e in r.events if e.kind == "request"}
    prefill_end = max(e.start_us + e.model_dur_us for e in steps if e.instance == 0)
    assert ev["transfer_start"].t_us >= prefill_end
    size = transfer_size(PRESETS["qwen3-235b-a22b"], 2000, 4, 4, "bf16")
    assert size.descriptors == 2 * 94 * 125  # K and V of 94 layers x 2000 / 16 blocks
    expect = size.post_us + size.lane_bytes / 450e9 * 1e6  # H200 NVLink 4: 450 GB/s a direction
    assert ev["transfer_done"].t_us - ev["transfer_start"].t_us == pytest.approx(expect, rel=1e-6)
    kernels = [e for e in r.events if e.kind == "kernel" and e.stream == "kv_transfer"]
    assert len(kernels) == 1 and kernels[0].dur_us == pytest.approx(expect, rel=1e-6)
    arrive = ev["arrive"]
    ttft = (ev["transfer_done"].t_us - arrive.t_us + arrive.frontend_us) / 1000.0
    assert r.summary["mean_ttft_ms"] == pytest.approx(ttft, abs=1e-3)
    assert r.summary["kv_transfers"] == 1 and r.summary["num_gpus"] == 8
    assert r.summary["completed"] == 1 and r.summary["total_output_tokens"] == 8


def test_summary_only_gives_the_full_runs_figures() -> None:
    spec = _spec({"num_requests": 24, "input_len": 1024, "output_len": 32, "request_rate": 20.0},
                 goodput={"ttft": 300.0, "tpot": 20.0})
    full, quick = simulate(spec).summary, simulate(spec, summary_only=True).summary
    assert full == quick and full["completed"] == 24 and "request_goodput" in full


def test_decode_pool_out_of_room_back_pressures_the_prefill_pool() -> None:
    """A decode engine with room for 2 running requests (max_num_seqs) and a small KV pool on both sides: the
    prefilled requests wait in its inbox (kv wait > 0), the prefill engine holds their blocks until read, and, its
    pool full of held blocks, stalls; every request still completes."""
    spec = _spec({"num_requests": 12, "input_len": 4000, "output_len": 64, "range_ratio": 0.0},
                 scheduler={"max_num_seqs": 2}, free_hbm_gib=1.0)
    s = simulate(spec, summary_only=True).summary
    assert s["completed"] == 12
    assert s["mean_kv_wait_ms"] > 2 * s["mean_kv_transfer_ms"]  # the wait for decode room dominates
    assert s["prefill_stalls"] > 0
    tokens_per_request = 4000
    assert s["max_prefill_held_requests"] * tokens_per_request <= s["prefill_kv_tokens"]
    free = simulate(_spec({"num_requests": 12, "input_len": 4000, "output_len": 64, "range_ratio": 0.0}),
                    summary_only=True).summary
    assert free["prefill_stalls"] == 0 and free["mean_ttft_ms"] < s["mean_ttft_ms"]


def test_routing_and_pools_of_several_engines() -> None:
    """2P2D round robin: both prefill engines and both decode engines work; least loaded also completes."""
    for routing in ("round_robin", "least_loaded"):
        spec = _spec({"num_requests": 16, "input_len": 512, "output_len": 16},
                     dis={"prefill": {"instances": 2, "tp": 2, "ep": 1}, "decode": {"instances": 2, "tp": 2},
                          "routing": routing}, dep={"weight_dtype": "fp8"})
        r = simulate(spec)
        assert {e.instance for e in r.events if e.kind == "step"} == {0, 1, 2, 3}
        assert r.summary["completed"] == 16 and r.summary["num_gpus"] == 8


def test_streaming_overlaps_the_transfer_with_prefill() -> None:
    base = {"num_requests": 4, "input_len": 16000, "output_len": 4, "range_ratio": 0.0}
    plain = simulate(_spec(base), summary_only=True).summary
    streamed = simulate(_spec(base, dis={"streaming": True}), summary_only=True).summary
    # layer by layer, all but the last layer's post (and bytes) hide behind the prefill: 16000 tokens post
    # 188,000 descriptors, ~604 ms at once, ~7 ms a layer
    size = transfer_size(PRESETS["qwen3-235b-a22b"], 16000, 4, 4, "bf16")
    hidden_ms = (size.post_us - size.layer_post_us(94)) / 1000
    assert plain["mean_ttft_ms"] - streamed["mean_ttft_ms"] > 0.9 * hidden_ms


def test_a_client_at_max_concurrency_gets_every_request_served() -> None:
    """Slots free on the decode engine: the idle prefill engine is woken for the next send."""
    spec = _spec({"num_requests": 30, "input_len": 200, "output_len": 30, "max_concurrency": 4})
    s = simulate(spec, summary_only=True).summary
    assert s["completed"] == 30 and s["kv_transfers"] == 30


def test_the_decode_engine_sees_a_transfer_done_at_its_next_poll() -> None:
    """vLLM's NixlConnector polls its READs once per engine step (get_finished after the forward): a transfer
    whose bytes land while the decode engine is mid-step is done, for it and for NIXL's xferDuration, at that
    step's end; one landing on an idle engine is seen at once. The first request decodes alone while the second's
    KV arrives: its transfer_done falls on a decode step's end, later than post + bytes / NVLink."""
    spec = _spec({"num_requests": 2, "input_len": 2000, "output_len": 64, "range_ratio": 0.0, "request_rate": 40.0})
    r = simulate(spec)
    done = {e.request_id: e.t_us for e in r.events if e.kind == "request" and e.what == "transfer_done"}
    start = {e.request_id: e.t_us for e in r.events if e.kind == "request" and e.what == "transfer_start"}
    steps = [(e.start_us, e.start_us + e.model_dur_us) for e in r.events if e.kind == "step" and e.instance == 1]
    size = transfer_size(PRESETS["qwen3-235b-a22b"], 2000, 4, 4, "bf16")
    wire = size.post_us + size.lane_bytes / 450e9 * 1e6
    assert done[0] - start[0] == pytest.approx(wire, rel=1e-6)  # the decode engine was idle: seen at once
    late = done[1] - start[1]
    assert late > wire * (1 + 1e-6), (late, wire)
    assert any(end == pytest.approx(done[1], abs=1e-3) for _, end in steps)  # at a step's end: the poll
    assert not any(s < done[1] - 1e-3 and done[1] + 1e-3 < end for s, end in steps)  # never mid-step
    assert late - wire < max(end - s for s, end in steps) + 1e-3  # by at most one step
    kernel = next(e for e in r.events if e.kind == "kernel" and e.stream == "kv_transfer" and "request 1:" in e.shapes)
    assert kernel.dur_us == pytest.approx(late, rel=1e-6)
