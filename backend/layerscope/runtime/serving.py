"""The serving engine: many requests through one layer, step by step, as vLLM's V1 engine core loop.

    client (workload.py: arrivals, max_concurrency)
        │ arrive
        ▼
    loop, each step ─▶ Scheduler.schedule ──asks──▶ KVCacheManager ──▶ KVAllocator policy ──▶ BlockPool
        │                (decodes, then prefill chunks; preemption)   (blocks, prefix cache, LRU eviction)
        ├─▶ RuntimePlan.step_kernels(model, [(new, context)])   one layer's kernels for the mixed batch
        ├─▶ Timing: kernels priced and laid on streams           one layer, drawn at the step's start
        ├─▶ model step = layer x num_hidden_layers + outside-layer kernels + page migrations
        └─▶ Scheduler.update_from_output: sampled tokens, first tokens, finished requests
    Recorder: events (request, step, kernel, page, memory, banks) ─▶ summary from the events (metrics.py)

The clock is the whole model's (what a client sees): step i starts at start_us and lasts model_dur_us; the
timeline draws its first layer's kernels from start_us. Same spec and seed, the same events byte for byte.
"""

from __future__ import annotations

import gc
import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from layerscope.events import (
    BanksEvent,
    ExpertsEvent,
    MemoryEvent,
    NumericsEvent,
    PageAllocEvent,
    PageCacheEvent,
    PageEvictEvent,
    PageFreeEvent,
    PageMigrateEvent,
    PhaseEvent,
    RequestEvent,
    StepEvent,
    SummaryEvent,
    trusted_event,
)
from layerscope.hardware.gpus import gpu as gpu_preset
from layerscope.model.config import PRESETS
from layerscope.runtime.chunks import GIB, ChunkScheduler
from layerscope.runtime.deployment import (
    deployment_event,
    deployment_summary,
    kv_pool_bytes,
    pool_workspace_bytes,
    scenario_placement,
)
from layerscope.runtime.frontend_latency import frontend_for, lagged_arrival
from layerscope.runtime.kernels import Kernel
from layerscope.runtime.kv.cache_manager import CACHE_OWNER, KVCacheManager
from layerscope.runtime.kv.free_queue import FreeQueueAllocator
from layerscope.runtime.kv.manager import KVManager
from layerscope.runtime.metrics import ServingMetrics, serving_metrics
from layerscope.runtime.plan import workspace_bytes
from layerscope.runtime.request import Request
from layerscope.runtime.routing import scenario_traffic
from layerscope.runtime.sched_interface import SchedulerInterface, SchedulerOutput, StepResult
from layerscope.runtime.scheduler import ArticleScheduler, Scheduler
from layerscope.runtime.serving_shadow import ServingShadow
from layerscope.runtime.sharded import ShardedRuntime, deployed
from layerscope.runtime.timing import COPY, Timing, default_costs
from layerscope.runtime.workload import make_requests
from layerscope.scenario import ScenarioSpec

BANKS_EVERY = 8  # steps between bank snapshots (a snapshot scans the pool; a step is ~0.1 s of model time)


@dataclass
class ServingStats:
    """What the summary needs beyond the events."""

    num_steps: int = 0
    max_step_tokens: int = 0
    max_step_seqs: int = 0
    migrations: int = 0
    cache_evictions: int = 0
    peak_used_bytes: float = 0.0
    layer_us: list[float] = field(default_factory=list)
    prefix_hit_rate: float = 0.0
    max_rel_error: float = 0.0  # scaled batch against each sequence alone


