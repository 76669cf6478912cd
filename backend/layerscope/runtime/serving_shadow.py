"""The scaled numpy layer on a serving run's schedule: every step is one varlen forward over its tokens.

    full size   step: request r computes tokens [c, c + n) of its prompt + output
    scaled      request r's prompt is max(1, round(f x input_len)) tokens (f = SCALED_PROMPT / longest prompt,
                at most 1); output tokens map one to one; the step computes r's scaled tokens not yet computed,
                up to where [c, c + n) ends
    inputs      x = a seeded embedding row per token id (ids mod EMBED_ROWS): a shared prefix is identical input
    preempted   its scaled caches are dropped; the recompute runs its tokens again

Each step's batched output is compared with each sequence run on its own (its own cache, its own forward):
the rel_error of a numerics event is that batch-invariance error (float32 rounding, ~1e-7). Prefix-cache hits
are recomputed at the scaled size (same values: the same ids give the same K/V).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from layerscope.events import ExpertsEvent, NumericsEvent
from layerscope.model.kv_cache import PagedKVCache
from layerscope.model.layer import Layer
from layerscope.runtime.request import Request
from layerscope.runtime.routing import ExpertTraffic
from layerscope.runtime.sched_interface import SchedulerOutput
from layerscope.runtime.shadow import SCALED_PAGE, NumericShadow, ShadowResult, _compare

SCALED_PROMPT = 32  # scaled tokens of the longest prompt
EMBED_ROWS = 4096  # distinct scaled input rows (token id mod EMBED_ROWS)
MAX_SHADOW_TOKENS = 20_000  # scaled tokens one serving run's numerics may compute: bounds CPU time (~1 ms each)


class ServingShadow:
    def __init__(self, model_name: str, quantized: bool, requests: list[Request], seed: int) -> None:
        self.layer: Layer = NumericShadow(model_name, quantized, 1, 1, seed).clean
        self.name = model_name
        h = self.layer.config.hidden_size
        self.embed = np.random.default_rng(seed + 3571).standard_normal((EMBED_ROWS, h), dtype=np.float32)
        scale = min(1.0, SCALED_PROMPT / max(r.input_len for r in requests))
        self.prompt = {r.request_id: max(1, round(r.input_len * scale)) for r in requests}
        total = sum(self.prompt[r.request_id] + r.output_len for r in requests)
        if total > MAX_SHADOW_TOKENS:
            raise ValueError(f"field 'numerics': this workload is {total} tokens at the scaled size; numerics on a "
                             f"serving run are limited to {MAX_SHADOW_TOKENS} (fewer requests or outputs)")
        self.caches: dict[int, PagedKVCache] = {}
        self.alone: dict[int, PagedKVCache] = {}  # each sequence on its own: the reference
        self.done: dict[int, int] = {}

    def scaled(self, req: Request, full_tokens: int) -> int:
        """Scaled tokens that stand for the request's first `full_tokens` tokens."""
        p = self.prompt[req.request_id]
        if full_tokens <= req.input_len:
            return round(full_tokens * p / req.input_len)
        return p + full_tokens - req.input_len

    def preempted(self, req: Request) -> None:
        for d in (self.caches, self.alone, self.done):
            d.pop(req.request_id, None)

    def record(self, out: SchedulerOutput, t: float, i: int, phase: str, emit: Callable[[Any], None],
               traffic: ExpertTraffic | None) -> float:
        """Step `i`'s batch at the scaled size, one varlen forward, and its events; its error against each sequence
        alone (0 when it computed no scaled token)."""
        for req in out.preempted:
            self.preempted(req)
        r = self.step([(s.request, s.num_context_tokens, s.num_new_tokens) for s in out.seqs])
        if r is None:
            return 0.0
        emit(NumericsEvent(t_us=t, phase=phase, scaled_model=self.name, tokens=r.tokens,
                           rel_error=r.rel_error, max_abs_error=r.max_abs_error, nan_count=r.nan_count,
                           inf_count=r.inf_count, step=i))
        if r.expert_counts is not None:
            assert traffic is not None  # expert counts come from a MoE model
            emit(ExpertsEvent(t_us=t, phase=phase, step=i, scaled_model=self.name,
                              counts=r.expert_counts, assumed=traffic.routing.assumed,
                              distinct_full=traffic.distinct(out.num_tokens)))
        return r.rel_error

    def step(self, batch: list[tuple[Request, int, int]]) -> ShadowResult | None:
        """batch: (request, num_context_tokens, num_new_tokens) at full size. None when no scaled token is due."""
        plan: list[tuple[Request, int, int]] = []  # (request, first scaled position, scaled tokens)
        for req, ctx, n in batch:
            a, b = self.done.get(req.request_id, 0), self.scaled(req, ctx + n)
            if b > a:
                plan.append((req, a, b - a))
        if not plan:
            return None
        xs = [self._inputs(req, a, n) for req, a, n in plan]
        pos = np.concatenate([np.arange(a, a + n) for _, a, n in plan])  # (T,)
        caches = [self._cache(self.caches, req) for req, _, _ in plan]
        y, trace = self.layer.forward_varlen(np.concatenate(xs), pos, caches, [n for _, _, n in plan])  # (T, H)
        ref = np.concatenate([self.layer.forward(x, np.arange(a, a + n), self._cache(self.alone, req))
                              for x, (req, a, n) in zip(xs, plan, strict=True)])  # (T, H)
        for req, a, n in plan:
            self.done[req.request_id] = a + n
        return _compare(y, ref, trace.expert_counts)

    def _inputs(self, req: Request, start: int, n: int) -> np.ndarray:
        """Scaled input rows for scaled positions [start, start + n): the embedding of a token id of the request
        (prompt positions sample the full prompt evenly, output positions are the output tokens)."""
        p = self.prompt[req.request_id]
        idx = np.arange(start, start + n)
        full = np.where(idx < p, idx * req.input_len // p, req.input_len + idx - p)  # full-size token index
        return self.embed[req.token_ids[full] % EMBED_ROWS]  # (n, H)

    def _cache(self, caches: dict[int, PagedKVCache], req: Request) -> PagedKVCache:
        c = caches.get(req.request_id)
        if c is None:
            c = caches[req.request_id] = self.layer.new_cache(page_size=SCALED_PAGE, banks=4)
        return c
