"""Claims: the article's figures as data, verdicts that compare like with like, measurements read from events."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from layerscope.claims import (
    ARTICLE_SETTING,
    CLAIMS,
    NOT_QUOTED,
    VERDICTS,
    article_run,
    build_claims,
    off_factor,
    verdict,
)
from layerscope.events import ChunkEvent, DecodeStepEvent, MemoryEvent, PageAllocEvent
from layerscope.scenario import ScenarioSpec

GIB = 1024**3


def test_claims_are_data_with_provenance() -> None:
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids))
    for c in CLAIMS:
        assert c.what and c.unit and c.where and c.how
        assert c.kind in ("value", "at_most", "exact") and c.tolerance >= 0 and c.scope in ("article", "run")


def test_the_quoted_figures_are_all_there() -> None:
    stated = {c.id: c.stated for c in CLAIMS}
    # The figures issues 3, 5 and 9 quote from the article; anything else is stated=None.
    assert stated["prefill_layer"] == 42.0 and stated["decode_step"] == 8.3 and stated["decode_pipeline"] == 7.92
    assert stated["decode_no_allocator"] == 22.0 and stated["first_step_overhead"] == pytest.approx(1.2 + 0.8 + 0.3)
    assert stated["decode_sla"] == 10.0 and stated["chunk_size"] == 4096 and stated["chunk_size_low_mem"] == 2048
    assert stated["chunk_threshold"] == 12.0 and stated["page_size"] == 256 and stated["banks"] == 32
    assert stated["lut_sigmoid"] == 1e-4 and stated["shared_rmsnorm"] == 0.03 and stated["weight_bits"] == 2.0
    # the article's Nsight profile (issue 9): prefill HBM 89% / L2 below 40%, decode HBM 32% / L2 92%
    assert (stated["prefill_hbm_util"], stated["decode_hbm_util"]) == (89.0, 32.0)
    assert (stated["prefill_l2_hit"], stated["decode_l2_hit"]) == (40.0, 92.0)
    assert {k for k, v in stated.items() if v is None} == {"dequant_share", "page_hint_jitter", "attention_launches"}
    # the figures the article measured in its own setting are evaluated there
    scoped = {c.id for c in CLAIMS if c.scope == "article"}
    assert {"prefill_layer", "decode_step", "decode_no_allocator", "prefill_hbm_util"} <= scoped


@pytest.mark.parametrize(
    ("kind", "stated", "simulated", "tol", "expected"),
    [
        ("value", 42.0, 42.0, 0.25, "consistent"),
        ("value", 42.0, 50.0, 0.25, "consistent"),  # 1.19x < 1.25
        ("value", 42.0, 34.0, 0.25, "consistent"),  # 1/1.235
        ("value", 42.0, 84.0, 0.25, "off"),
        ("value", 42.0, 4.2, 0.25, "off"),
        ("at_most", 10.0, 9.0, 0.0, "consistent"),
        ("at_most", 10.0, 25.0, 0.0, "off"),
        ("exact", 256, 256.0, 0.0, "consistent"),
        ("exact", 256, 32.0, 0.0, "off"),
        ("value", 2.0, None, 0.3, "not-exercised"),
        ("value", None, 3.0, 0.3, "not-stated"),
    ],
)
def test_verdict(kind: str, stated: float | None, simulated: float | None, tol: float, expected: str) -> None:
    assert verdict(kind, stated, simulated, tol) == expected  # type: ignore[arg-type]


def test_off_factor_is_symmetric_and_handles_zero() -> None:
    assert off_factor(2.0, 8.0) == off_factor(8.0, 2.0) == 4.0
    assert off_factor(3.0, 3.0) == 1.0
    assert math.isinf(off_factor(0.0, 1.0))


# -- fake runs built from events ------------------------------------------------------------------------------
def _step(step: int, layer_us: float, t: float, layers: int = 94, extra_us: float = 0.0,
          refetched: int = 0) -> DecodeStepEvent:  # fmt: skip
    model_us = layer_us * layers + extra_us
    return DecodeStepEvent(t_us=t, step=step, context_len=1000 + step, latency_us=layer_us, model_latency_us=model_us,
                           sla_us=10_000.0, jitter_us=0.0, over_sla=model_us > 10_000.0, refetched_pages=refetched,
                           stage_us={"a": layer_us * 0.6, "b": layer_us * 0.3})  # fmt: skip


def _decode_run(page_every: int, allocator: str = "bank_aware", **spec: object) -> SimpleNamespace:
    """40 decode steps of 50 us/layer (first step +2 ms), one new page every `page_every` steps."""
    spec = ScenarioSpec(**{"model": "article", "runtime": "article", "prompt_len": 1000, "decode_steps": 40,
                           "allocator": allocator, **spec})  # fmt: skip
    events: list = [PageAllocEvent(t_us=0.0, owner="seq0", phase="prefill", logical=[0, 1, 2, 3], banks=[0, 1, 2, 3],
                                   slots=[0, 0, 0, 0])]  # the prompt's 1000 tokens: 4 pages
    for s in range(40):
        t = 100.0 * (s + 1)
        if s % page_every == 0:
            events.append(PageAllocEvent(t_us=t, owner="seq0", phase="decode", logical=[4 + s], banks=[0], slots=[s]))
        events.append(_step(s, 50.0, t, extra_us=2000.0 if s == 0 else 0.0))
    return SimpleNamespace(spec=spec, events=events, topology=None, summary={"jitter_us": 3.0}, compare=None)


def _rows(result: SimpleNamespace, article: SimpleNamespace | None = None) -> dict[str, dict]:
    return {r["id"]: r for r in build_claims(result, article=article if article is not None else result)}


def test_decode_figures_come_from_the_steady_pipeline() -> None:
    run = _decode_run(page_every=8)
    rows = _rows(run)
    assert rows["decode_step"]["simulated"] == pytest.approx(50.0 * 94 / 1e3)  # 4.7 ms vs 8.3: off
    assert rows["decode_step"]["verdict"] == "off" and rows["decode_step"]["factor"] == pytest.approx(8.3 / 4.7)
    assert "simulated lower" in rows["decode_step"]["explanation"]
    assert rows["decode_pipeline"]["simulated"] == pytest.approx(50.0 * 0.9 * 94 / 1e3)
    assert rows["page_size"]["simulated"] == 8.0  # the staircase: one new page every 8 decode steps
    assert rows["page_size"]["verdict"] == "off" and rows["page_size"]["factor"] == 32
    assert rows["decode_sla"]["verdict"] == "consistent"


def test_host_refetches_are_reported_not_folded_into_the_decode_verdict() -> None:
    run = _decode_run(page_every=8)
    # steps 10..14 re-fetch evicted pages: +30 ms each over the host link, on top of the same layer pipeline
    run.events = [_step(e.step, 50.0, e.t_us, extra_us=30_000.0, refetched=3) if getattr(e, "step", -1) in
                  range(10, 15) else e for e in run.events]  # fmt: skip
    rows = _rows(run)
    assert rows["decode_step"]["simulated"] == pytest.approx(4.7)  # the steady pipeline, not a 34.7 ms mix
    assert "5 steps with re-fetch (+30.00 ms each" in rows["decode_step"]["explanation"]
    sla = rows["decode_sla"]
    assert sla["verdict"] == "off" and sla["factor"] is None  # how many and by how much, not "off by N x"
    assert "5 of 40 steps miss the 10 ms SLA, by 24.70 to 24.70 ms" in sla["explanation"]
    assert "5 with re-fetch" in sla["explanation"]


def test_staircase_counts_new_pages_not_pages_restored_after_eviction() -> None:
    run = _decode_run(page_every=8)
    # pages 0 and 1 were evicted and come back at step 3 and step 13: restored, not new
    run.events += [PageAllocEvent(t_us=100.0 * (s + 1) + 1, owner="seq0", phase="decode", logical=[0, 1],
                                  banks=[1, 1], slots=[0, 1]) for s in (3, 13)]  # fmt: skip
    run.events.sort(key=lambda e: e.t_us)
    row = _rows(run)["page_size"]
    assert row["simulated"] == 8.0  # new pages at steps 0, 8, 16, 24, 32; counting restores would give 4 or 5
    assert "2 restored page allocation(s) left out" in row["explanation"]


def test_a_chosen_page_or_chunk_size_is_a_setting_not_a_claim() -> None:
    rows = _rows(_decode_run(page_every=16, page_size=16, chunk_size=2048))
    assert rows["page_size"]["verdict"] == "setting" and rows["page_size"]["factor"] is None
    assert rows["page_size"]["setting"] == "this scenario uses 16-token pages"
    assert "off by" not in rows["page_size"]["explanation"] and "16 tokens" in rows["page_size"]["explanation"]
    assert rows["chunk_size"]["verdict"] == "setting" and "2048-token chunks" in rows["chunk_size"]["setting"]
    vllm = _rows(SimpleNamespace(spec=ScenarioSpec(model="qwen3-235b-a22b"), events=[], topology=None, summary={},
                                 compare=None))  # fmt: skip
    assert vllm["page_size"]["setting"] == "this scenario uses 16-token pages (the vllm runtime's default block size)"


def test_switch_over_costs_are_input_without_a_verdict() -> None:
    row = _rows(_decode_run(page_every=8))["first_step_overhead"]
    assert row["verdict"] == "input" and row["simulated"] is None and row["factor"] is None
    assert row["run"] == pytest.approx(2.0)  # this run's first step is 2 ms above the steady median
    assert "given to the simulator as input" in row["explanation"]


def test_rows_not_exercised_not_quoted_and_not_modelled() -> None:
    rows = _rows(_decode_run(page_every=8))
    assert rows["decode_no_allocator"]["run"] is None  # this run: bank-aware, no compare
    assert "article's setting" in rows["decode_no_allocator"]["setting"]  # the probe with the naive allocator
    assert rows["chunk_size_low_mem"]["simulated"] is None
    for key in ("prefill_l2_hit", "decode_l2_hit"):
        assert rows[key]["verdict"] == "not-exercised" and "not modelled" in rows[key]["explanation"]
    for r in rows.values():
        if r["stated"] is None:
            assert r["explanation"].startswith(NOT_QUOTED) or r["verdict"] == "not-exercised"
        assert set(r) >= {"id", "claim", "stated", "simulated", "run", "unit", "verdict", "setting", "explanation"}
        assert r["verdict"] in VERDICTS


def test_naive_allocator_row_reads_the_naive_run() -> None:
    base = _decode_run(page_every=8)
    base.compare = _decode_run(page_every=8, allocator="naive")
    base.compare.events = [_step(s, 200.0, 100.0 * (s + 1)) for s in range(40)]
    rows = {r["id"]: r for r in build_claims(base, article=base)}
    naive = _rows(base.compare)["decode_no_allocator"]
    assert rows["decode_no_allocator"]["run"] == pytest.approx(200.0 * 94 / 1e3)  # 18.8 ms vs 22
    assert naive["simulated"] == pytest.approx(18.8) and naive["verdict"] == "consistent"


def test_chunk_threshold_reads_free_memory_at_the_switch() -> None:
    spec = ScenarioSpec(model="article", runtime="article", prompt_len=8192, free_hbm_gib=14)
    events = [
        MemoryEvent(t_us=0.0, hbm_total_bytes=80 * GIB, hbm_used_bytes=66 * GIB, hbm_free_bytes=14 * GIB,
                    kv_bytes=0.0, largest_free_run_bytes=14 * GIB),
        ChunkEvent(t_us=0.0, chunk=0, token_start=0, token_end=4096, chunk_size=4096),
        MemoryEvent(t_us=5.0, hbm_total_bytes=80 * GIB, hbm_used_bytes=69 * GIB, hbm_free_bytes=11 * GIB,
                    kv_bytes=3 * GIB, largest_free_run_bytes=11 * GIB),
        ChunkEvent(t_us=6.0, chunk=1, token_start=4096, token_end=6144, chunk_size=2048, reason="low_memory"),
        ChunkEvent(t_us=7.0, chunk=2, token_start=6144, token_end=8192, chunk_size=2048, reason="low_memory"),
    ]  # fmt: skip
    rows = _rows(SimpleNamespace(spec=spec, events=events, topology=None, summary={"num_attention_launches": 3},
                                 compare=None))  # fmt: skip
    assert rows["chunk_size"]["simulated"] == 4096 and rows["chunk_size"]["verdict"] == "consistent"
    assert rows["chunk_size_low_mem"]["simulated"] == 2048 and rows["chunk_size_low_mem"]["verdict"] == "consistent"
    assert rows["chunk_threshold"]["simulated"] == pytest.approx(11.0)
    assert rows["chunk_threshold"]["verdict"] == "consistent"
    # one launch per chunk over the sizes in force: ceil(4096 / 4096) + ceil(4096 / 2048) = 3
    assert rows["attention_launches"]["stated"] == 3 and rows["attention_launches"]["verdict"] == "consistent"


def test_weight_bits_follow_the_model() -> None:
    art = _rows(SimpleNamespace(spec=ScenarioSpec(model="article", runtime="article"), events=[], topology=None,
                                summary={}, compare=None))  # fmt: skip
    real = _rows(SimpleNamespace(spec=ScenarioSpec(model="qwen3-235b-a22b"), events=[], topology=None, summary={},
                                 compare=None))  # fmt: skip
    assert art["weight_bits"]["simulated"] == pytest.approx(2.5)  # int2 + fp16 scale and zero per 64 weights
    assert art["weight_bits"]["verdict"] == "consistent"
    assert real["weight_bits"]["simulated"] == pytest.approx(16.0)
    assert real["weight_bits"]["verdict"] == "off" and real["weight_bits"]["factor"] == 8


def test_numeric_claims_are_measured() -> None:
    from layerscope.model.numerics import measure_all

    rows = _rows(_decode_run(page_every=8))
    measured = measure_all(0)
    assert rows["lut_sigmoid"]["simulated"] == pytest.approx(measured["sigmoid_lut_max_abs_error"])
    assert rows["shared_rmsnorm"]["simulated"] == pytest.approx(100 * measured["shared_rmsnorm_rel_error"])
    assert rows["lut_sigmoid"]["verdict"] == verdict("at_most", 1e-4, rows["lut_sigmoid"]["simulated"], 0.0)


# -- real runs ---------------------------------------------------------------------------------------------------
def _simulated(name: str, **overrides: object) -> dict[str, dict]:
    from layerscope.runtime.engine import simulate
    from layerscope.scenario import load_preset

    result = simulate(load_preset(name).with_overrides(overrides) if overrides else load_preset(name))
    return {"summary": result.summary, **{r["id"]: r for r in build_claims(result)}}


def test_the_article_setting_probe_is_the_article_setting() -> None:
    probe = article_run()
    assert probe is article_run()  # simulated once, cached
    s = probe.spec
    assert (s.runtime, s.model, s.gpu, s.prompt_len) == ("article", "article", "a100-80g-sxm", 131072)
    assert s.effective_page_size == 256 and s.chunk_size == 4096 and ARTICLE_SETTING["prompt_len"] == 128 * 1024


def test_article_setting_claims_do_not_depend_on_the_open_preset() -> None:
    a, b = _simulated("decode-pulses"), _simulated("real-qwen3-235b-h200")
    probe = article_run().summary
    for key in ("prefill_layer", "decode_step", "decode_no_allocator", "prefill_hbm_util"):
        assert a[key]["simulated"] == b[key]["simulated"] and a[key]["verdict"] == b[key]["verdict"], key
        assert "article's setting" in a[key]["setting"]
    assert a["prefill_layer"]["simulated"] == pytest.approx(probe["prefill_layer_us"] / 1e3)
    # ... and each open run's own figure stands beside it
    assert a["prefill_layer"]["run"] == pytest.approx(a["summary"]["prefill_layer_us"] / 1e3)
    assert b["prefill_layer"]["run"] == pytest.approx(b["summary"]["prefill_layer_us"] / 1e3)
    assert a["prefill_layer"]["run"] != b["prefill_layer"]["run"]


def test_claims_of_a_real_run_come_from_its_summary_and_events() -> None:
    rows = _simulated("chunk-adapt-low-memory")
    summary = rows.pop("summary")
    assert rows["prefill_layer"]["run"] == pytest.approx(summary["prefill_layer_us"] / 1e3)
    # 4096 then 2048: ceil(4096 / 4096) + ceil(12288 / 2048) = 7 launches, exactly what the scheduler ran
    launches = rows["attention_launches"]
    assert launches["simulated"] == summary["num_attention_launches"] == launches["stated"] == 7
    assert launches["verdict"] == "consistent"
    assert rows["chunk_size_low_mem"]["simulated"] == 2048 and rows["chunk_size_low_mem"]["verdict"] == "consistent"
    assert rows["chunk_threshold"]["simulated"] < 12.0  # free HBM when the scheduler shrank the chunk
    assert rows["banks"]["simulated"] == 32
    shares = [r for k, r in rows.items() if k.startswith("share_prefill_")]
    assert shares and all(r["simulated"] == pytest.approx(100 * summary[r["id"]]) for r in shares)
    for r in rows.values():
        assert r["verdict"] in VERDICTS, r
        if r["verdict"] == "off" and r["factor"] is not None:
            src = r["simulated"]
            assert r["factor"] == pytest.approx(off_factor(r["stated"], src)) and r["explanation"]


def test_real_vllm_run_page_size_is_a_setting_and_sla_counts_misses() -> None:
    # the whole layer on one H200 (the deployment removed) misses the 10 ms SLA by far; 8 x H200 at tp 8 lands at
    # it (10.3 ms: at 32k tokens of context each layer's paged decode attention pays ~18 us, cost.DECODE_ATTENTION)
    rows = _simulated("real-qwen3-235b-h200", deployment=None, free_hbm_gib=60)
    assert rows["page_size"]["verdict"] == "setting" and "16-token pages" in rows["page_size"]["setting"]
    sla = rows["decode_sla"]
    assert sla["verdict"] == "off" and sla["factor"] is None
    assert f"{rows['summary']['over_sla_steps']} of 200 steps miss the 10 ms SLA, by" in sla["explanation"]
    tp8 = _simulated("real-qwen3-235b-h200")["decode_sla"]
    assert tp8["simulated"] < 1.05 * 10.0 and 1.5 * tp8["simulated"] < sla["simulated"]


def test_allocator_pair_fills_the_22ms_row_from_the_naive_run() -> None:
    rows = _simulated("allocator-off-long-context")
    assert rows["decode_no_allocator"]["run"] is not None
    assert rows["decode_no_allocator"]["run"] > rows["decode_step"]["run"]


def test_switch_over_row_is_input_whatever_the_runtime() -> None:
    rows = _simulated("real-qwen3-235b-h200")  # vllm: no quantization context switch to pay
    assert rows["first_step_overhead"]["verdict"] == "input"
    assert "vllm runtime has no switch-over" in rows["first_step_overhead"]["explanation"]
    article = _simulated("decode-pulses")
    assert article["first_step_overhead"]["verdict"] == "input" and article["first_step_overhead"]["run"] > 0


def test_rows_say_whether_they_concern_the_open_run() -> None:
    from layerscope.claims import build_claims
    from layerscope.runtime.engine import simulate

    one = {r["id"]: r for r in build_claims(simulate(ScenarioSpec(model="article", runtime="article", prompt_len=512,
                                                                  decode_steps=8, chunk_size=256)))}
    assert one["decode_step"]["concerns"] and one["attention_launches"]["concerns"]
    assert not one["lut_sigmoid"]["concerns"]  # the numpy layer is off: model/numerics.py's figure is not this run's
    assert not any(r["concerns"] for r in one.values() if r["verdict"] in ("not-exercised", "not-stated"))
    serving = ScenarioSpec(model="qwen3-30b-a3b", gpu="h200", free_hbm_gib=20,
                           workload={"num_requests": 3, "input_len": 64, "output_len": 4})
    assert not any(r["concerns"] for r in build_claims(simulate(serving)))  # the article speaks of one request
