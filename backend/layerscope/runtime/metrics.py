"""Serving metrics of a finished run, from its events alone, as `vllm bench serve` computes and names them.

    request arrive ──────────── first_token ─────── token ── token ── ... ── finished
               │◀──── ttft ────▶│◀ itl ▶│                                 │
               │◀──────────────────────── e2el ─────────────────────────▶│
    tpot = (e2el - ttft) / (output_len - 1)   (requests of one output token have none)

Token times are read from the step events: a request sampled `num_sampled[i]` tokens at the end of the step
(the scheduler's StepResult wrote it: the rule for when a request samples lives there alone). Times are
whole-model (step start + model_dur_us), plus what lies between the client and the engine (tokenizer, HTTP, SSE:
the arrive event's frontend_us), what a client measures. Percentiles are numpy's (linear), as the benchmark's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Any

import numpy as np

from layerscope.runtime.goodput import goodput_figures

PERCENTILES = (("mean", None), ("median", 50.0), ("p99", 99.0))


@dataclass
class _Req:
    arrive_us: float
    input_len: int
    output_len: int
    frontend_us: float = 0.0  # the client sees every token this much later than the engine samples it
    token_us: list[float] = field(default_factory=list)
    finished_us: float | None = None


class ServingMetrics:
    """The replay, fed as the run goes: from its events (serving_metrics) or by the engine itself as its steps
    finish, when a run keeps no events (a summary-only ServingInstance); the same calls, the same figures."""

    def __init__(self) -> None:
        self.reqs: dict[int, _Req] = {}
        self.token_us: dict[int, list[float]] = {}  # per request, its token times: one lookup in the hot loop
        self.preemptions = 0
        self.failed = 0  # rejected by the server (longer than max_model_len): vllm bench serve's failed requests

    def arrive(self, rid: int, t_us: float, input_len: int, output_len: int,
               token_us: list[float] | None = None, frontend_us: float = 0.0) -> None:
        """`token_us`: the list the engine appends the request's token times to itself (a summary-only run, which
        keeps no step events). `frontend_us`: what lies between the client and the engine (the arrive event's)."""
        r = self.reqs[rid] = _Req(t_us, input_len, output_len, frontend_us,
                                  token_us if token_us is not None else [])
        self.token_us[rid] = r.token_us

    def preempted(self, rid: int) -> None:
        self.preemptions += 1

    def step(self, end_us: float, request_ids: list[int], num_sampled: list[int]) -> None:
        """The hot loop: a run's request-steps. Each token a request sampled came at the step's end."""
        token_us = self.token_us
        for rid, n in zip(request_ids, num_sampled, strict=True):
            if n == 1:  # the common case: one token (a speculative step's several would come as n > 1)
                token_us[rid].append(end_us)
            elif n:
                token_us[rid].extend([end_us] * n)

    def rejected(self, rid: int) -> None:
        del rid  # it never runs: no token, no finish
        self.failed += 1

    def finished(self, rid: int, t_us: float) -> None:
        self.reqs[rid].finished_us = t_us

    def feed(self, events: Iterable[Any]) -> ServingMetrics:
        for e in events:
            kind = e.kind
            if kind == "step":
                self.step(e.start_us + e.model_dur_us, e.request_ids, e.num_sampled)
            elif kind == "request":
                what = e.what
                if what == "arrive":
                    self.arrive(e.request_id, e.t_us, e.input_len, e.output_len,
                                frontend_us=getattr(e, "frontend_us", 0.0))
                elif what == "preempted":
                    self.preempted(e.request_id)
                elif what == "finished":
                    self.finished(e.request_id, e.t_us)
                elif what == "rejected":
                    self.rejected(e.request_id)
                elif what == "transfer_done":  # disaggregated: the first token reaches the client with the KV
                    self.token_us[e.request_id].append(e.t_us)
        return self

    def finished_requests(self) -> list[_Req]:
        """The finished requests as the client sees them: every token (and the end) `frontend_us` later than the
        engine made it."""
        out = []
        for r in self.reqs.values():
            if r.finished_us is None:
                continue
            if r.frontend_us:
                r = replace(r, token_us=(np.asarray(r.token_us) + r.frontend_us).tolist(),  # the same adds, in C
                            finished_us=r.finished_us + r.frontend_us)
            out.append(r)
        return out

    def samples(self, done: list[_Req] | None = None) -> dict[str, list[float] | np.ndarray]:
        """TTFT, TPOT, ITL and E2EL of the finished requests in ms, as `vllm bench serve` defines them (`done`:
        finished_requests(), when the caller has it)."""
        done = self.finished_requests() if done is None else done
        ttft = [(r.token_us[0] - r.arrive_us) / 1000.0 for r in done]
        e2el = [(r.finished_us - r.arrive_us) / 1000.0 for r in done]  # type: ignore[operator]
        tpot = [(e - t) / (len(r.token_us) - 1) for r, e, t in zip(done, e2el, ttft, strict=True)
                if len(r.token_us) > 1]
        return {"ttft": ttft, "tpot": tpot, "itl": _gaps(done), "e2el": e2el}

    def per_request(self, done: list[_Req] | None = None) -> dict[str, list[float]]:
        """TTFT, TPOT and E2EL in ms per finished request, aligned (TPOT 0 for one output token: vLLM's
        `all_tpots`), what --goodput judges."""
        done = self.finished_requests() if done is None else done
        ttft = [(r.token_us[0] - r.arrive_us) / 1000.0 for r in done]
        e2el = [(r.finished_us - r.arrive_us) / 1000.0 for r in done]  # type: ignore[operator]
        tpot = [(e - t) / (len(r.token_us) - 1) if len(r.token_us) > 1 else 0.0
                for r, e, t in zip(done, e2el, ttft, strict=True)]
        return {"ttft": ttft, "tpot": tpot, "e2el": e2el}

    def figures(self, slos: Mapping[Any, float] | None = None) -> dict[str, float | int]:
        """`slos` (ms per metric, --goodput): adds request_goodput and each SLO's attainment."""
        reqs = self.reqs
        done = self.finished_requests()  # once: it shifts every token time by the request's frontend time
        samples = self.samples(done)
        start = min((r.arrive_us for r in reqs.values()), default=0.0)
        end = max((r.finished_us for r in done if r.finished_us is not None), default=start)
        duration = (end - start) / 1e6
        n_in = sum(r.input_len for r in done)
        n_out = sum(len(r.token_us) for r in done)
        out: dict[str, float | int] = {
            "completed": len(done),
            "failed": self.failed,
            "duration": _r(duration),
            "total_input_tokens": n_in,
            "total_output_tokens": n_out,
            "request_throughput": _r(len(done) / duration) if duration > 0 else 0.0,
            "output_throughput": _r(n_out / duration) if duration > 0 else 0.0,
            "total_token_throughput": _r((n_in + n_out) / duration) if duration > 0 else 0.0,
        }
        for name, values in samples.items():
            for stat, q in PERCENTILES:
                out[f"{stat}_{name}_ms"] = _stat(values, q)
        out["num_preemptions"] = self.preemptions
        if slos:
            out.update(goodput_figures(self.per_request(done), slos, duration))
        return out


def serving_metrics(events: Iterable[Any], slos: Mapping[Any, float] | None = None) -> dict[str, float | int]:
    return ServingMetrics().feed(events).figures(slos)


def merged(parts: list[ServingMetrics]) -> ServingMetrics:
    """Several instances' replays as one (a deployment's replicas, each fed its own requests), by request id."""
    if len(parts) == 1:
        return parts[0]
    out = ServingMetrics()
    reqs = {rid: r for m in parts for rid, r in m.reqs.items()}
    for rid in sorted(reqs):
        out.reqs[rid] = reqs[rid]
        out.token_us[rid] = reqs[rid].token_us
    out.preemptions = sum(m.preemptions for m in parts)
    out.failed = sum(m.failed for m in parts)
    return out


def _gaps(done: list[_Req]) -> np.ndarray | list[float]:
    """Every request's inter-token latencies in ms, request after request: one diff over all their token times,
    less the differences across two requests (the same values as a diff per request, concatenated)."""
    if not done:
        return []
    lens = [len(r.token_us) for r in done]
    flat = np.fromiter(chain.from_iterable(r.token_us for r in done), dtype=np.float64, count=sum(lens))
    gaps = np.diff(flat)
    starts = np.cumsum(lens)[:-1]  # where each request after the first begins in `flat`
    starts = starts[(starts > 0) & (starts < flat.size)]
    within = np.ones(gaps.size, dtype=bool)
    within[starts - 1] = False  # flat[start] - flat[start - 1]: the last token of one request to the next's first
    return gaps[within] / 1000.0


def _stat(values: list[float] | np.ndarray, q: float | None) -> float:
    if len(values) == 0:
        return 0.0
    return _r(np.mean(values) if q is None else np.percentile(values, q))


def _r(x: float | np.floating) -> float:
    return round(float(x), 4)
