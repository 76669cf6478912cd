"""The serving engine: mixed steps, budget and max_num_seqs, preemption, prefix caching, metrics, determinism."""

from __future__ import annotations

from typing import Any

import pytest

from layerscope.events import RequestEvent, StepEvent, event_json
from layerscope.model.config import PRESETS
from layerscope.runtime.engine import simulate
from layerscope.runtime.metrics import serving_metrics
from layerscope.scenario import ScenarioSpec


def _spec(workload: dict[str, Any], **kw: Any) -> ScenarioSpec:
    base: dict[str, Any] = {"model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h200", "free_hbm_gib": 20.0}
    return ScenarioSpec.model_validate({**base, **kw, "workload": workload})


def _of(events: list[Any], kind: str) -> list[Any]:
    return [e for e in events if e.kind == kind]


def _outputs(events: list[Any]) -> dict[int, int]:
    return {e.request_id: e.num_output_tokens for e in _of(events, "request") if e.what == "finished"}


def test_a_step_holds_decodes_and_a_prefill_chunk() -> None:
    # 4 short requests decode while a long one arrives later and is prefilled in chunks beside them
    spec = _spec({"num_requests": 5, "input_len": 64, "output_len": 64, "request_rate": 50.0, "seed": 3},
                 scheduler={"max_num_batched_tokens": 256})
    r = simulate(spec)
    steps = _of(r.events, "step")
    mixed = [s for s in steps if s.decode_tokens > 0 and s.prefill_tokens > 0]
    assert mixed, "no step held both decodes and a prefill chunk"
    s = mixed[0]
    assert s.num_seqs == len(s.request_ids) == len(s.num_tokens)
    assert s.prefill_tokens + s.decode_tokens == sum(s.num_tokens)
    assert s.model_dur_us > s.dur_us * 40  # whole model = the layer x 48 layers (qwen3-30b-a3b)


def test_budget_and_max_num_seqs_are_never_exceeded() -> None:
    spec = _spec({"num_requests": 40, "input_len": 300, "output_len": 20, "range_ratio": 0.5, "seed": 1},
                 scheduler={"max_num_batched_tokens": 512, "max_num_seqs": 8})
    r = simulate(spec)
    steps = _of(r.events, "step")
    assert max(sum(s.num_tokens) for s in steps) == 512  # the budget is used to the full, never past it
    assert max(s.num_seqs for s in steps) == 8
    assert all(sum(s.num_tokens) <= 512 and s.num_seqs <= 8 and s.token_budget == 512 for s in steps)
    assert r.summary["completed"] == 40


def test_preemption_under_a_small_pool_loses_nothing() -> None:
    # ~2.5 GiB for KV: 24 requests of 2000 tokens cannot all stay resident, so the youngest are preempted
    spec = _spec({"num_requests": 24, "input_len": 1000, "output_len": 1000, "seed": 2}, free_hbm_gib=3.5)
    r = simulate(spec)
    requests = _of(r.events, "request")
    preempted = [e for e in requests if e.what == "preempted"]
    assert preempted and r.summary["num_preemptions"] == len(preempted)
    assert all(e.num_computed_tokens == 0 for e in preempted)  # recompute: its KV is gone
    want = {e.request_id: e.output_len for e in requests if e.what == "arrive"}
    assert _outputs(r.events) == want  # every request, exactly its output length
    assert r.summary["completed"] == 24
    # a preempted request is scheduled again and recomputes prompt + the tokens it had generated
    rid = preempted[0].request_id
    again = [e for e in requests if e.request_id == rid and e.what == "scheduled"]
    assert len(again) >= 2


def test_the_most_recently_admitted_request_is_preempted() -> None:
    spec = _spec({"num_requests": 24, "input_len": 1000, "output_len": 1000, "seed": 2}, free_hbm_gib=3.5)
    events = simulate(spec).events
    admitted: list[int] = []
    for e in _of(events, "request"):
        if e.what == "scheduled":
            admitted.append(e.request_id)
        elif e.what == "preempted":
            assert e.request_id == admitted[-1]
            admitted.remove(e.request_id)
        elif e.what == "finished":
            admitted.remove(e.request_id)


