"""Tour checks: the metric grammar, comparisons, and pause points, on hand-made runs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from layerscope.events import FaultEvent, KernelEvent, PhaseEvent
from layerscope.scenario import ScenarioSpec, TourCheck
from layerscope.tour import check_passes, event_time, format_results, metric_value, tour_results


def _kernel(t: float, name: str, stage: str) -> KernelEvent:
    return KernelEvent(t_us=t, name=name, stage=stage, stage_kind="attention", phase="prefill", start_us=t,
                       dur_us=1.0, flops=1.0, bytes=1.0, bound="compute", hbm_util=0.1, l2_hit=0.0)  # fmt: skip


def _run(summary: dict, tour: list[dict] | None = None, events: list | None = None, compare=None) -> SimpleNamespace:
    spec = ScenarioSpec.model_validate({"tour": tour or []})
    return SimpleNamespace(spec=spec, events=events or [], topology=None, summary=summary, compare=compare)


def test_metric_reads_summary_compare_and_ratio() -> None:
    other = _run({"decode_step_mean_us": 300.0})
    run = _run({"decode_step_mean_us": 100.0, "num_chunks": 2}, compare=other)
    assert metric_value(run, "num_chunks") == 2
    assert metric_value(run, "compare.decode_step_mean_us") == 300.0
    assert metric_value(run, "compare.decode_step_mean_us/decode_step_mean_us") == pytest.approx(3.0)


def test_metric_errors_name_the_metric() -> None:
    run = _run({"jitter_us": 1.0, "label": "x"})
    with pytest.raises(KeyError, match="evictions"):
        metric_value(run, "evictions")
    with pytest.raises(KeyError, match="no compare run"):
        metric_value(run, "compare.jitter_us")
    with pytest.raises(KeyError, match="numeric"):
        metric_value(run, "jitter_us/label")


def test_ratio_by_zero_is_infinite_not_an_error() -> None:
    run = _run({"a": 5.0, "b": 0})
    assert metric_value(run, "a/b") == float("inf")


@pytest.mark.parametrize(
    ("op", "value", "actual", "expected"),
    [
        ("==", 2, 2.0, True),
        ("==", 2, 3, False),
        ("!=", 2, 3, True),
        (">", 0, 1, True),
        (">", 1, 1, False),
        (">=", 1, 1, True),
        ("<", 10, 9.99, True),
        ("<=", 10, 10.01, False),
        ("==", True, True, True),
        ("==", True, False, False),
        ("==", "4096,2048", [4096, 2048], True),
        (">", "a", "b", False),  # text has no physical order: never passes
    ],
)
def test_check_passes(op: str, value: object, actual: object, expected: bool) -> None:
    assert check_passes(TourCheck(metric="m", op=op, value=value), actual) is expected


def test_event_time_matches_kind_and_name() -> None:
    events = [
        PhaseEvent(t_us=0.0, phase="prefill"),
        _kernel(5.0, "qwen3_prefill_flash_attn_chunked", "attention"),
        FaultEvent(t_us=9.0, fault="ecc_bitflips", action="injected", detail=""),
        FaultEvent(t_us=12.0, fault="ecc_bitflips", action="detected", detail=""),
    ]
    run = _run({}, events=events)
    assert event_time(run, "kernel") == 5.0
    assert event_time(run, "kernel:attention") == 5.0  # a stage name
    assert event_time(run, "kernel:qwen3_prefill_flash_attn_chunked") == 5.0
    assert event_time(run, "fault:detected") == 12.0
    assert event_time(run, "phase:decode") is None


def test_tour_results_rows() -> None:
    tour = [
        {"title": "chunks", "text": "t", "at_event": "kernel:attention",
         "check": {"metric": "num_chunks", "op": "==", "value": 2}},
        {"title": "wrong", "text": "t", "at_us": 8.0, "check": {"metric": "num_chunks", "op": ">", "value": 5}},
        {"title": "missing event", "text": "t", "at_event": "alloc_fail"},
        {"title": "missing metric", "text": "t", "at_us": 9.0, "check": {"metric": "nope", "op": ">", "value": 0}},
    ]  # fmt: skip
    run = _run({"num_chunks": 2}, tour=tour, events=[_kernel(7.0, "k", "attention")])
    rows = tour_results(run)
    assert [r["passed"] for r in rows] == [True, False, False, False]
    assert rows[0]["t_us"] == 7.0 and rows[0]["actual"] == 2 and rows[0]["expected"] == 2
    assert rows[1]["actual"] == 2 and rows[1]["error"] is None
    assert "alloc_fail" in rows[2]["error"]
    assert rows[3]["t_us"] == 9.0 and "nope" in rows[3]["error"]
    text = format_results(rows)
    assert text.count("PASS") == 1 and text.count("FAIL") == 3


def _step(title: str, **kw: object) -> dict:
    return {"title": title, "text": "t", **kw}


def test_the_validator_refuses_what_the_dashboard_cannot_land() -> None:
    events = [_kernel(1.0, "k", "attention"), _kernel(5.0, "k", "attention"), _kernel(9.0, "k", "attention")]
    tour = [
        _step("ok", at_event="kernel", highlight=["timeline"]),
        _step("hidden panel", at_us=2.0, highlight=["latency", "requests"]),  # no decode steps, no workload
        _step("earlier", at_us=1.5),
        _step("same moment", at_us=2.0),
        _step("no moment"),
        _step("last", at_event="kernel", at_nth=-1),
    ]
    rows = tour_results(_run({}, tour=tour, events=events))
    errors = [r["error"] for r in rows]
    assert errors[0] is None and errors[5] is None and rows[5]["t_us"] == 9.0
    assert errors[1] == ("highlights 'latency', a panel this run does not show; "
                         "highlights 'requests', a panel this run does not show")
    assert errors[2] == "its moment 1.5 us is earlier than step 2's (2 us)"
    assert errors[3] == "is at the same moment as step 2 (2 us)"
    assert errors[4] == "has no moment of its own (give at_us or at_event)"
    assert [r["passed"] for r in rows] == [True, False, False, False, False, True]


def test_a_step_picks_its_event_and_zooms_around_it() -> None:
    from layerscope.events import DecodeStepEvent

    def step(i: int, t: float, lat: float) -> DecodeStepEvent:
        return DecodeStepEvent(t_us=t, step=i, context_len=10 + i, latency_us=lat, model_latency_us=lat * 94,
                               sla_us=1e4, jitter_us=0.0, over_sla=False)  # fmt: skip

    events = [step(0, 10.0, 3.0), step(1, 20.0, 9.0), step(2, 30.0, 9.0), step(3, 40.0, 1.0)]
    other = _run({}, events=[step(0, 55.0, 1.0)])
    tour = [
        _step("second", at_event="decode_step", at_nth=2, highlight=["latency"]),
        _step("tallest", at_event="decode_step", at_max="latency_us", zoom={"before_us": 15.0, "after_us": 100.0}),
        _step("compare's", at_event="compare.decode_step"),
    ]
    rows = tour_results(_run({}, tour=tour, events=events, compare=other))
    assert [r["t_us"] for r in rows] == [20.0, 20.0, 55.0]  # the first of equal maxima
    assert rows[1]["error"] == "is at the same moment as step 1 (20 us)"
    assert rows[0]["zoom"] is None and rows[1]["zoom"] == [5.0, 40.0]  # clamped to the run's end
    with pytest.raises(ValueError, match="at_nth and at_max pick among"):
        ScenarioSpec.model_validate({"tour": [_step("x", at_nth=2)]})
    with pytest.raises(ValueError, match="not both"):
        ScenarioSpec.model_validate({"tour": [_step("x", at_event="k", at_nth=2, at_max="t_us")]})


def test_tour_command_exit_status_follows_the_checks(capsys: pytest.CaptureFixture[str]) -> None:
    from layerscope.cli import main

    assert main(["tour", "prefill-8k-chunked"]) == 0
    assert "PASS   2. Two attention launches" in capsys.readouterr().out
    # 2048-token chunks make four launches: the tour's claim of two fails, and says what it saw.
    assert main(["tour", "prefill-8k-chunked", "--set", "chunk_size=2048"]) == 1
    assert "num_attention_launches == 2  actual 4" in capsys.readouterr().out
    assert main(["tour", "no-such-preset"]) == 2


def test_tour_command_refuses_a_tour_the_dashboard_cannot_land(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from layerscope.cli import main

    path = tmp_path / "t.yaml"
    path.write_text(
        "name: t\nmodel: article\nruntime: article\nprompt_len: 512\ndecode_steps: 4\ntour:\n"
        "  - {title: one, text: x, at_event: 'phase:decode', highlight: [requests]}\n"
        "  - {title: two, text: x, at_event: 'phase:prefill'}\n"
    )
    assert main(["tour", str(path)]) == 1
    out = capsys.readouterr().out
    assert "highlights 'requests', a panel this run does not show" in out
    assert "earlier than step 1's" in out
