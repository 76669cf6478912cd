"""Goodput under SLOs (runtime/goodput.py), against a hand-worked case with vllm bench serve's rules."""

import pytest

from layerscope.runtime.goodput import goodput_figures, parse_goodput
from layerscope.runtime.metrics import ServingMetrics


def _three_requests() -> ServingMetrics:
    """Arrivals at 0 ms; tokens at the times given (ms); each finishes at its last token.
        r0: tokens 100, 120, 140      ttft 100, tpot (140-100)/2 = 20, e2el 140
        r1: tokens 300, 400           ttft 300, tpot 100,              e2el 400
        r2: one token at 50           ttft 50,  tpot 0 (vLLM's all_tpots), e2el 50
    The run lasts 400 ms (first arrival 0 to last finish 400)."""
    m = ServingMetrics()
    for rid, tokens in enumerate(([100, 120, 140], [300, 400], [50])):
        m.arrive(rid, 0.0, 10, len(tokens))
        m.step(0.0, [], [])
        for t in tokens:
            m.step(t * 1000.0, [rid], [1])
        m.finished(rid, tokens[-1] * 1000.0)
    return m


def test_goodput_hand_worked_case() -> None:
    m = _three_requests()
    # ttft <= 100: r0 (exactly at the SLO counts, vLLM's s >= r) and r2; tpot <= 20: r0 and r2 (tpot 0)
    f = m.figures({"ttft": 100.0, "tpot": 20.0})
    assert f["good_requests"] == 2
    assert f["request_goodput"] == pytest.approx(2 / 0.4)
    assert f["ttft_slo_attainment_pct"] == pytest.approx(200 / 3, abs=0.01)
    assert f["tpot_slo_attainment_pct"] == pytest.approx(200 / 3, abs=0.01)
    assert f["slo_attainment_pct"] == pytest.approx(200 / 3, abs=0.01)
    # e2el <= 139 rules r0 out too: only r2 is good
    f = m.figures({"ttft": 100.0, "e2el": 139.0})
    assert f["good_requests"] == 1 and f["e2el_slo_attainment_pct"] == pytest.approx(100 / 3, abs=0.01)
    assert "request_goodput" not in m.figures()


def test_goodput_figures_alone() -> None:
    f = goodput_figures({"ttft": [1.0, 5.0], "tpot": [0.0, 0.0], "e2el": [2.0, 9.0]}, {"ttft": 4.0}, 2.0)
    assert f["request_goodput"] == 0.5 and f["good_requests"] == 1 and "tpot_slo_ms" not in f


def test_parse_goodput() -> None:
    assert parse_goodput(["ttft:500", "tpot:50"]) == {"ttft": 500.0, "tpot": 50.0}
    assert parse_goodput(["ttft:500,e2el:9000"]) == {"ttft": 500.0, "e2el": 9000.0}
    for bad, word in ((["itl:5"], "one of ttft, tpot, e2el"), (["ttft"], "KEY:VALUE"), (["ttft:x"], "number"),
                      (["ttft:-1"], "non-negative"), ([], "at least one")):
        with pytest.raises(ValueError, match=word):
            parse_goodput(bad)
