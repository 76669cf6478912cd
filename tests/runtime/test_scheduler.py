"""The V1 scheduler's rules, as vLLM writes them: prefix caching on by default and caching at allocation, the
usage-context defaults per GPU, chunked prefill and long_prefill_token_threshold, what vLLM refuses."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec


def _spec(workload: dict[str, Any], **kw: Any) -> ScenarioSpec:
    base: dict[str, Any] = {"model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h200", "free_hbm_gib": 20.0}
    return ScenarioSpec.model_validate({**base, **kw, "workload": workload})


def _of(events: list[Any], kind: str, what: str | None = None) -> list[Any]:
    return [e for e in events if e.kind == kind and (what is None or e.what == what)]


def test_prefix_caching_is_on_by_default_and_a_preset_may_turn_it_off() -> None:
    assert ScenarioSpec().scheduler.prefix_caching is True
    assert ScenarioSpec(scheduler={"prefix_caching": False}).scheduler.prefix_caching is False


def test_a_shared_prefix_burst_shares_its_prefix_within_the_first_step() -> None:
    # 10 prompts of a 1500-token shared prefix and 900 tokens of their own, all at t = 0, an 8192-token budget:
    # the first request's prefix blocks are cached when they are allocated, so the next ones pay 912 tokens each
    # (93 whole blocks of the prefix hit) and 7 whole prompts and a chunk of an 8th fit step 0; cached only after
    # the step, 3 prompts and a chunk of a 4th would
    work = {"num_requests": 10, "input_len": 900, "output_len": 4, "shared_prefix_len": 1500, "seed": 1}
    on = simulate(_spec(work))
    off = simulate(_spec(work, scheduler={"prefix_caching": False}))
    first = _of(on.events, "step")[0]
    assert first.num_tokens == [2400] + [912] * 6 + [8192 - 2400 - 6 * 912]
    assert first.cached_blocks == 7 * 93
    assert [e.num_computed_tokens for e in _of(on.events, "request", "scheduled")][:8] == [0] + [1488] * 7
    assert _of(off.events, "step")[0].num_tokens == [2400] * 3 + [8192 - 3 * 2400]
    assert on.summary["mean_ttft_ms"] < off.summary["mean_ttft_ms"]
    assert on.summary["completed"] == off.summary["completed"] == 10


def test_finished_requests_leave_their_full_blocks_in_the_prefix_cache() -> None:
    r = simulate(_spec({"num_requests": 4, "input_len": 100, "output_len": 20, "shared_prefix_len": 64}))
    kept = _of(r.events, "page_cache")
    assert {e.request_id for e in kept} == {0, 1, 2, 3}
    for e in kept:
        assert e.owner == f"req{e.request_id}" and len(e.banks) == len(e.slots) > 0
    freed = {(b, s) for e in _of(r.events, "page_free") for b, s in zip(e.banks, e.slots, strict=True)}
    assert not freed & {(b, s) for e in kept for b, s in zip(e.banks, e.slots, strict=True)}


@pytest.mark.parametrize(("gpu", "tokens", "seqs"), [
    ("h100-sxm", 8192, 1024), ("h200", 8192, 1024), ("b200", 8192, 1024), ("a100-80g-sxm", 2048, 256)])
def test_defaults_follow_vllms_openai_server_context_per_gpu(gpu: str, tokens: int, seqs: int) -> None:
    lim = ScenarioSpec(gpu=gpu, workload={}).scheduler_limits
    assert (lim.max_num_batched_tokens, lim.max_num_seqs) == (tokens, seqs)
    assert gpu in lim.source


def test_defaults_follow_vllms_rules_for_what_the_scenario_sets() -> None:
    assert ScenarioSpec(workload={}, scheduler={"max_num_batched_tokens": 512}).scheduler_limits.max_num_seqs == 512
    no_chunks = ScenarioSpec(workload={}, scheduler={"enable_chunked_prefill": False}).scheduler_limits
    assert no_chunks.max_num_batched_tokens == 40960  # max_model_len, the model's context
    partial = ScenarioSpec(workload={}, scheduler={"max_num_partial_prefills": 2}).scheduler_limits
    assert partial.long_prefill_token_threshold == int(40960 * 0.04)


def test_the_defaults_reach_the_summary_and_the_deployment_card() -> None:
    spec = _spec({"num_requests": 2, "input_len": 64, "output_len": 4}, gpu="a100-80g-sxm",
                 deployment={"tp": 1}, free_hbm_gib=None)
    r = simulate(spec)
    assert (r.summary["max_num_batched_tokens"], r.summary["max_num_seqs"]) == (2048, 256)
    dep = _of(r.events, "deployment")[0]
    assert (dep.max_num_batched_tokens, dep.max_num_seqs, dep.prefix_caching) == (2048, 256, True)
    assert "a100" in dep.scheduler_source


@pytest.mark.parametrize(("scheduler", "field", "needle"), [
    ({"max_num_batched_tokens": 512, "max_num_seqs": 1024}, "scheduler.max_num_batched_tokens",
     "max_num_batched_tokens (512) must be greater than or equal to max_num_seqs (1024)."),
    ({"max_num_batched_tokens": 4096, "enable_chunked_prefill": False}, "scheduler.max_num_batched_tokens",
     "max_num_batched_tokens (4096) is smaller than max_model_len (40960)."),
    ({"max_num_partial_prefills": 2, "enable_chunked_prefill": False}, "scheduler.max_num_partial_prefills",
     "Chunked prefill must be enabled to set max_num_partial_prefills > 1."),
    ({"max_num_partial_prefills": 2, "long_prefill_token_threshold": 50000}, "scheduler.long_prefill_token_threshold",
     "long_prefill_token_threshold (50000) cannot be greater than the max_model_len (40960)."),
])
def test_what_vllm_refuses_at_start_up_is_refused_in_its_words(scheduler: dict, field: str, needle: str) -> None:
    with pytest.raises(ValidationError) as e:
        ScenarioSpec(workload={}, scheduler=scheduler)
    assert f"field '{field}'" in str(e.value) and needle in str(e.value)


def test_a_request_longer_than_max_model_len_is_rejected_and_the_run_goes_on() -> None:
    work = {"num_requests": 12, "input_len": 800, "output_len": 200, "range_ratio": 0.5, "seed": 4}
    r = simulate(_spec(work, deployment={"tp": 1, "max_model_len": 1100}))
    arrive = {e.request_id: e.input_len + e.output_len for e in _of(r.events, "request", "arrive")}
    too_long = {rid for rid, n in arrive.items() if n > 1100}
    assert too_long and len(too_long) < 12
    assert {e.request_id for e in _of(r.events, "request", "rejected")} == too_long
    assert not {e.request_id for e in _of(r.events, "request", "scheduled")} & too_long
    assert r.summary["failed"] == len(too_long) and r.summary["completed"] == 12 - len(too_long)
    every = simulate(_spec({**work, "num_requests": 2, "input_len": 2000}, deployment={"tp": 1, "max_model_len": 1100}))
    assert every.summary["failed"] == 2 and every.summary["completed"] == 0  # nothing to serve: the run still ends


def test_without_chunked_prefill_a_prompt_waits_for_a_step_with_room() -> None:
    sched = {"max_num_batched_tokens": 2048, "enable_chunked_prefill": False, "prefix_caching": False}
    work = {"num_requests": 3, "input_len": 1500, "output_len": 3}
    r = simulate(_spec(work, deployment={"tp": 1, "max_model_len": 2048}, scheduler=sched))
    steps = _of(r.events, "step")
    assert all(n in (1, 1500) for s in steps for n in s.num_tokens)  # whole prompts, never a chunk
    chunked = simulate(_spec(work, deployment={"tp": 1, "max_model_len": 2048},
                             scheduler={**sched, "enable_chunked_prefill": True}))
    assert _of(chunked.events, "step")[0].num_tokens == [1500, 548]


def test_long_prefill_token_threshold_caps_one_request_per_step() -> None:
    r = simulate(_spec({"num_requests": 3, "input_len": 1000, "output_len": 3},
                       scheduler={"long_prefill_token_threshold": 256}))
    steps = _of(r.events, "step")
    assert max(n for s in steps for n in s.num_tokens) == 256
    assert steps[0].num_tokens == [256, 256, 256]  # three prompts share the step, 256 tokens each
    assert r.summary["completed"] == 3


def test_a_summary_only_run_counts_rejections_and_prefix_stats_as_the_full_run() -> None:
    spec = _spec({"num_requests": 10, "input_len": 600, "output_len": 100, "range_ratio": 0.6, "seed": 2,
                  "shared_prefix_len": 64}, deployment={"tp": 1, "max_model_len": 900})
    full, brief = simulate(spec), simulate(spec, summary_only=True)
    assert brief.summary == full.summary and full.summary["failed"] > 0
    scheduled = [e for e in _of(full.events, "request", "scheduled")]
    assert full.summary["prefix_cache_hits"] == sum(e.num_computed_tokens for e in scheduled) > 0
    assert full.summary["prefix_cache_queries"] == sum(e.input_len for e in scheduled)
    assert full.summary["prefix_cache_hit_rate"] == round(
        full.summary["prefix_cache_hits"] / full.summary["prefix_cache_queries"], 4)


@pytest.mark.parametrize(("async_scheduling", "steps_later"), [(False, 1), (True, 2)])
def test_async_scheduling_admits_a_new_request_one_step_later(async_scheduling: bool, steps_later: int) -> None:
    # vLLM's async scheduling (on by default since v0.12) schedules step N+1 while step N runs: a request that
    # arrives during step N is seen when N+1 is scheduled next, so it joins step N+2 instead of N+1
    spec = _spec({"num_requests": 2, "input_len": 64, "output_len": 200, "request_rate": 20.0, "seed": 5},
                 deployment={"tp": 1, "async_scheduling": async_scheduling})
    r = simulate(spec)
    steps = _of(r.events, "step")
    arrive = next(e.t_us for e in _of(r.events, "request", "arrive") if e.request_id == 1)
    admitted = next(e.t_us for e in _of(r.events, "request", "scheduled") if e.request_id == 1)
    k = next(i for i, s in enumerate(steps) if s.start_us <= arrive < s.start_us + s.model_dur_us)
    assert admitted == steps[k + steps_later].start_us


def _mixed_steps(events: list[Any]) -> tuple[int, int]:
    """(steps that carry a prefill chunk beside decodes, steps that carry a prefill chunk)."""
    steps = [e.num_tokens for e in _of(events, "step")]
    with_prefill = [n for n in steps if any(t > 1 for t in n)]
    return sum(1 for n in with_prefill if 1 in n), len(with_prefill)


def test_sglang_runs_prefill_batches_apart_from_the_decodes_vllm_mixes_them() -> None:
    # SGLang's get_next_batch_to_run: a new prefill batch first, the running decodes only when there is none
    # (enable_mixed_chunk off by default); vLLM V1 schedules the decodes and the new prompts in one step
    work = {"num_requests": 12, "input_len": 300, "output_len": 40, "range_ratio": 0.5, "max_concurrency": 4,
            "seed": 3}
    sglang = simulate(_spec(work, deployment={"tp": 1, "engine": "sglang"}))
    vllm = simulate(_spec(work, deployment={"tp": 1}))
    mixed, prefills = _mixed_steps(sglang.events)
    assert prefills >= 3 and mixed == 0
    assert _mixed_steps(vllm.events)[0] > 0
    assert sglang.summary["completed"] == vllm.summary["completed"] == 12
    # a decode waits out every prefill pass that comes while it runs: TPOT grows beside vLLM's scheduler
    assert sglang.summary["mean_tpot_ms"] > vllm.summary["mean_tpot_ms"]


def test_sglang_finishes_the_chunked_prompts_before_the_decodes_run_again() -> None:
    # two 5000-token prompts at once over a 2048-token budget: SGLang's prefill passes run back to back (its
    # chunked_req leads the next prefill batch) and the first request decodes only once no prompt is left;
    # vLLM decodes it beside the second prompt's chunks
    work = {"num_requests": 2, "input_len": 5000, "output_len": 8}
    budget = {"max_num_batched_tokens": 2048}

    def chunks_before_first_decode(engine: str) -> list[list[int]]:
        r = simulate(_spec(work, deployment={"tp": 1, "engine": engine}, scheduler=budget))
        steps = [e.num_tokens for e in _of(r.events, "step")]
        first = next(i for i, n in enumerate(steps) if 1 in n)
        return steps[:first]

    sglang = chunks_before_first_decode("sglang")
    assert [sum(n) for n in sglang] == [2048, 2048, 2048, 2048, 1808]  # all 10,000 prompt tokens first
    assert sum(map(sum, chunks_before_first_decode("vllm"))) == 3 * 2048  # r0 decodes in the 4th step, beside r1