def test_prefix_cache_hits_skip_prefill() -> None:
    w = {"num_requests": 8, "input_len": 64, "output_len": 4, "shared_prefix_len": 512, "request_rate": 20.0}
    cold = simulate(_spec(w, scheduler={"prefix_caching": False}))
    warm = simulate(_spec(w, scheduler={"prefix_caching": True}))
    assert cold.summary["prefix_cache_hit_rate"] == 0.0
    # requests 1..7 find the 512-token prefix (32 blocks of 16) cached: 7 x 512 of 8 x 576 prompt tokens
    assert warm.summary["prefix_cache_hit_rate"] == pytest.approx(7 * 512 / (8 * 576), abs=1e-4)
    prefill = lambda r: sum(s.prefill_tokens for s in _of(r.events, "step"))  # noqa: E731
    assert prefill(cold) - prefill(warm) == 7 * 512
    assert sum(s.cached_blocks or 0 for s in _of(warm.events, "step")) == 7 * 32
    assert warm.summary["mean_ttft_ms"] < cold.summary["mean_ttft_ms"]
    assert _outputs(warm.events) == _outputs(cold.events)


def test_same_scenario_and_seed_give_identical_events() -> None:
    w = {"num_requests": 30, "input_len": 200, "output_len": 30, "range_ratio": 0.9, "request_rate": 30.0,
         "shared_prefix_len": 64}
    spec = _spec(w, scheduler={"prefix_caching": True, "max_num_batched_tokens": 512}, free_hbm_gib=2.6)
    a = [event_json(e) for e in simulate(spec).events]
    b = [event_json(e) for e in simulate(spec).events]
    assert a == b
    other = [event_json(e) for e in simulate(spec.with_overrides({"workload.seed": 1})).events]
    assert other != a


def test_max_concurrency_caps_requests_in_flight() -> None:
    spec = _spec({"num_requests": 20, "input_len": 32, "output_len": 8, "max_concurrency": 3})
    in_flight = peak = 0
    for e in _of(simulate(spec).events, "request"):
        in_flight += (e.what == "arrive") - (e.what == "finished")
        peak = max(peak, in_flight)
    assert peak == 3


def test_article_runtime_serves_with_its_chunk_scheduler() -> None:
    spec = ScenarioSpec.model_validate({"model": "article", "runtime": "article", "free_hbm_gib": 40.0,
                                        "chunk_size": 4096, "workload": {"num_requests": 3, "input_len": 9000,
                                                                         "output_len": 4}})
    r = simulate(spec)
    steps = _of(r.events, "step")
    assert max(s.prefill_tokens for s in steps) == 4096  # one chunk of one prompt per step
    assert all(sum(1 for n in s.num_tokens if n > 1) <= 1 for s in steps)
    assert r.summary["completed"] == 3


def test_a_request_too_big_for_the_pool_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="workload.input_len"):
        simulate(_spec({"num_requests": 2, "input_len": 30_000, "output_len": 10}, free_hbm_gib=2.6))


# -- metrics, by hand ---------------------------------------------------------------------------------------------
def _req(t: float, rid: int, what: str, n_in: int = 4, n_out: int = 3, computed: int = 0) -> RequestEvent:
    return RequestEvent(t_us=t, request_id=rid, what=what, input_len=n_in, output_len=n_out,  # type: ignore[arg-type]
                        num_computed_tokens=computed, num_output_tokens=0)


def _step(i: int, start: float, dur: float, ids: list[int], n: list[int], sampled: list[int]) -> StepEvent:
    return StepEvent(t_us=start, index=i, start_us=start, dur_us=dur / 10, model_dur_us=dur, num_seqs=len(ids),
                     prefill_tokens=sum(x for x in n if x > 1), decode_tokens=sum(1 for x in n if x == 1),
                     token_budget=8, request_ids=ids, num_tokens=n, num_sampled=sampled)


