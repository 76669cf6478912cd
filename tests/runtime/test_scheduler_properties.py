"""Property test of the serving engine's scheduler and KV cache: seeded random workloads (budgets, pools small
enough to preempt, shared prefixes, Mooncake traces with hash ids, requests over max_model_len), each checked from
its events alone against what vLLM's V1 scheduler guarantees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from layerscope.events import event_json
from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec

NUM_WORKLOADS = 50
MODEL = "qwen3-30b-a3b"  # 48 layers, 4 KV heads: 96 KiB of KV per token, small enough for tiny pools
KIB_PER_TOKEN = 96


def _trace(rng: np.random.Generator, path: Path, n: int) -> str:
    """A Mooncake-style JSONL: Poisson-ish times, a few shared leading hash ids."""
    t, lines = 0, []
    for i in range(n):
        n_in = int(rng.integers(20, 1200))
        blocks = -(-n_in // 512)
        ids = [int(rng.integers(0, 3))] + [1000 + 10 * i + j for j in range(blocks - 1)]
        lines.append(json.dumps({"timestamp": t, "input_length": n_in, "output_length": int(rng.integers(1, 40)),
                                 "hash_ids": ids[:blocks]}))
        t += int(rng.integers(0, 40))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _workload_spec(seed: int, tmp: Path, engine: str = "vllm") -> ScenarioSpec:
    rng = np.random.default_rng(seed)
    mnbt = int(rng.choice([16, 64, 256, 512, 2048]))
    sched: dict[str, Any] = {
        "max_num_batched_tokens": mnbt,
        "max_num_seqs": int(rng.integers(1, min(mnbt, 16) + 1)),
        "prefix_caching": bool(rng.random() < 0.7),
        "long_prefill_token_threshold": int(rng.choice([0, 0, 32, 200])),
    }
    deployment: dict[str, Any] | None = None
    if rng.random() < 0.3:  # a max_model_len short enough to reject some requests
        deployment = {"tp": 1, "max_model_len": int(rng.choice([256, 512]))}
        if rng.random() < 0.5:  # chunked prefill off needs a budget of max_model_len
            sched.update(enable_chunked_prefill=False, max_num_batched_tokens=deployment["max_model_len"])
    if rng.random() < 0.25:
        work: dict[str, Any] = {"trace": _trace(rng, tmp / f"t{seed}.jsonl", int(rng.integers(2, 10)))}
    else:
        work = {
            "num_requests": int(rng.integers(1, 14)),
            "input_len": int(rng.integers(1, 400)),
            "output_len": int(rng.integers(1, 60)),
            "range_ratio": float(rng.choice([0.0, 0.5, 0.9])),
            "shared_prefix_len": int(rng.choice([0, 0, 16, 100])),
            "request_rate": float(rng.choice([np.inf, 5.0, 40.0])),
            "max_concurrency": int(rng.integers(1, 8)) if rng.random() < 0.3 else None,
        }
    work["seed"] = seed
    # pools from 60 to 400 blocks of 16 tokens: the small ones preempt (the longest request must still fit alone)
    tokens = int(rng.integers(60, 400)) * 16
    spec: dict[str, Any] = {"model": MODEL, "runtime": "vllm", "gpu": "h200", "seed": seed, "workload": work,
                            "scheduler": sched, "free_hbm_gib": tokens * KIB_PER_TOKEN / 2**20}
    if engine != "vllm":
        deployment = {**(deployment or {"tp": 1}), "engine": engine}
    if deployment is not None:
        spec["deployment"] = deployment
    return ScenarioSpec.model_validate(spec)


def _run(spec: ScenarioSpec) -> Any:
    """The run; a pool too small for the longest request alone is grown until it fits (the engine refuses it)."""
    for _ in range(8):
        try:
            return simulate(spec)
        except ValueError as e:
            if "KV pages" not in str(e):
                raise
            spec = spec.with_overrides({"free_hbm_gib": 2 * spec.free_hbm_gib})  # type: ignore[operator]
    raise AssertionError("no pool fits the longest request")


def _check(spec: ScenarioSpec, events: list[Any], summary: dict[str, Any], apart: bool = False) -> None:
    lim = spec.scheduler_limits
    # time is monotone; steps follow one another
    assert all(a.t_us <= b.t_us for a, b in zip(events, events[1:], strict=False)), "events out of time order"
    steps = [e for e in events if e.kind == "step"]
    for a, b in zip(steps, steps[1:], strict=False):
        assert b.start_us >= a.start_us + a.model_dur_us - 1e-6 and b.index == a.index + 1
    # the budget and max_num_seqs
    for s in steps:
        assert sum(s.num_tokens) <= lim.max_num_batched_tokens == s.token_budget
        assert s.num_seqs == len(s.request_ids) <= lim.max_num_seqs
        assert len(set(s.request_ids)) == len(s.request_ids)
        if lim.long_prefill_token_threshold:
            assert max(s.num_tokens) <= lim.long_prefill_token_threshold
        if not spec.scheduler.enable_chunked_prefill:
            assert all(n == 1 or n == lim.max_num_batched_tokens or n <= lim.max_model_len for n in s.num_tokens)
    _check_blocks(events, int(summary["pool_pages"]))
    _check_requests(spec, events, steps, summary, apart)


def _check_blocks(events: list[Any], pool_pages: int) -> None:
    """No slot allocated twice, freed twice or used after free; what is in use never exceeds the pool."""
    owner: dict[tuple[int, int], str] = {}
    for e in events:
        if e.kind not in ("page_alloc", "page_free", "page_cache", "page_evict"):
            continue
        for where in zip(e.banks, e.slots, strict=True):
            held = owner.get(where)
            if e.kind == "page_alloc":
                assert held is None, f"{where} allocated to {e.owner} while {held} holds it"
                owner[where] = e.owner
            elif e.kind == "page_evict":
                assert held == "prefix_cache", f"{where} evicted from the cache while {held} holds it"
                del owner[where]
            else:
                assert held == e.owner, f"{e.kind} of {where} by {e.owner}, held by {held}"
                if e.kind == "page_free":
                    del owner[where]
                else:
                    owner[where] = "prefix_cache"
        assert len(owner) <= pool_pages


def _check_requests(spec: ScenarioSpec, events: list[Any], steps: list[Any], summary: dict[str, Any],
                    apart: bool = False) -> None:
    """Replayed from the events: every request's tokens, first token and finish; `apart`: no step runs a decode
    beside a prefill chunk (SGLang's scheduler)."""
    reqs = [e for e in events if e.kind == "request"]
    arrive = {e.request_id: e for e in reqs if e.what == "arrive"}
    too_long = {rid for rid, e in arrive.items() if e.input_len + e.output_len > spec.max_model_len}
    assert {e.request_id for e in reqs if e.what == "rejected"} == too_long
    # replay each request's tokens from the step events: it samples when its computed tokens reach its known ones
    computed = dict.fromkeys(arrive, 0)
    outputs = dict.fromkeys(arrive, 0)
    live: set[int] = set()
    first: dict[int, float] = {}
    prefill_us = dict.fromkeys(arrive, 0.0)  # model time of the steps that ran it before its first token
    by_time: dict[float, list[Any]] = {}
    for e in reqs:
        by_time.setdefault(e.t_us, []).append(e)
    at = sorted({*by_time, *(s.start_us for s in steps)})
    step_at = {s.start_us: s for s in steps}
    for t in at:
        for e in by_time.get(t, []):
            if e.what == "scheduled":
                assert e.request_id not in live and e.request_id not in too_long
                live.add(e.request_id)
                computed[e.request_id] = e.num_computed_tokens
            elif e.what == "preempted":
                live.discard(e.request_id)
                computed[e.request_id] = 0
        s = step_at.get(t)
        if s is None:
            continue
        end = s.start_us + s.model_dur_us
        kinds = {outputs[rid] > 0 and computed[rid] == arrive[rid].input_len + outputs[rid] - 1  # a decode
                 for rid in s.request_ids}
        assert not apart or len(kinds) < 2, f"step {s.index} runs decodes beside a prefill chunk"
        for rid, n in zip(s.request_ids, s.num_tokens, strict=True):
            assert rid in live, f"request {rid} runs in step {s.index} without its blocks"
            assert s.start_us >= arrive[rid].t_us
            computed[rid] += n
            known = arrive[rid].input_len + outputs[rid]
            assert computed[rid] <= known, f"request {rid} computed past its known tokens"
            if rid not in first:
                prefill_us[rid] += s.model_dur_us
            if computed[rid] == known:
                outputs[rid] += 1
                first.setdefault(rid, end)
                if outputs[rid] == arrive[rid].output_len:
                    live.discard(rid)
    finished = {e.request_id: e for e in reqs if e.what == "finished"}
    assert set(finished) == set(arrive) - too_long, "a request never finished"
    for rid, e in finished.items():
        assert outputs[rid] == e.num_output_tokens == arrive[rid].output_len
    for e in reqs:
        if e.what == "first_token":
            assert first[e.request_id] == pytest.approx(e.t_us)
            assert e.t_us - arrive[e.request_id].t_us >= prefill_us[e.request_id] - 1e-6  # TTFT >= its own prefill
    _check_summary(arrive, finished, first, reqs, steps, summary, too_long)


def _check_summary(arrive: dict[int, Any], finished: dict[int, Any], first: dict[int, float], reqs: list[Any],
                   steps: list[Any], summary: dict[str, Any], too_long: set[int]) -> None:
    """The summary's figures, recomputed here from the events alone."""
    ttft = [(first[r] + arrive[r].frontend_us - arrive[r].t_us) / 1000 for r in finished]
    e2el = [(e.t_us + arrive[r].frontend_us - arrive[r].t_us) / 1000 for r, e in finished.items()]
    scheduled = [e for e in reqs if e.what == "scheduled"]
    once: dict[int, Any] = {}
    for e in scheduled:
        once.setdefault(e.request_id, e)  # the first admission: never preempted before (vLLM's PrefixCacheStats)
    queries = sum(arrive[r].input_len for r in once)
    expected = {
        "completed": len(finished), "failed": len(too_long),
        "num_preemptions": sum(e.what == "preempted" for e in reqs),
        "total_input_tokens": sum(arrive[r].input_len for r in finished),
        "total_output_tokens": sum(e.num_output_tokens for e in finished.values()),
        "num_steps": len(steps), "max_step_tokens": max((sum(s.num_tokens) for s in steps), default=0),
        "max_step_seqs": max((s.num_seqs for s in steps), default=0),
    }
    assert {k: summary[k] for k in expected} == expected
    if finished:
        assert summary["mean_ttft_ms"] == pytest.approx(float(np.mean(ttft)), abs=1e-3)
        assert summary["mean_e2el_ms"] == pytest.approx(float(np.mean(e2el)), abs=1e-3)
    hits = sum(e.num_computed_tokens for e in once.values())
    if summary["prefix_caching"]:
        assert (summary["prefix_cache_queries"], summary["prefix_cache_hits"]) == (queries, hits)
        assert summary["prefix_cache_hit_rate"] == pytest.approx(hits / queries if queries else 0.0, abs=1e-4)
    else:
        assert hits == summary["prefix_cache_queries"] == summary["prefix_cache_hits"] == 0


@pytest.mark.parametrize("seed", range(NUM_WORKLOADS))
def test_random_workloads_keep_vllms_guarantees(seed: int, tmp_path: Path) -> None:
    spec = _workload_spec(seed, tmp_path)
    r = _run(spec)
    events = [e for e in r.events if e.kind != "summary"]
    _check(r.spec, events, r.summary)
    if seed % 5 == 0:  # the same scenario and seed: the same events, byte for byte
        again = _run(r.spec)
        assert [event_json(e) for e in again.events] == [event_json(e) for e in r.events]


@pytest.mark.parametrize("seed", range(0, NUM_WORKLOADS, 2))
def test_sglangs_scheduler_keeps_them_and_never_mixes(seed: int, tmp_path: Path) -> None:
    """The same workloads under deployment.engine sglang (prefill batches first, apart from the decodes)."""
    spec = _workload_spec(seed, tmp_path, engine="sglang")
    r = _run(spec)
    _check(r.spec, [e for e in r.events if e.kind != "summary"], r.summary, apart=True)


def test_the_random_workloads_reach_the_cases_they_are_for(tmp_path: Path) -> None:
    """Across the seeds the checks above meet preemption, prefix hits, rejection, traces and chunked prefill off."""
    seen = {"preempted": 0, "hits": 0, "rejected": 0, "trace": 0, "no_chunks": 0}
    for seed in range(NUM_WORKLOADS):
        spec = _workload_spec(seed, tmp_path)
        seen["trace"] += spec.workload is not None and spec.workload.trace is not None
        seen["no_chunks"] += not spec.scheduler.enable_chunked_prefill
        if seed % 3:
            continue  # a third of them run again here: enough to meet each case
        r = _run(spec)
        seen["preempted"] += r.summary["num_preemptions"] > 0
        seen["hits"] += r.summary["prefix_cache_hit_rate"] > 0
        seen["rejected"] += r.summary["failed"] > 0
    assert all(seen.values()), seen
