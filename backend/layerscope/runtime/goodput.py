"""Goodput under SLOs, as `vllm bench serve --goodput ttft:MS tpot:MS e2el:MS` computes and names it.

    a request is good when every SLO given holds for it: ttft <= SLO, tpot <= SLO, e2el <= SLO (ms)
    request_goodput = good requests / benchmark duration (req/s)

vllm/benchmarks/serve.py (calculate_metrics): the SLOs come from --goodput as KEY:VALUE pairs (parse_goodput:
keys ttft, tpot, e2el; values in ms, non-negative); a request's TPOT is 0 when it has one output token (its
`all_tpots` entry), so a one-token request always meets a TPOT SLO; `is_good_req = all(s >= r ...)` (an SLO met
exactly counts); `request_goodput = good_completed / dur_s`. Beside vLLM's key: each SLO's attainment (the share
of completed requests meeting it, in %) and the overall attainment (requests meeting all of them), LayerScope's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SLO_METRICS = ("ttft", "tpot", "e2el")  # vLLM's valid_names in parse_goodput


def parse_goodput(pairs: Sequence[str], flag: str = "--goodput") -> dict[str, float]:
    """`["ttft:500", "tpot:50"]` (or one "ttft:500,tpot:50" string) -> {"ttft": 500.0, "tpot": 50.0}, in ms."""
    slos: dict[str, float] = {}
    for item in (p for pair in pairs for p in pair.split(",") if p.strip()):
        name, sep, value = item.strip().partition(":")
        if not sep:
            raise ValueError(f"{flag} {item!r}: expected KEY:VALUE pairs (e.g. ttft:500 tpot:50), values in ms")
        if name not in SLO_METRICS:
            raise ValueError(f"{flag} {item!r}: the SLO name should be one of {', '.join(SLO_METRICS)}")
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(f"{flag} {item!r}: the value should be a number of milliseconds") from None
        if not ms >= 0 or ms == float("inf"):
            raise ValueError(f"{flag} {item!r}: the value should be a finite, non-negative number of ms")
        slos[name] = ms
    if not slos:
        raise ValueError(f"{flag}: give at least one KEY:VALUE pair (ttft, tpot, e2el in ms)")
    return slos


def goodput_figures(per_request: Mapping[str, Sequence[float]], slos: Mapping[Any, float],
                    duration_s: float) -> dict[str, float | int]:
    """`per_request`: each metric's value per completed request in ms, aligned (tpot 0 for a one-token request).
    The figures: request_goodput (req/s), good_requests, and each SLO's attainment in %."""
    n = len(per_request["ttft"])
    good = [True] * n
    out: dict[str, float | int] = {}
    for name in SLO_METRICS:
        if name not in slos:
            continue
        met = [v <= slos[name] for v in per_request[name]]
        good = [g and m for g, m in zip(good, met, strict=True)]
        out[f"{name}_slo_ms"] = slos[name]
        out[f"{name}_slo_attainment_pct"] = round(100.0 * sum(met) / n, 2) if n else 0.0
    num_good = sum(good)
    out["good_requests"] = num_good
    out["slo_attainment_pct"] = round(100.0 * num_good / n, 2) if n else 0.0
    out["request_goodput"] = round(num_good / duration_s, 4) if duration_s > 0 else 0.0
    return out
