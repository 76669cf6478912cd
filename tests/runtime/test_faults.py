import math

import numpy as np
import pytest

from layerscope.model.numerics import flip_bits
from layerscope.runtime.engine import simulate
from layerscope.runtime.faults import stale_pages
from layerscope.runtime.shadow import _compare
from layerscope.scenario import ScenarioSpec

QWEN = dict(model="qwen3-235b-a22b", runtime="vllm", gpu="h100-sxm", prompt_len=8192, decode_steps=24)


def _faults(r, kind: str) -> list:  # noqa: ANN001
    return [e for e in r.events if e.kind == "fault" and e.fault == kind]


def _actions(r, kind: str) -> list[str]:  # noqa: ANN001
    return [e.action for e in _faults(r, kind)]


@pytest.mark.parametrize("numerics", [True, False])
def test_stale_chunk_metadata_slows_decode_and_is_detected(numerics: bool) -> None:
    clean = simulate(ScenarioSpec(**QWEN, numerics=numerics))
    spec = ScenarioSpec(**QWEN, numerics=numerics, faults=[{"kind": "stale_chunk_metadata", "at_chunk": 1,
                                                            "count": 64}])
    r = simulate(spec)
    assert _actions(r, "stale_chunk_metadata")[:2] == ["injected", "detected"]
    assert r.summary["faults_injected"] == r.summary["faults_detected"] == 1
    assert r.summary["decode_step_p50_us"] > clean.summary["decode_step_p50_us"]  # slow steps
    assert r.summary["crc_bad_banks"] > 0  # the map disagrees with what was written
    if numerics:
        assert r.summary["max_rel_error"] > 0.01  # wrong reads
    else:
        crc = [e for e in r.events if e.kind == "crc"]
        assert crc and crc[-1].source == "metadata" and crc[-1].bad_banks


def test_disabled_chunk_scheduler_diverges_from_the_clean_run() -> None:
    spec = ScenarioSpec(**QWEN, numerics=True, faults=[{"kind": "chunk_scheduler_disabled"}])
    r = simulate(spec)
    chunks = [e for e in r.events if e.kind == "chunk"]
    assert [c.reason for c in chunks] == ["disabled", "disabled"] and chunks[0].pages == chunks[1].pages
    errors = [e.rel_error for e in r.events if e.kind == "numerics"]
    assert errors[0] == 0.0 and max(errors) > 0.05  # chunk 0 is fine; what reads its overwritten KV is not
    assert _actions(r, "chunk_scheduler_disabled") == ["injected", "detected"]
    clean = simulate(ScenarioSpec(**QWEN, numerics=True))
    assert clean.summary["max_rel_error"] == 0.0 and clean.summary["crc_bad_banks"] == 0


def test_disabled_scheduler_is_caught_by_validation_without_numerics() -> None:
    r = simulate(ScenarioSpec(**QWEN, faults=[{"kind": "chunk_scheduler_disabled"}]))
    detected = [e for e in _faults(r, "chunk_scheduler_disabled") if e.action == "detected"]
    assert detected and "CRC32" in detected[0].detail and r.summary["crc_bad_banks"] > 0


def test_ecc_bitflips_in_2bit_weights_give_nan_and_are_detected() -> None:
    spec = ScenarioSpec(model="article", runtime="article", prompt_len=1024, decode_steps=8, numerics=True,
                        faults=[{"kind": "ecc_bitflips", "at_step": 2, "count": 8}])
    r = simulate(spec)
    assert _actions(r, "ecc_bitflips") == ["injected", "detected"]
    hit = [e for e in r.events if e.kind == "numerics" and e.step is not None and e.step >= 2]
    assert hit[0].nan_count + hit[0].inf_count > 0 and math.isinf(hit[0].rel_error)
    before = [e for e in r.events if e.kind == "numerics" and (e.step is None or e.step < 2)]
    assert all(e.nan_count == 0 and e.rel_error == 0.0 for e in before)
    assert r.summary["nan_detected"] is True