class ServingEngine:
    """`summary_only`: the run keeps no events (`layerscope bench`, `sweep`): it builds none, and the serving
    metrics are accumulated as its steps finish (ServingMetrics, the same replay the events feed), so its
    summary is the full run's, figure for figure (tests/runtime/test_serving.py). `check`: the server's budget
    and cancel hook, called every few steps."""

    def __init__(self, spec: ScenarioSpec, progress: Callable[[float], None] | None = None,
                 check: Callable[[int], None] | None = None, summary_only: bool = False) -> None:
        assert spec.workload is not None, "the serving engine runs a workload"
        for name in ("faults", "actions"):
            if getattr(spec, name):
                raise ValueError(f"field '{name}': not simulated on a serving run (a workload) yet; "
                                 "use the one-request shorthand (prompt_len, decode_steps)")
        if spec.decode_page_hint:
            raise ValueError("field 'decode_page_hint': a one-request feature; not simulated on a serving run")
        self.spec = spec
        self.progress = progress
        self.check = check  # the server's budget and cancel hook (runtime.engine.simulate)
        self.gpu = gpu_preset(spec.gpu)
        # With a deployment: one GPU of the group (its shard, its collectives, its KV pool from the placement).
        self.placement = scenario_placement(spec)
        self.plan, self.model = deployed(spec)
        self.traffic = scenario_traffic(spec, PRESETS[spec.model])  # the routing the MoE runs with
        self.frontend = frontend_for(spec)  # tokenizer, HTTP and SSE between the client and this engine
        self.page_size = spec.effective_page_size
        self.events: list[Any] = []
        self.metrics = ServingMetrics() if summary_only else None  # fed directly when no events are kept
        self._emit = _drop if summary_only else self.events.append  # type: ignore[assignment]
        cost_model, costs = default_costs(self.gpu)  # prices memoised across the process's runs on this GPU
        self.timing = Timing(cost_model, None if summary_only else self.events.append, costs)
        if isinstance(self.plan, ShardedRuntime):
            self.plan.price = self.timing.cost  # one memoised price per kernel for the plan and the launches
        self.stats = ServingStats()
        self.limits = spec.scheduler_limits  # vLLM's defaults for this GPU where the scenario leaves them null
        self.free_start = kv_pool_bytes(spec, self.placement)
        self.chunks = ChunkScheduler(spec.chunk_size, spec.low_mem_chunk_size, spec.low_mem_threshold_gib,
                                     self.page_size)
        step_tokens = self._max_step_tokens()
        self.kv = KVManager(self.model, self.page_size, spec.banks, spec.allocator, self.free_start,
                            pool_workspace_bytes(spec, self.placement, workspace_bytes(self.model, step_tokens)))
        # vLLM has no placement policy: its blocks come from one free queue. The allocator field is the article's.
        allocator = self.kv.allocator if spec.runtime == "article" else FreeQueueAllocator(self.kv.pool)
        self.allocator_name = allocator.name
        self.cache = KVCacheManager(allocator, self.page_size, spec.scheduler.prefix_caching)
        lim = self.limits
        self.scheduler: SchedulerInterface = (
            ArticleScheduler(self.cache, self.chunks, lim.max_num_seqs, self._free_bytes)
            if spec.runtime == "article"
            else Scheduler(self.cache, lim.max_num_batched_tokens, lim.max_num_seqs, lim.long_prefill_token_threshold,
                           spec.scheduler.enable_chunked_prefill)
        )
        self.requests = make_requests(spec.workload, self.model.vocab_size)
        self.shadow = (
            ServingShadow(spec.numerics_model, spec.runtime == "article", self.requests, spec.seed)
            if spec.numerics
            else None
        )
        self._rng = np.random.default_rng(spec.seed)
        self._version_drawn = -1
        self._drawn_step = -BANKS_EVERY
        self._run = 0  # largest free run of pages, as of the block tables' version drawn last
        self._outside_sums: dict[int, tuple[list[Kernel], float]] = {}  # id(list) -> (the list, its kernels' time)

    def _max_step_tokens(self) -> int:
        if self.spec.runtime == "article":
            return max(self.spec.chunk_size, self.spec.low_mem_chunk_size) + self.limits.max_num_seqs
        return self.limits.max_num_batched_tokens

    def _free_bytes(self) -> float:
        return self.free_start - self.kv.used_pages * self.kv.page_bytes

    # == the loop ===================================================================================================
    def run(self) -> tuple[list[Any], dict[str, float | int | bool | str]]:
        spec = self.spec
        self._setup_pool()
        self._check_fits()
        n = len(self.requests)
        self._emit(PhaseEvent(t_us=0.0, phase="prefill", detail=f"serving {n} requests, {spec.runtime} runtime"))
        pending = deque(self.requests)
        cap = spec.workload.max_concurrency if spec.workload is not None else None
        slots = [0.0] * min(cap or n, n)  # when each of the client's concurrency slots came free
        t = step_start = 0.0
        ahead = spec.deployment is not None and spec.deployment.async_scheduling
        while pending or self.scheduler.has_unfinished():
            seen = lagged_arrival(ahead, self.scheduler.has_unfinished(), step_start, t)
            while pending and slots and max(pending[0].arrival_us, slots[0]) <= seen:
                self._send(pending.popleft(), heapq.heappop(slots), slots)
            if not self.scheduler.has_unfinished():
                if pending:  # idle until the next request can be sent
                    t = max(pending[0].arrival_us, slots[0])
                continue
            out = self.scheduler.schedule()
            assert out.num_seqs, "a step with nothing scheduled: every request was checked to fit the pool"
            step_start = t
            t_end = self._step(out, t)
            res = self.scheduler.update_from_output(out)
            self._finish(res, t_end, slots)
            self._drain_frees(t_end)
            t = t_end
            if self.progress is not None and self.stats.num_steps % 16 == 0:
                self.progress(min(1.0, (n - len(pending) - self.scheduler.num_unfinished()) / n))
            if self.check is not None and self.stats.num_steps % 16 == 0:
                self.check(len(self.events))
        self._snapshot(t, 0.0, final=True)
        self._emit(PhaseEvent(t_us=t, phase="idle", detail="done"))
        self.stats.prefix_hit_rate = self.cache.hit_rate
        if self.metrics is not None:
            summary = self._summary(self.metrics.figures())
            return [SummaryEvent(t_us=t, figures=summary)], summary
        events = sorted(self.events, key=lambda e: e.t_us)  # stable: emission order breaks ties
        summary = self._summary(serving_metrics(events))
        events.append(SummaryEvent(t_us=t, figures=summary))
        _promote_to_oldest_generation()
        return events, summary

    def _setup_pool(self) -> None:
        if self.placement is not None:
            self._emit(deployment_event(self.spec, self.placement))
        if self.spec.fragmentation > 0:
            banks, slots = self.kv.fill_tenants(self.spec.fragmentation, self._rng)
            self._emit(PageAllocEvent(t_us=0.0, owner="tenant", phase="prefill", logical=list(range(len(banks))),
                                      banks=banks.tolist(), slots=slots.tolist()))
        self._snapshot(0.0, 0.0)

    def _check_fits(self) -> None:
        """Every request must fit the pool alone (prompt + output - 1 tokens of KV), or it could never run (those
        over max_model_len are rejected when they arrive)."""
        room = self.kv.pool.num_free
        served = [r for r in self.requests if not self._too_long(r)]
        if not served:
            return
        worst = max(served, key=lambda r: r.input_len + r.output_len)
        pages = -(-(worst.input_len + worst.output_len - 1) // self.page_size)
        if pages > room:
            raise ValueError(
                f"field 'workload.input_len': request {worst.request_id} needs {pages} KV pages "
                f"({worst.input_len} + {worst.output_len} tokens) but the pool has {room}: raise free_hbm_gib "
                "or shorten the requests"
            )

    def _too_long(self, req: Request) -> bool:
        return req.input_len + req.output_len > self.limits.max_model_len

    def _send(self, req: Request, slot_free_us: float, slots: list[float]) -> None:
        """The client sends a request: at its arrival time, or when a concurrency slot frees, if later. One longer
        than max_model_len is answered at once with vLLM's 400 ("This model's maximum context length is ...
        tokens", OpenAIServing._validate_input): a `rejected` event, and its client slot is free again."""
        t = max(req.arrival_us, slot_free_us)
        frontend_us = self.frontend.total_us(req.input_len)
        rejected = self._too_long(req)
        if self.metrics is not None:
            self.metrics.arrive(req.request_id, float(t), req.input_len, req.output_len, req.token_us,
                                float(frontend_us))
            if rejected:
                self.metrics.rejected(req.request_id)
        else:
            self._emit(self._request_event(req, "arrive", t, frontend_us))
            if rejected:
                self._emit(self._request_event(req, "rejected", t))
        if rejected:
            heapq.heappush(slots, t)
            return
        self.scheduler.add_request(req)

    def _request_event(self, req: Request, what: str, t: float, frontend_us: float = 0.0) -> RequestEvent:
        return trusted_event(RequestEvent, {  # four a request: typed here, in declaration order
            "t_us": float(t), "kind": "request", "request_id": req.request_id, "what": what, "input_len": req.input_len,
            "output_len": req.output_len, "num_computed_tokens": req.num_computed_tokens,
            "num_output_tokens": req.num_output_tokens, "frontend_us": float(frontend_us)})

    # == one step ===================================================================================================
    def _step(self, out: SchedulerOutput, t: float) -> float:
        i = self.stats.num_steps
        metrics = self.metrics
        for req in out.preempted:
            if metrics is not None:
                metrics.computed(req.request_id, req.num_computed_tokens, True)
            else:
                self._emit(self._request_event(req, "preempted", t))
        self._drain_frees(t)
        once_us = 0.0
        for req in out.admitted:
            if metrics is not None:
                metrics.computed(req.request_id, req.num_computed_tokens, False)
            else:
                self._emit(self._request_event(req, "scheduled", t))
        for s in out.allocated:
            a = s.allocation
            if a is None or not (a.new_blocks or a.migrations):
                continue
            for m in a.migrations:
                once_us += self._migration(m, t, s.request.request_id)
            if a.new_blocks and metrics is None:
                table = self.cache.req_to_blocks[s.request.request_id]
                first = len(table) - len(a.new_blocks)
                rid = s.request.request_id
                self._emit(trusted_event(PageAllocEvent, {  # thousands a run: typed here, in declaration order
                    "t_us": float(t), "kind": "page_alloc", "owner": f"req{rid}",
                    "phase": "prefill" if s.num_new_tokens > 1 else "decode", "logical": list(range(first, len(table))),
                    "banks": [int(b.bank) for b in a.new_blocks], "slots": [int(b.slot) for b in a.new_blocks],
                    "request_id": rid}))
        batch = out.batch()
        num_tokens = out.tokens_per_seq()
        total = sum(num_tokens)
        decode = num_tokens.count(1)
        prefill = total - decode
        kernels = self.plan.step_kernels(self.model, batch)
        layer_end = self.timing.launch(kernels, t, "prefill" if prefill else "decode", step=i)
        layer_us = layer_end - t
        outside_us = self._outside_us(self.plan.outside_layer_kernels(self.model, batch))
        # whole-model kernels in the plan (scope "model": the article's embedding lookup) are paid once per step
        model_scope_us = sum(self.timing.cost(k).time_us for k in kernels if k.scope == "model")
        model_us = (layer_us - model_scope_us) * self.model.num_hidden_layers + model_scope_us + outside_us + once_us
        if metrics is None:  # a summary-only run's token times are taken from the step's result (_finish)
            self._step_event(out, i, t, layer_us, model_us, batch, prefill, decode, num_tokens)
        st = self.stats
        st.num_steps += 1
        st.max_step_tokens = max(st.max_step_tokens, total)
        st.max_step_seqs = max(st.max_step_seqs, len(batch))
        st.layer_us.append(layer_us)
        self._snapshot(t, workspace_bytes(self.model, total))
        if self.shadow is not None:
            self._numerics(out, t, i, "prefill" if prefill else "decode")
        return t + model_us

    def _step_event(self, out: SchedulerOutput, i: int, t: float, layer_us: float, model_us: float,
                    batch: list[tuple[int, int]], prefill: int, decode: int, num_tokens: list[int]) -> None:
        cached = sum(s.num_cached_tokens for s in out.allocated) // self.page_size  # hits come with an allocation
        self._emit(trusted_event(StepEvent, {  # every field typed here: no need to validate 100-long lists
            "t_us": float(t), "kind": "step", "index": i, "start_us": float(t), "dur_us": float(layer_us),
            "model_dur_us": float(model_us), "num_seqs": len(batch), "prefill_tokens": prefill,
            "decode_tokens": decode, "token_budget": out.token_budget,
            "request_ids": out.request_ids(), "num_tokens": num_tokens,
            "cached_blocks": cached if self.cache.prefix_caching else None}))

    def _outside_us(self, outside: list[Kernel]) -> float:
        """The outside-layer kernels' time; a sharded plan hands back the same list for the same step shape."""
        hit = self._outside_sums.get(id(outside))
        if hit is None or hit[0] is not outside:
            hit = self._outside_sums[id(outside)] = (outside, sum(self.timing.cost(k).time_us for k in outside))
        return hit[1]

    def _numerics(self, out: SchedulerOutput, t: float, i: int, phase: str) -> None:
        """The same batch at the scaled size, one varlen forward; its error against each sequence alone."""
        assert self.shadow is not None
        for req in out.preempted:
            self.shadow.preempted(req)
        r = self.shadow.step([(s.request, s.num_context_tokens, s.num_new_tokens) for s in out.seqs])
        if r is None:
            return
        self.stats.max_rel_error = max(self.stats.max_rel_error, r.rel_error)
        self._emit(NumericsEvent(t_us=t, phase=phase, scaled_model=self.shadow.name,  # type: ignore[arg-type]
                                 tokens=r.tokens, rel_error=r.rel_error, max_abs_error=r.max_abs_error,
                                 nan_count=r.nan_count, inf_count=r.inf_count, step=i))
        if r.expert_counts is not None:
            assert self.traffic is not None  # expert counts come from a MoE model
            self._emit(ExpertsEvent(t_us=t, phase=phase, step=i, scaled_model=self.shadow.name,  # type: ignore[arg-type]
                                    counts=r.expert_counts, assumed=self.traffic.routing.assumed,  # type: ignore[arg-type]
                                    distinct_full=self.traffic.distinct(out.num_tokens)))

    def _migration(self, m: Any, t: float, request_id: int) -> float:
        """A page moved to make room (bank-aware decode): paid once per model step, on the copy stream."""
        k = Kernel("kv_page_migrate", "kv_migrate", "memory", 0.0, 2 * self.kv.page_bytes, stream=COPY,
                   shapes=f"1 page x {self.model.num_hidden_layers} layers (read + write)", scope="model")
        c = self.timing.cost(k)
        start = self.timing.copy(c, t, "decode")
        self.stats.migrations += 1
        owner_id = int(m.owner[3:]) if m.owner.startswith("req") else None
        self._emit(PageMigrateEvent(t_us=start, owner=m.owner, logical=m.logical, from_bank=m.from_bank,
                                    from_slot=m.from_slot, to_bank=m.to_bank, to_slot=m.to_slot,
                                    bytes=2 * self.kv.page_bytes, dur_us=c.time_us, reason=m.reason,
                                    request_id=owner_id if owner_id is not None else None))
        del request_id
        return c.time_us

    def _finish(self, res: StepResult, t_end: float, slots: list[float]) -> None:
        if self.metrics is not None:  # every token sampled, the first included, is one of the token times
            for req in res.sampled:
                req.token_us.append(t_end)
            for req in res.finished:
                self.metrics.finished(req.request_id, float(t_end))
                heapq.heappush(slots, t_end)
            return
        for req in res.first_token:
            self._emit(self._request_event(req, "first_token", t_end))
        for req in res.finished:
            self._emit(self._request_event(req, "finished", t_end))
            heapq.heappush(slots, t_end)

    def _drain_frees(self, t: float) -> None:
        for what, rid, where in self.cache.drain_log():
            if not where:
                continue
            if what == "evict":
                self.stats.cache_evictions += len(where)
            if self.metrics is not None:
                continue  # no page events to draw
            banks, slots = [b for b, _ in where], [s for _, s in where]
            if what == "evict":
                self._emit(PageEvictEvent(t_us=t, owner=CACHE_OWNER, logical=list(range(len(where))), banks=banks,
                                          slots=slots, bytes=len(where) * self.kv.page_bytes))
            elif what == "keep":
                assert rid is not None, "kept blocks name the request that let go of them"
                self._emit(PageCacheEvent(t_us=t, owner=f"req{rid}", banks=banks, slots=slots, request_id=rid))
            else:
                self._emit(PageFreeEvent(t_us=t, owner=f"req{rid}", banks=banks, slots=slots, request_id=rid))

    def _snapshot(self, t: float, activation: float, final: bool = False) -> None:
        kv, pool = self.kv, self.kv.pool
        total = self.placement.capacity_bytes if self.placement is not None else self.gpu.hbm_bytes
        used = total - self.free_start + kv.used_pages * kv.page_bytes + activation
        self.stats.peak_used_bytes = max(self.stats.peak_used_bytes, used)
        if self.metrics is not None:
            return  # no memory or bank events to draw: the summary needs only the peak
        # banks and the largest free run are redrawn when the tables changed, at most every BANKS_EVERY steps
        changed = self.cache.version != self._version_drawn and (
            final or self.stats.num_steps - self._drawn_step >= BANKS_EVERY
        )
        if changed:
            self._drawn_step = self.stats.num_steps
            self._run = pool.largest_free_run()
        self._emit(trusted_event(MemoryEvent, {  # one a step: every field typed here, in declaration order
            "t_us": float(t), "kind": "memory", "hbm_total_bytes": float(total), "hbm_used_bytes": float(used),
            "hbm_free_bytes": float(total - used), "kv_bytes": float(kv.used_pages * kv.page_bytes),
            "largest_free_run_bytes": float(self._run * kv.page_bytes), "activation_bytes": float(activation)}))
        if changed:
            self._version_drawn = self.cache.version
            self._emit(BanksEvent(t_us=t, used=pool.used_per_bank(), capacity=pool.pages_per_bank))

    # == summary ====================================================================================================
    def _summary(self, metrics: dict[str, float | int]) -> dict[str, float | int | bool | str]:
        st, spec = self.stats, self.spec
        layer = np.asarray(st.layer_us) if st.layer_us else np.zeros(1)
        out: dict[str, float | int | bool | str] = {
            "model": self.model.name,
            "runtime": spec.runtime,
            "gpu": self.gpu.name,
            "allocator": self.allocator_name,
            "num_hidden_layers": self.model.num_hidden_layers,
            "page_size": self.page_size,
            "num_requests": len(self.requests),
            "max_num_batched_tokens": self.limits.max_num_batched_tokens,
            "max_num_seqs": self.limits.max_num_seqs,
            "prefix_caching": spec.scheduler.prefix_caching,
        }
        out.update(metrics)
        out.update(self.frontend.summary([r.input_len for r in self.requests]))
        out.update({
            "prefix_cache_hit_rate": round(st.prefix_hit_rate, 4),
            # vLLM's counters (vllm:prefix_cache_queries / vllm:prefix_cache_hits): tokens of never-preempted admissions
            "prefix_cache_queries": self.cache.stats.queries,
            "prefix_cache_hits": self.cache.stats.hits,
            "num_steps": st.num_steps,
            "max_step_tokens": st.max_step_tokens,
            "max_step_seqs": st.max_step_seqs,
            "step_layer_mean_us": round(float(layer.mean()), 3),
            "step_layer_p99_us": round(float(np.percentile(layer, 99)), 3),
            "migrations": st.migrations,
            "prefix_cache_evictions": st.cache_evictions,
            "pool_pages": self.kv.pool.num_pages,
            "peak_hbm_used_gib": round(st.peak_used_bytes / GIB, 3),
            "max_rel_error": float(f"{st.max_rel_error:.3g}"),
        })
        out.update(deployment_summary(spec, self.placement))
        return out


def _drop(event: Any) -> None:
    """Where a summary-only run's rare events go (phases, migrations, numerics): nowhere."""


def _promote_to_oldest_generation() -> None:
    """Hand the run's objects (its events, ~10 per request-step) to the collector's oldest generation.

    The run allocates with the collector paused (gcpause.py), so every object it made is still in the youngest
    generation, and the first young pass after the pause would traverse them all (~0.15 s of a 500-request
    run's 2 s CPU, measured with gc.callbacks) to find them alive. freeze() then unfreeze() moves every tracked
    object to the oldest generation without traversing it; cycles among them are still collected by the next
    full pass."""
    gc.freeze()
    gc.unfreeze()