def test_metrics_as_vllm_bench_serve_defines_them() -> None:
    # request 0: 4-token prompt in one step (0-10 ms), decodes at 10-15 and 15-20 ms -> tokens at 10, 15, 20 ms
    # request 1 arrives at 5 ms; its prompt is chunked 2 + 2 (10-15, 15-20): first token at 20, then 25 ms
    # and is preempted at 25 ms, recomputing 5 tokens (25-30), its last token at 30 ms; each step says which
    # requests sampled a token at its end (num_sampled), the metrics only read it
    events = [
        _req(0, 0, "arrive"), _step(0, 0, 10_000, [0], [4], [1]),
        _req(5_000, 1, "arrive"), _step(1, 10_000, 5_000, [0, 1], [1, 2], [1, 0]),
        _step(2, 15_000, 5_000, [0, 1], [1, 2], [1, 1]), _req(20_000, 0, "finished"),
        _step(3, 20_000, 5_000, [1], [1], [1]),
        _req(25_000, 1, "preempted", computed=0), _step(4, 25_000, 5_000, [1], [6], [1]),
        _req(30_000, 1, "finished"),
    ]
    m = serving_metrics(events)
    assert m["completed"] == 2 and m["total_input_tokens"] == 8 and m["total_output_tokens"] == 6
    assert m["duration"] == pytest.approx(0.03)
    assert m["request_throughput"] == pytest.approx(2 / 0.03, rel=1e-3)
    assert m["output_throughput"] == pytest.approx(6 / 0.03, rel=1e-3)
    assert m["total_token_throughput"] == pytest.approx(14 / 0.03, rel=1e-3)
    # ttft: 10 and 15 ms; e2el: 20 and 25 ms; tpot (first token excluded): (20-10)/2 = 5 and (25-15)/2 = 5
    assert (m["mean_ttft_ms"], m["median_ttft_ms"]) == (12.5, 12.5)
    assert m["p99_ttft_ms"] == pytest.approx(10 + 0.99 * 5)
    assert (m["mean_e2el_ms"], m["mean_tpot_ms"]) == (22.5, 5.0)
    # itl: 5, 5 (request 0) and 5, 5 (request 1: 20 -> 25 -> 30)
    assert (m["mean_itl_ms"], m["p99_itl_ms"]) == (5.0, 5.0)
    assert m["num_preemptions"] == 1


def test_numerics_run_the_same_batches_at_the_scaled_size() -> None:
    # preemptions included: a preempted request's scaled caches are dropped and its tokens recomputed
    spec = _spec({"num_requests": 24, "input_len": 1000, "output_len": 60, "seed": 2}, free_hbm_gib=2.7,
                 numerics=True)
    r = simulate(spec)
    numerics = _of(r.events, "numerics")
    steps = _of(r.events, "step")
    assert r.summary["num_preemptions"] > 0
    assert len(numerics) >= len(steps) - 5  # (a step may hold no new scaled token)
    assert max(n.tokens for n in numerics) > 1 and all(n.scaled_model == "tiny" for n in numerics)
    assert 0 < r.summary["max_rel_error"] < 1e-5  # the batched forward is each sequence's own forward
    k = PRESETS["tiny"].num_experts_per_tok
    experts = _of(r.events, "experts")
    assert [sum(e.counts) for e in experts] == [k * n.tokens for n in numerics]  # the scaled router, every token


def test_numerics_on_a_serving_run_are_bounded() -> None:
    with pytest.raises(ValueError, match="field 'numerics'"):
        simulate(_spec({"num_requests": 500, "input_len": 100, "output_len": 100}, numerics=True))


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"faults": [{"kind": "memory_contention", "rate": 0.5}]}, "faults"),
        ({"actions": [{"do": "compact", "at_step": 1}]}, "actions"),
        ({"decode_page_hint": True}, "decode_page_hint"),
    ],
)
def test_one_request_features_are_refused_on_a_workload(extra: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"field '{field}'"):
        simulate(_spec({"num_requests": 2}, **extra))