def test_memory_contention_makes_jitter() -> None:
    clean = simulate(ScenarioSpec(**QWEN))
    r = simulate(ScenarioSpec(**QWEN, faults=[{"kind": "memory_contention", "at_step": 8, "rate": 0.5,
                                               "count": 8}]))
    assert _actions(r, "memory_contention") == ["injected", "detected"]
    assert r.summary["jitter_us"] > 5 * clean.summary["jitter_us"]
    lat = [e.latency_us for e in r.events if e.kind == "decode_step"]
    assert max(lat[8:16]) > 1.3 * lat[7] and lat[20] < 1.05 * lat[7]  # only while the thief runs


def test_memory_contention_in_prefill_slows_the_chunk_and_is_detected() -> None:
    clean = simulate(ScenarioSpec(**QWEN))
    r = simulate(ScenarioSpec(**QWEN, faults=[{"kind": "memory_contention", "at_chunk": 1, "rate": 0.6}]))
    [injected, detected] = _faults(r, "memory_contention")
    assert injected.chunk == detected.chunk == 1 and detected.action == "detected"
    chunk_us = [[e.dur_us for e in x.events if e.kind == "kernel" and e.chunk == 1] for x in (clean, r)]
    assert sum(chunk_us[1]) > sum(chunk_us[0])


def test_pressure_evicts_pages_and_decode_refetches_them() -> None:
    spec = ScenarioSpec(model="qwen3-235b-a22b", runtime="vllm", prompt_len=16384, decode_steps=30, free_hbm_gib=13,
                        actions=[{"do": "pressure", "at_step": 10, "amount_gib": 12},
                                 {"do": "release", "at_step": 20, "amount_gib": 12}])
    r = simulate(spec)
    evicts = [e for e in r.events if e.kind == "page_evict"]
    assert evicts and r.summary["evictions"] > 0
    steps = [e for e in r.events if e.kind == "decode_step"]
    assert steps[9].refetched_pages == 0 and steps[10].refetched_pages > 0
    assert steps[10].model_latency_us > 2 * steps[9].model_latency_us  # re-fetch over the host link
    assert steps[25].refetched_pages == 0  # after the release the pages came back


def test_fragmentation_fails_an_allocation_while_memory_is_ample_then_compaction_repairs_it() -> None:
    spec = ScenarioSpec(model="qwen3-235b-a22b", runtime="vllm", prompt_len=8192, decode_steps=512,
                        fragmentation=0.5, decode_page_hint=True, actions=[{"do": "compact", "at_step": 4}])
    r = simulate(spec)
    [fail] = [e for e in r.events if e.kind == "alloc_fail"]
    assert fail.contiguous and fail.free_pages > 10 * fail.pages_wanted and fail.largest_free_run < fail.pages_wanted
    compact = [e for e in r.events if e.kind == "page_migrate" and e.reason == "compact"]
    assert compact and r.summary["compactions"] == 1
    hints = [e for e in r.events if e.kind == "page_alloc" and e.owner == "hint"]
    assert len(hints) == 1 and hints[0].t_us >= compact[-1].t_us
    assert r.summary["hint_reserved_pages"] == 32


def test_stale_pages_and_flip_bits() -> None:
    assert stale_pages([16, 17, 18], 16, count=2, num_pages=19) == {16: 0, 17: 1}
    assert stale_pages([0, 1], 2, count=5, num_pages=3) == {0: 1, 1: 2}
    assert stale_pages([0], 1, count=1, num_pages=1) == {}  # a one-page prompt has no neighbour to go stale to
    w = np.full(8, 0.5, dtype=np.float32)
    n = flip_bits(w, count=3, rate=0.0, rng=np.random.default_rng(0), bits=(30,))
    assert n == 3 and np.count_nonzero(w != 0.5) == 3 and np.all(np.abs(w[w != 0.5]) > 1e37)


