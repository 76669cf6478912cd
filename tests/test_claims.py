"""Claims: the article's figures as data, verdict logic, and measurements taken from a run's events."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from layerscope.claims import CLAIMS, NOT_EXERCISED, NOT_QUOTED, build_claims, off_factor, verdict
from layerscope.events import ChunkEvent, DecodeStepEvent, MemoryEvent, PageAllocEvent
from layerscope.scenario import ScenarioSpec

GIB = 1024**3


def test_claims_are_data_with_provenance() -> None:
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids))
    for c in CLAIMS:
        assert c.what and c.unit and c.where and c.how
        assert c.kind in ("value", "at_most", "exact") and c.tolerance >= 0


def test_the_quoted_figures_are_all_there() -> None:
    stated = {c.id: c.stated for c in CLAIMS}
    # The figures issues 3 and 5 quote from the article; anything else is stated=None.
    assert stated["prefill_layer"] == 42.0 and stated["decode_step"] == 8.3 and stated["decode_pipeline"] == 7.92
    assert stated["decode_no_allocator"] == 22.0 and stated["first_step_overhead"] == pytest.approx(1.2 + 0.8 + 0.3)
    assert stated["decode_sla"] == 10.0 and stated["chunk_size"] == 4096 and stated["chunk_size_low_mem"] == 2048
    assert stated["chunk_threshold"] == 12.0 and stated["page_size"] == 256 and stated["banks"] == 32
    assert stated["lut_sigmoid"] == 1e-4 and stated["shared_rmsnorm"] == 0.03 and stated["weight_bits"] == 2.0
    assert {k for k, v in stated.items() if v is None} >= {"dequant_share", "page_hint_jitter", "prefill_hbm_util"}


@pytest.mark.parametrize(
    ("kind", "stated", "simulated", "tol", "expected"),
    [
        ("value", 42.0, 42.0, 0.25, "consistent"),
        ("value", 42.0, 50.0, 0.25, "consistent"),  # 1.19x < 1.25
        ("value", 42.0, 34.0, 0.25, "consistent"),  # 1/1.235
        ("value", 42.0, 84.0, 0.25, "off by 2x"),
        ("value", 42.0, 4.2, 0.25, "off by 10x"),
        ("at_most", 10.0, 9.0, 0.0, "consistent"),
        ("at_most", 10.0, 25.0, 0.0, "off by 2.5x"),
        ("exact", 256, 256.0, 0.0, "consistent"),
        ("exact", 256, 32.0, 0.0, "off by 8x"),
        ("value", 2.0, None, 0.3, NOT_EXERCISED),
        ("value", None, 3.0, 0.3, "not stated"),
    ],
)
def test_verdict(kind: str, stated: float | None, simulated: float | None, tol: float, expected: str) -> None:
    assert verdict(kind, stated, simulated, tol) == expected  # type: ignore[arg-type]


def test_off_factor_is_symmetric_and_handles_zero() -> None:
    assert off_factor(2.0, 8.0) == off_factor(8.0, 2.0) == 4.0
    assert off_factor(3.0, 3.0) == 1.0
    assert math.isinf(off_factor(0.0, 1.0))


def _step(step: int, layer_us: float, t: float, layers: int = 94, extra_us: float = 0.0) -> DecodeStepEvent:
    model_us = layer_us * layers + extra_us
    return DecodeStepEvent(t_us=t, step=step, context_len=1000 + step, latency_us=layer_us, model_latency_us=model_us,
                           sla_us=10_000.0, jitter_us=0.0, over_sla=model_us > 10_000.0,
                           stage_us={"a": layer_us * 0.6, "b": layer_us * 0.3})  # fmt: skip


def _decode_run(page_every: int, allocator: str = "bank_aware") -> SimpleNamespace:
    """40 decode steps of 50 us/layer (first step +2 ms), one new page every `page_every` steps."""
    spec = ScenarioSpec(model="article", runtime="article", prompt_len=1000, decode_steps=40, allocator=allocator)
    events: list = []
    for s in range(40):
        t = 100.0 * (s + 1)
        if s % page_every == 0:
            events.append(PageAllocEvent(t_us=t - 1, owner="seq0", phase="decode", logical=[s], banks=[0], slots=[s]))
        events.append(_step(s, 50.0, t, extra_us=2000.0 if s == 0 else 0.0))
    return SimpleNamespace(spec=spec, events=events, topology=None, summary={"jitter_us": 3.0}, compare=None)


def _rows(result: SimpleNamespace) -> dict[str, dict]:
    return {r["id"]: r for r in build_claims(result)}


def test_decode_figures_come_from_the_events() -> None:
    rows = _rows(_decode_run(page_every=8))
    assert rows["decode_step"]["simulated"] == pytest.approx(50.0 * 94 / 1e3)  # 4.7 ms vs 8.3: off
    assert rows["decode_step"]["verdict"] == f"off by {8.3 / 4.7:.3g}x"
    assert "simulated lower" in rows["decode_step"]["explanation"]
    assert rows["decode_pipeline"]["simulated"] == pytest.approx(50.0 * 0.9 * 94 / 1e3)
    assert rows["first_step_overhead"]["simulated"] == pytest.approx(2.0)
    assert rows["first_step_overhead"]["verdict"] == "consistent"
    assert rows["page_size"]["simulated"] == 8.0  # the staircase: one new page every 8 decode steps
    assert rows["page_size"]["verdict"] == "off by 32x"
    assert rows["decode_sla"]["verdict"] == "consistent"


def test_rows_not_exercised_and_not_quoted() -> None:
    rows = _rows(_decode_run(page_every=8))
    assert rows["decode_no_allocator"]["verdict"] == NOT_EXERCISED  # bank-aware run, no compare
    assert rows["chunk_size_low_mem"]["simulated"] is None
    for r in rows.values():
        if r["stated"] is None:
            assert r["explanation"].startswith(NOT_QUOTED)
        assert set(r) >= {"id", "claim", "stated", "simulated", "unit", "verdict", "explanation"}


def test_naive_allocator_row_reads_the_naive_run() -> None:
    base = _decode_run(page_every=8)
    base.compare = _decode_run(page_every=8, allocator="naive")
    base.compare.events = [_step(s, 200.0, 100.0 * (s + 1)) for s in range(40)]
    rows = _rows(base)
    assert rows["decode_no_allocator"]["simulated"] == pytest.approx(200.0 * 94 / 1e3)  # 18.8 ms vs 22
    assert rows["decode_no_allocator"]["verdict"] == "consistent"


def test_chunk_threshold_reads_free_memory_at_the_switch() -> None:
    spec = ScenarioSpec(model="article", runtime="article", prompt_len=8192, free_hbm_gib=14)
    events = [
        MemoryEvent(t_us=0.0, hbm_total_bytes=80 * GIB, hbm_used_bytes=66 * GIB, hbm_free_bytes=14 * GIB,
                    kv_bytes=0.0, largest_free_run_bytes=14 * GIB),
        ChunkEvent(t_us=0.0, chunk=0, token_start=0, token_end=4096, chunk_size=4096),
        MemoryEvent(t_us=5.0, hbm_total_bytes=80 * GIB, hbm_used_bytes=69 * GIB, hbm_free_bytes=11 * GIB,
                    kv_bytes=3 * GIB, largest_free_run_bytes=11 * GIB),
        ChunkEvent(t_us=6.0, chunk=1, token_start=4096, token_end=6144, chunk_size=2048, reason="low_memory"),
    ]  # fmt: skip
    rows = _rows(SimpleNamespace(spec=spec, events=events, topology=None, summary={}, compare=None))
    assert rows["chunk_size"]["simulated"] == 4096 and rows["chunk_size"]["verdict"] == "consistent"
    assert rows["chunk_size_low_mem"]["simulated"] == 2048 and rows["chunk_size_low_mem"]["verdict"] == "consistent"
    assert rows["chunk_threshold"]["simulated"] == pytest.approx(11.0)
    assert rows["chunk_threshold"]["verdict"] == "consistent"


def test_weight_bits_follow_the_model() -> None:
    art = _rows(SimpleNamespace(spec=ScenarioSpec(model="article", runtime="article"), events=[], topology=None,
                                summary={}, compare=None))  # fmt: skip
    real = _rows(SimpleNamespace(spec=ScenarioSpec(model="qwen3-235b-a22b"), events=[], topology=None, summary={},
                                 compare=None))  # fmt: skip
    assert art["weight_bits"]["simulated"] == pytest.approx(2.5)  # int2 + fp16 scale and zero per 64 weights
    assert art["weight_bits"]["verdict"] == "consistent"
    assert real["weight_bits"]["simulated"] == pytest.approx(16.0)
    assert real["weight_bits"]["verdict"] == "off by 8x"


def test_numeric_claims_are_measured() -> None:
    from layerscope.model.numerics import measure_all

    rows = _rows(_decode_run(page_every=8))
    measured = measure_all(0)
    assert rows["lut_sigmoid"]["simulated"] == pytest.approx(measured["sigmoid_lut_max_abs_error"])
    assert rows["shared_rmsnorm"]["simulated"] == pytest.approx(100 * measured["shared_rmsnorm_rel_error"])
    assert rows["lut_sigmoid"]["verdict"] == verdict("at_most", 1e-4, rows["lut_sigmoid"]["simulated"], 0.0)


def _simulated(name: str) -> dict[str, dict]:
    from layerscope.runtime.engine import simulate
    from layerscope.scenario import load_preset

    result = simulate(load_preset(name))
    return {"summary": result.summary, **{r["id"]: r for r in build_claims(result)}}


def test_claims_of_a_real_run_come_from_its_summary_and_events() -> None:
    rows = _simulated("chunk-adapt-low-memory")
    summary = rows.pop("summary")
    assert rows["prefill_layer"]["simulated"] == pytest.approx(summary["prefill_layer_us"] / 1e3)
    assert rows["attention_launches"]["simulated"] == summary["num_attention_launches"]
    assert rows["chunk_size_low_mem"]["simulated"] == 2048 and rows["chunk_size_low_mem"]["verdict"] == "consistent"
    assert rows["chunk_threshold"]["simulated"] < 12.0  # free HBM when the scheduler shrank the chunk
    assert rows["banks"]["simulated"] == 32
    shares = [r for k, r in rows.items() if k.startswith("share_prefill_")]
    assert shares and all(r["simulated"] == pytest.approx(100 * summary[r["id"]]) for r in shares)
    for r in rows.values():
        v = r["verdict"]
        assert v in ("consistent", "not stated", NOT_EXERCISED) or v.startswith("off by "), v
        if v.startswith("off by "):
            factor = off_factor(r["stated"], r["simulated"])
            assert v == f"off by {factor:.3g}x" and r["explanation"]


def test_allocator_pair_fills_the_22ms_row_from_the_naive_run() -> None:
    rows = _simulated("allocator-off-long-context")
    assert rows["decode_no_allocator"]["simulated"] is not None
    assert rows["decode_no_allocator"]["simulated"] > rows["decode_step"]["simulated"]


def test_switch_over_row_is_not_exercised_by_a_runtime_without_one() -> None:
    rows = _simulated("real-qwen3-235b-h200")  # vllm: no quantization context switch to pay
    assert rows["first_step_overhead"]["simulated"] is None
    assert rows["first_step_overhead"]["verdict"] == NOT_EXERCISED
    article = _simulated("decode-pulses")
    assert article["first_step_overhead"]["simulated"] > 0
