"""The serving step policy: many requests through one instance, step by step, as vLLM's V1 engine core.

    client (loop.py: arrivals, max_concurrency) ─▶ receive ─▶ Scheduler.add_request
    each step ─▶ Scheduler.schedule ──asks──▶ KVCacheManager ──▶ KVAllocator policy ──▶ BlockPool
        │          (decodes, then prefill chunks; preemption)   (blocks, prefix cache, LRU eviction)
        ├─▶ RuntimePlan.step_kernels(model, [(new, context)])   one layer's kernels for the mixed batch
        ├─▶ Timing: kernels priced and laid on streams           one layer, drawn at the step's start
        ├─▶ model step = layer x num_hidden_layers + outside-layer kernels + page migrations (Instance)
        └─▶ Scheduler.update_from_output: the tokens sampled, first tokens, finished requests
    Recorder: events (request, step, kernel, page, memory, banks) ─▶ summary from the events (metrics.py)

The clock is the whole model's (what a client sees): step i starts at start_us and lasts model_dur_us; the
timeline draws its first layer's kernels from start_us. Same spec and seed, the same events byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from layerscope.events import PageAllocEvent, PageMigrateEvent, PhaseEvent
from layerscope.hardware.kernel import Kernel
from layerscope.runtime.chunks import ChunkScheduler
from layerscope.runtime.deployment import deployment_event
from layerscope.runtime.frontend_latency import frontend_for, lagged_arrival
from layerscope.runtime.instance import Instance
from layerscope.runtime.kv.allocator import Migration
from layerscope.runtime.kv.cache_manager import KVCacheManager
from layerscope.runtime.kv.free_queue import FreeQueueAllocator
from layerscope.runtime.plan import workspace_bytes
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.request import Request
from layerscope.runtime.sched_interface import SchedulerInterface, SchedulerOutput, StepResult
from layerscope.runtime.scheduler import ArticleScheduler, Scheduler, SGLangScheduler
from layerscope.runtime.serving_shadow import ServingShadow
from layerscope.runtime.timing import Timing
from layerscope.scenario import ScenarioSpec

BANKS_EVERY = 8  # steps between bank snapshots (a snapshot scans the pool; a step is ~0.1 s of model time)


@dataclass
class ServingStats:
    """What the summary needs beyond the events."""

    max_step_tokens: int = 0
    max_step_seqs: int = 0
    migrations: int = 0
    cache_evictions: int = 0
    layer_us: list[float] = field(default_factory=list)
    max_rel_error: float = 0.0  # scaled batch against each sequence alone


def refuse_one_request_fields(spec: ScenarioSpec) -> None:
    assert spec.workload is not None, "a serving instance runs a workload"
    for name in ("faults", "actions"):
        if getattr(spec, name):
            raise ValueError(f"field '{name}': not simulated on a serving run (a workload) yet; "
                             "use the one-request shorthand (prompt_len, decode_steps)")
    if spec.decode_page_hint:
        raise ValueError("field 'decode_page_hint': a one-request feature; not simulated on a serving run")


def too_long(req: Request, max_model_len: int) -> bool:
    return req.input_len + req.output_len > max_model_len


def check_fits(requests: list[Request], free_pages: int, page_size: int, max_model_len: int) -> None:
    """Every request must fit the pool alone (prompt + output - 1 tokens of KV), or it could never run (those
    over max_model_len are rejected when they arrive)."""
    served = [r for r in requests if not too_long(r, max_model_len)]
    if not served:
        return
    worst = max(served, key=lambda r: r.input_len + r.output_len)
    pages = -(-(worst.input_len + worst.output_len - 1) // page_size)
    if pages > free_pages:
        raise ValueError(
            f"field 'workload.input_len': request {worst.request_id} needs {pages} KV pages "
            f"({worst.input_len} + {worst.output_len} tokens) but the pool has {free_pages}: raise free_hbm_gib "
            "or shorten the requests"
        )


def max_step_tokens(spec: ScenarioSpec) -> int:
    """The most tokens one step schedules: the article's chunk beside every running decode, or vLLM's budget."""
    if spec.runtime == "article":
        return max(spec.chunk_size, spec.low_mem_chunk_size) + spec.scheduler_limits.max_num_seqs
    return spec.scheduler_limits.max_num_batched_tokens


def make_scheduler(spec: ScenarioSpec, cache: KVCacheManager, free_bytes: Callable[[], float]) -> SchedulerInterface:
    """vLLM's scheduler with this GPU's limits (SGLang's prefill-first one for deployment.engine sglang), or the
    article's chunk policy (its chunk shrinks as HBM fills)."""
    lim = spec.scheduler_limits
    if spec.runtime == "article":
        chunks = ChunkScheduler(spec.chunk_size, spec.low_mem_chunk_size, spec.low_mem_threshold_gib, cache.block_size)
        return ArticleScheduler(cache, chunks, lim.max_num_seqs, free_bytes)
    sglang = spec.deployment is not None and spec.deployment.engine == "sglang"
    return (SGLangScheduler if sglang else Scheduler)(cache, lim.max_num_batched_tokens, lim.max_num_seqs,
                                                      lim.long_prefill_token_threshold,
                                                      spec.scheduler.enable_chunked_prefill)


def memo_sum(sums: dict[int, tuple[list[Kernel], float]], kernels: list[Kernel], timing: Timing) -> float:
    """The kernels' time, memoised by the list: a sharded plan hands back the same list for the same step shape."""
    hit = sums.get(id(kernels))
    if hit is None or hit[0] is not kernels:
        hit = sums[id(kernels)] = (kernels, sum(timing.cost(k).time_us for k in kernels))
    return hit[1]


class ServingInstance(Instance):
    """A summary-only run's recorder keeps no events: the serving metrics are fed as its steps finish
    (ServingMetrics, the same replay the events feed), so its summary is the full run's, figure for figure
    (tests/runtime/test_serving.py)."""

    clock = "model"

    def __init__(self, spec: ScenarioSpec, recorder: Recorder) -> None:
        refuse_one_request_fields(spec)
        super().__init__(spec, recorder, max_step_tokens(spec))
        self.metrics = recorder.metrics
        self.frontend = frontend_for(spec)  # tokenizer, HTTP and SSE between the client and this engine
        self.stats = ServingStats()
        self.limits = spec.scheduler_limits  # vLLM's defaults for this GPU where the scenario leaves them null
        # vLLM has no placement policy: its blocks come from one free queue. The allocator field is the article's.
        allocator = self.kv.allocator if spec.runtime == "article" else FreeQueueAllocator(self.kv.pool)
        self.allocator_name = allocator.name
        self.cache = KVCacheManager(allocator, self.page_size, spec.scheduler.prefix_caching)
        self.scheduler = make_scheduler(spec, self.cache, self.free_bytes)
        self.requests: list[Request] = []
        self.shadow: ServingShadow | None = None
        self._ahead = spec.deployment is not None and spec.deployment.async_scheduling
        self._step_start = 0.0
        self._step_ids: tuple[list[int], list[int]] | None = None  # this step's request ids and its event's num_sampled
        self._rng = np.random.default_rng(spec.seed)
        self._version_drawn = -1
        self._drawn_step = -BANKS_EVERY
        self._run = 0  # largest free run of pages, as of the block tables' version drawn last
        self._outside_sums: dict[int, tuple[list[Kernel], float]] = {}  # id(list) -> (the list, its kernels' time)

    def expect(self, requests: list[Request]) -> None:
        """The requests the client will send (the numeric shadow draws their tokens; start() checks they fit)."""
        self.requests = requests
        if self.spec.numerics:
            self.shadow = ServingShadow(self.spec.numerics_model, self.spec.runtime == "article", requests,
                                        self.spec.seed)

    # == what the loop asks =========================================================================================
    def start(self) -> None:
        if self.placement is not None:
            self.emit(deployment_event(self.spec, self.placement))
        if self.spec.fragmentation > 0:
            banks, slots = self.kv.fill_tenants(self.spec.fragmentation, self._rng)
            self.emit(PageAllocEvent(t_us=0.0, owner="tenant", phase="prefill", logical=list(range(len(banks))),
                                     banks=banks.tolist(), slots=slots.tolist(), instance=self.recorder.instance))
        self._snapshot(0.0, 0.0)
        check_fits(self.requests, self.kv.pool.num_free, self.page_size, self.limits.max_model_len)
        detail = f"serving {len(self.requests)} requests, {self.spec.runtime} runtime"
        self.emit(PhaseEvent(t_us=0.0, phase="prefill", detail=detail))

    def has_work(self) -> bool:
        return self.scheduler.has_unfinished()

    def num_unfinished(self) -> int:
        return self.scheduler.num_unfinished()

    def seen(self, t: float) -> float:
        return lagged_arrival(self._ahead, self.scheduler.has_unfinished(), self._step_start, t)

    def receive(self, req: Request, t: float) -> bool:
        """The client sent a request at t; False: refused, as vLLM's server answers one longer than max_model_len
        with a 400 ("This model's maximum context length is ... tokens", OpenAIServing._validate_input)."""
        rejected = too_long(req, self.limits.max_model_len)
        frontend_us = self.frontend.total_us(req.input_len)
        if self.metrics is not None:
            self.metrics.arrive(req.request_id, float(t), req.input_len, req.output_len, req.token_us,
                                float(frontend_us))
            if rejected:
                self.metrics.rejected(req.request_id)
        else:
            self.recorder.request(req, "arrive", t, frontend_us)
            if rejected:
                self.recorder.request(req, "rejected", t)
        if not rejected:
            self.scheduler.add_request(req)
        return not rejected

    def step(self, t: float) -> tuple[float, int]:
        out = self.scheduler.schedule()
        assert out.num_seqs, "a step with nothing scheduled: every request was checked to fit the pool"
        self._step_start = t
        t_end = self._run_step(out, t)
        res = self.scheduler.update_from_output(out)
        if self._step_ids is not None:  # the step's event was made at its start; what it sampled is known now
            res.sampled_into(*self._step_ids)
        self._finish_step(res, t_end)
        self._drain_frees(t_end)
        return t_end, len(res.finished)

    def finish(self, t: float) -> None:
        self._snapshot(t, 0.0, final=True)
        self.emit(PhaseEvent(t_us=t, phase="idle", detail="done"))

    # == one step ===================================================================================================
    def _run_step(self, out: SchedulerOutput, t: float) -> float:
        self._record_schedule(out, t)
        once_us = self._allocations(out, t)
        batch = out.batch()
        allocated = [s.num_new_tokens for s in out.allocated]  # the plain decodes' are 1 each: not listed
        total = len(out.decodes) + sum(allocated)
        decode = len(out.decodes) + allocated.count(1)
        prefill = total - decode
        kernels = self.plan.step_kernels(self.model, batch)
        layer_us = self.timing.launch(kernels, t, "prefill" if prefill else "decode", step=self.num_steps) - t
        outside_us = self._outside_us(self.plan.outside_layer_kernels(self.model, batch))
        model_scope_us = sum(self.timing.cost(k).time_us for k in [k for k in kernels if k.scope == "model"])
        model_us = self.model_step_us(layer_us, model_scope_us, outside_us, once_us)
        self._step_ids = None
        if self.recorder.keeps:
            cached = sum(s.num_cached_tokens for s in out.allocated) // self.page_size  # hits come with allocations
            self._step_ids = ids, sampled = out.request_ids(), [0] * len(batch)
            self.recorder.step(self.num_steps, t, layer_us, model_us, len(batch), prefill, decode, out.token_budget,
                               ids, out.tokens_per_seq(), cached if self.cache.prefix_caching else None, sampled)
        st = self.stats
        i, self.num_steps = self.num_steps, self.num_steps + 1
        st.max_step_tokens = max(st.max_step_tokens, total)
        st.max_step_seqs = max(st.max_step_seqs, len(batch))
        st.layer_us.append(layer_us)
        self._snapshot(t, workspace_bytes(self.model, total))
        if self.shadow is not None:  # the same batch at the scaled size
            err = self.shadow.record(out, t, i, "prefill" if prefill else "decode", self.emit, self.traffic)
            self.stats.max_rel_error = max(self.stats.max_rel_error, err)
        return t + model_us

    def _record_schedule(self, out: SchedulerOutput, t: float) -> None:
        """Preempted requests (their pages freed now) and admitted ones (their prefix hits)."""
        metrics = self.metrics
        for req in out.preempted:
            if metrics is not None:
                metrics.preempted(req.request_id)
            else:
                self.recorder.request(req, "preempted", t)
        self._drain_frees(t)
        if metrics is None:
            for req in out.admitted:
                self.recorder.request(req, "scheduled", t)

    def _allocations(self, out: SchedulerOutput, t: float) -> float:
        """New blocks drawn; migrations paid (once per model step): their time."""
        once_us = 0.0
        for s in out.allocated:
            a = s.allocation
            if a is None or not (a.new_blocks or a.migrations):
                continue
            for m in a.migrations:
                once_us += self._migration(m, t)
            if a.new_blocks and self.recorder.keeps:
                rid = s.request.request_id
                first = len(self.cache.req_to_blocks[rid]) - len(a.new_blocks)
                self.recorder.request_pages(t, rid, "prefill" if s.num_new_tokens > 1 else "decode", first,
                                            [int(b.bank) for b in a.new_blocks], [int(b.slot) for b in a.new_blocks])
        return once_us

    def _outside_us(self, outside: list[Kernel]) -> float:
        return memo_sum(self._outside_sums, outside, self.timing)

    def _migration(self, m: Migration, t: float) -> float:
        """A page moved to make room (bank-aware decode): its time."""
        c = self.migration_cost()
        start = self.timing.copy(c, t, "decode")
        self.stats.migrations += 1
        owner_id = int(m.owner[3:]) if m.owner.startswith("req") else None
        self.emit(PageMigrateEvent(t_us=start, owner=m.owner, logical=m.logical, from_bank=m.from_bank,
                                   from_slot=m.from_slot, to_bank=m.to_bank, to_slot=m.to_slot,
                                   bytes=2 * self.kv.page_bytes, dur_us=c.time_us, reason=m.reason,
                                   request_id=owner_id, instance=self.recorder.instance))
        return c.time_us

    def _finish_step(self, res: StepResult, t_end: float) -> None:
        if self.metrics is not None:  # every token sampled, the first included, is one of the token times
            for req in res.sampled:
                req.token_us.append(t_end)
            for req in res.finished:
                self.metrics.finished(req.request_id, float(t_end))
            return
        for req in res.first_token:
            self.recorder.request(req, "first_token", t_end)
        for req in res.finished:
            self.recorder.request(req, "finished", t_end)

    def _drain_frees(self, t: float) -> None:
        self.stats.cache_evictions += self.recorder.cache_frees(t, self.cache.drain_log(), self.kv.page_bytes)

    def _snapshot(self, t: float, activation: float, final: bool = False) -> None:
        total, used = self.hbm(activation)
        if not self.recorder.keeps:
            return  # no memory or bank events to draw: the summary needs only the peak
        kv, pool = self.kv, self.kv.pool
        # banks and the largest free run are redrawn when the tables changed, at most every BANKS_EVERY steps
        changed = self.cache.version != self._version_drawn and (
            final or self.num_steps - self._drawn_step >= BANKS_EVERY
        )
        if changed:
            self._drawn_step = self.num_steps
            self._run = pool.largest_free_run()
        self.recorder.memory(t, total, used, kv.used_pages * kv.page_bytes, self._run * kv.page_bytes, activation)
        if changed:
            self._version_drawn = self.cache.version
            self.recorder.banks(t, pool.used_per_bank(), pool.pages_per_bank)