def test_compaction_moves_pages_across_banks_when_no_bank_has_room_for_the_run() -> None:
    from layerscope.scenario import load_preset

    r = simulate(load_preset("fragmentation-oom"))
    [fail] = [e for e in r.events if e.kind == "alloc_fail"]
    assert fail.contiguous and fail.free_pages >= 10 * fail.pages_wanted and fail.largest_free_run < fail.pages_wanted
    compact = [e for e in r.events if e.kind == "page_migrate" and e.reason == "compact"]
    assert any(m.from_bank != m.to_bank for m in compact)  # sliding inside one bank could not make the run
    assert all(e.reason == "compact" for e in r.events if e.kind == "page_migrate")
    [hint] = [e for e in r.events if e.kind == "page_alloc" and e.owner == "hint"]
    assert len(set(hint.banks)) == 1 and hint.slots == list(range(hint.slots[0], hint.slots[0] + fail.pages_wanted))


# -- one class per fault kind, with hooks -------------------------------------------------------------------------
def test_each_kind_has_its_class_and_hooks() -> None:
    from layerscope.runtime.faults import FAULTS, EccBitflips, FaultPlan, MemoryContention, StaleChunkMetadata
    from layerscope.runtime.shadow import ShadowResult
    from layerscope.scenario import FaultSpec

    plan = FaultPlan([FaultSpec(kind=k, at_chunk=1, rate=0.5, count=2) for k in FAULTS], decode_steps=10)
    assert [type(s).__name__ for s in plan.states] == [
        "StaleChunkMetadata", "ChunkSchedulerDisabled", "EccBitflips", "MemoryContention"]  # fmt: skip
    stale, disabled, ecc, contention = plan.states
    assert stale.after_barrier and not disabled.after_barrier
    assert stale.strikes_at_chunk(1, 4) and stale.strikes_at_chunk(0, 1)  # clamped to the last chunk
    assert not ecc.strikes_at_chunk(0, 4) and ecc.strikes_at_chunk(1, 4) and not ecc.strikes_at_step(0)
    nan = ShadowResult(tokens=4, rel_error=float("inf"), max_abs_error=float("inf"), nan_count=3, inf_count=0,
                       expert_counts=None)
    small = ShadowResult(tokens=4, rel_error=1e-3, max_abs_error=1e-3, nan_count=0, inf_count=0, expert_counts=None)
    assert isinstance(ecc, EccBitflips) and "3 NaN" in (ecc.on_numerics(nan) or "")
    assert ecc.on_numerics(small) is None and stale.on_numerics(small) is None
    assert "rel_error" in (disabled.on_numerics(nan) or "")
    assert "CRC32 mismatch in banks [2, 5]" in (stale.on_validate([2, 5], True) or "")
    assert stale.on_validate([], True) is None
    assert ecc.on_validate([], True) is None and "weight scrub" in (ecc.on_validate([], False) or "")
    assert isinstance(contention, MemoryContention) and isinstance(stale, StaleChunkMetadata)
    assert contention.on_step(3, 120.0, 100.0) and contention.on_step(3, 105.0, 100.0) is None
    assert contention.on_chunk(1, 200.0, 100.0) and contention.on_chunk(1, 101.0, 100.0) is None
    rng = np.random.default_rng(0)
    assert plan.stolen_bandwidth("prefill", 0, rng) == 0.0  # contention starts at chunk 1, for 2 chunks
    assert 0.25 <= plan.stolen_bandwidth("prefill", 2, rng) <= 0.75


def test_error_figures_do_not_depend_on_the_blas_summation_order() -> None:
    """Two outputs whose errors differ in the 7th digit (what OpenBLAS' kernels for two CPU types gave for one
    chunk: 2.2458596 and 2.2458603) report the same figures, so a run's events are the same on both machines."""
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((4, 16)).astype(np.float32)
    y = ref + np.float32(0.1) * rng.standard_normal((4, 16)).astype(np.float32)
    a, b = _compare(y, ref, None), _compare(y * np.float32(1 + 3e-7), ref, None)
    assert (a.rel_error, a.max_abs_error) == (b.rel_error, b.max_abs_error)
    assert a.rel_error == float(f"{a.rel_error:.3g}") and 0 < a.rel_error < 1
