"""runtime/metrics.py: vLLM's TPOT and ITL side by side, where a rare long gap moves one and not the other."""

from __future__ import annotations

import pytest

from layerscope.runtime.metrics import ServingMetrics


def test_one_lockstep_stall_per_request_lifts_tpot_above_p99_itl() -> None:
    """two-nodes-wide-ep's p99 ITL (17.8 ms) below its median TPOT (19.1 ms) is the metrics' definitions, not a
    bug: each request waits out one group step that carries another rank's prefill (~214 ms), 1 gap in its 127,
    so under 1% of all gaps are long and p99 ITL stays on the decode steps, while every request's TPOT, the mean
    of its own gaps, carries 1/127 of the stall."""
    m = ServingMetrics()
    decode, stall = 17.8, 214.0  # ms, the preset's decode group step and its prefill-carrying one
    for rid in range(128):
        m.arrive(rid, 0.0, 1024, 128)
        t = 100_000.0 + rid  # first token
        times = [t]
        for i in range(127):
            t += (stall if i == 3 else decode) * 1000.0
            times.append(t)
        m.token_us[rid].extend(times)
        m.finished(rid, t)
    f = m.figures()
    assert f["p99_itl_ms"] == pytest.approx(decode, abs=0.01)  # 128 long gaps of 16,256: 0.79% < 1%
    expected_tpot = (126 * decode + stall) / 127
    assert f["median_tpot_ms"] == pytest.approx(expected_tpot, abs=0.01)
    assert f["median_tpot_ms"] > f["p99_itl_ms"]
    assert f["mean_itl_ms"] == pytest.approx(expected_tpot, abs=0.01)  # the pooled mean carries the stalls too


def test_inter_token_latencies_are_each_requests_own_gaps_in_order() -> None:
    """ITL is every request's gaps between its own tokens, request after request (none across two requests),
    requests of one token included, shifted by each request's frontend time first."""
    import numpy as np

    rng = np.random.default_rng(3)
    m = ServingMetrics()
    expected: list[float] = []
    for rid in range(40):
        n = int(rng.integers(1, 6))
        times = np.cumsum(rng.random(n) * 1e4).tolist()
        front = float(rng.choice([0.0, 123.456]))
        m.arrive(rid, 0.0, 8, max(n, 1), frontend_us=front)
        m.token_us[rid].extend(times)
        m.finished(rid, times[-1] + 1.0)
        shifted = [t + front for t in times]
        expected += [(b - a) / 1000.0 for a, b in zip(shifted[:-1], shifted[1:], strict=True)]
    got = m.samples()["itl"]
    assert list(got) == expected