def test_step_events_are_the_validated_events() -> None:
    r = simulate(_spec({"num_requests": 6, "input_len": 40, "output_len": 5}, scheduler={"prefix_caching": True}))
    for e in _of(r.events, "step"):
        again = StepEvent.model_validate(e.model_dump())
        assert again == e and event_json(again) == event_json(e)


def test_progress_reaches_one() -> None:
    seen: list[float] = []
    simulate(_spec({"num_requests": 30, "input_len": 64, "output_len": 64, "max_concurrency": 5}), progress=seen.append)
    assert seen and seen == sorted(seen) and 0.0 <= seen[0] and seen[-1] <= 1.0 and seen[-1] > 0.8


@pytest.mark.parametrize(
    "workload, kw",
    [
        ({"num_requests": 24, "input_len": 1000, "output_len": 1000, "seed": 2}, {"free_hbm_gib": 3.5}),  # preempts
        ({"num_requests": 30, "input_len": 200, "output_len": 30, "range_ratio": 0.9, "request_rate": 30.0,
          "shared_prefix_len": 64}, {"scheduler": {"prefix_caching": True, "max_num_batched_tokens": 512},
                                     "free_hbm_gib": 2.6}),  # prefix hits and cache evictions
        ({"num_requests": 20, "input_len": 300, "output_len": 40, "max_concurrency": 6}, {"runtime": "article"}),
        ({"num_requests": 12, "input_len": 100, "output_len": 1}, {}),  # one output token: no tpot, no itl
    ],
)
def test_a_summary_only_run_gives_the_full_runs_summary(workload: dict, kw: dict) -> None:
    spec = _spec(workload, **kw)
    full = simulate(spec)
    brief = simulate(spec, summary_only=True)
    assert brief.summary == full.summary
    assert [e.kind for e in brief.events] == ["summary"]  # no request, step, kernel or page events built
    if workload.get("shared_prefix_len"):
        assert full.summary["prefix_cache_hit_rate"] > 0
    if kw.get("free_hbm_gib") == 3.5:
        assert full.summary["num_preemptions"] > 0


def test_a_summary_only_run_compares_too() -> None:
    spec = _spec({"num_requests": 8, "input_len": 64, "output_len": 8},
                 compare={"label": "H100", "set": {"gpu": "h100-sxm"}})
    full, brief = simulate(spec), simulate(spec, summary_only=True)
    assert brief.compare is not None and full.compare is not None
    assert brief.compare.summary == full.compare.summary != full.summary


def test_step_events_say_which_requests_sampled_a_token() -> None:
    spec = _spec({"num_requests": 16, "input_len": 700, "output_len": 6, "range_ratio": 0.5, "seed": 5},
                 scheduler={"max_num_batched_tokens": 512})
    r = simulate(spec)
    sampled: dict[int, list[float]] = {}
    for s in _of(r.events, "step"):
        assert len(s.num_sampled) == len(s.request_ids) and set(s.num_sampled) <= {0, 1}
        for rid, n in zip(s.request_ids, s.num_sampled, strict=True):
            sampled.setdefault(rid, []).extend([s.start_us + s.model_dur_us] * n)
    requests = _of(r.events, "request")
    first = {e.request_id: e.t_us for e in requests if e.what == "first_token"}
    outputs = {e.request_id: e.output_len for e in requests if e.what == "arrive"}
    assert {rid: len(ts) for rid, ts in sampled.items()} == outputs  # every token, each once
    assert {rid: ts[0] for rid, ts in sampled.items()} == first  # the first at the first_token event
    assert any(0 in s.num_sampled for s in _of(r.events, "step"))  # chunked prompts: steps that sample nothing
