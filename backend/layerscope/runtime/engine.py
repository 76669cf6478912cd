"""Scenario -> typed, time-ordered event stream: the simulator's event loop.

    spec ─▶ ChunkScheduler ─▶ per chunk: pages (KVManager) ─▶ kernels (RuntimePlan) ─▶ times (CostModel)
         ─▶ per decode step: new page every page_size tokens, block-table walk, re-fetches, kernels, times
         ─▶ NumericShadow (scaled numpy layer on the same schedule, optional) ─▶ numerics, experts, CRCs
         ─▶ events, summary

The clock is one decoder layer's simulated time: kernels of the layer's chunk or step are laid on their
streams (compute serial; "copy" for migrations and re-fetches; "decode_fused" for the article's one-launch
pipeline). Whole-model figures are the layer's times x num_hidden_layers, plus costs paid once per model
step (migrations and re-fetches move whole-model pages; the article's first-step switch-over).
Same spec and seed -> the same events, byte for byte: all randomness comes from numpy Generators seeded
from spec.seed, and nothing depends on wall time.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from layerscope.events import (
    AllocFailEvent,
    BanksEvent,
    ChunkEvent,
    DecodeStepEvent,
    ExpertsEvent,
    FaultEvent,
    MemoryEvent,
    NumericsEvent,
    PageAllocEvent,
    PageMigrateEvent,
    PhaseEvent,
    SummaryEvent,
)
from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import gpu as gpu_preset
from layerscope.model.config import DTYPE_BYTES, PRESETS, ModelConfig
from layerscope.result import SimResult
from layerscope.runtime import actions
from layerscope.runtime.actions import PoolActions
from layerscope.runtime.blas import single_threaded_blas
from layerscope.runtime.chunks import ChunkDecision, ChunkScheduler, path_bw_scale
from layerscope.runtime.deployment import deployment_event, kv_pool_bytes, pool_workspace_bytes, scenario_placement
from layerscope.runtime.faults import FaultPlan, FaultState, stale_pages
from layerscope.runtime.gcpause import paused_gc
from layerscope.runtime.kernels import CostEnv, Kernel, KernelCost
from layerscope.runtime.kv.allocator import EVICTED, Migration
from layerscope.runtime.kv.eviction import HOST_LINK_BW, Eviction, Page
from layerscope.runtime.kv.hint import PageHint
from layerscope.runtime.kv.manager import FOREIGN, SEQ, KVManager
from layerscope.runtime.kv.walk import cross_bank_reads, walk_penalty
from layerscope.runtime.partial_eviction import PartialEviction
from layerscope.runtime.plan import workspace_bytes
from layerscope.runtime.routing import scenario_traffic
from layerscope.runtime.shadow import NumericShadow, ShadowResult
from layerscope.runtime.sharded import deployed, step_extras
from layerscope.runtime.summary import summarize
from layerscope.runtime.timing import COPY, Timing
from layerscope.runtime.validation import crc_pass
from layerscope.scenario import ActionSpec, ScenarioSpec

# A stale address-map entry: the kernel finds the wrong chunk epoch on the page, re-walks the page table and
# re-reads the page, serialized (assumed one HBM round trip plus a page-table walk, ~1 us).
STALE_RETRY_US = 1.0


Check = Callable[[int], None]  # called every few steps with the events made so far; raises to stop the run


def simulate(spec: ScenarioSpec, progress: Callable[[float], None] | None = None, check: Check | None = None,
             summary_only: bool = False) -> SimResult:
    """`check` (runtime.budget.RunBudget.check): the server's budget and cancel hook, over both runs' events.
    `summary_only`: a serving run (a workload) builds no events, only its summary (the same figures); the
    result's events are then its one summary event. A one-request run keeps its events either way."""
    # every matmul here is small (scaled layer, router): threads cost more than they save; the run's events are
    # long-lived and cycle-free, so the cyclic collector's passes only cost time
    with single_threaded_blas(), paused_gc():
        result = _run(spec, progress, check, summary_only)
        if spec.compare is not None:
            other = spec.with_overrides({**spec.compare.set, "compare": None, "tour": []})
            done = len(result.events)
            result.compare = _run(other, None, None if check is None else lambda n: check(done + n), summary_only)
    return result


def _run(spec: ScenarioSpec, progress: Callable[[float], None] | None, check: Check | None = None,
         summary_only: bool = False) -> SimResult:
    """A workload goes through the serving engine; the one-request shorthand through the single-request loop."""
    if spec.workload is None:
        return _Engine(spec, progress, check).run()
    from layerscope.runtime.serving import ServingEngine

    events, summary = ServingEngine(spec, progress, check, summary_only).run()
    plan, model = deployed(spec)
    topology = plan.topology(model, CostModel(gpu_preset(spec.gpu)))
    return SimResult(spec=spec, events=events, topology=topology, summary=summary, clock="model")


@dataclass
class _Stats:
    """What the summary is computed from (collected while the events are made)."""

    chunk_sizes: list[int] = field(default_factory=list)
    prefill_layer_us: float = 0.0
    prefill_costs: list[KernelCost] = field(default_factory=list)
    decode_costs: list[KernelCost] = field(default_factory=list)
    step_latency_us: list[float] = field(default_factory=list)
    step_model_us: list[float] = field(default_factory=list)
    step_jitter_us: list[float] = field(default_factory=list)
    first_step_us: float = 0.0
    switch_over_us: float = 0.0
    migrations: int = 0
    migrated_bytes: float = 0.0
    evictions: int = 0
    refetched_pages: int = 0
    partial_evictions: int = 0
    repaired_pages: int = 0
    alloc_failures: int = 0
    compactions: int = 0
    over_sla: int = 0
    cross_bank_reads: int = 0
    crc_bad_banks: set[int] = field(default_factory=set)
    max_rel_error: float = 0.0
    nan_detected: bool = False
    peak_used_bytes: float = 0.0
    hint_pages: int = 0
    attention_launches: int = 0


class _Engine:
    def __init__(
        self, spec: ScenarioSpec, progress: Callable[[float], None] | None, check: Check | None = None
    ) -> None:
        self.spec = spec
        self.progress = progress
        self.check = check
        self.gpu = gpu_preset(spec.gpu)
        self.cost_model = CostModel(self.gpu)
        # With a deployment the engine simulates one GPU of the group: its shard, its collectives, its KV pool.
        self.full_model = PRESETS[spec.model]
        self.placement = scenario_placement(spec)
        self.plan, self.model = deployed(spec)
        self.traffic = scenario_traffic(spec, PRESETS[spec.model])  # the routing the MoE runs with
        self.rng = np.random.default_rng(spec.seed)
        self.page_size = spec.effective_page_size
        self.free_start = kv_pool_bytes(spec, self.placement)
        self.kv = KVManager(
            self.model,
            self.page_size,
            spec.banks,
            spec.allocator,
            self.free_start,
            pool_workspace_bytes(spec, self.placement, self._workspace(max(spec.chunk_size, spec.low_mem_chunk_size))),
        )
        self.faults = FaultPlan(spec.faults, spec.decode_steps)
        self.shadow = (
            NumericShadow(spec.numerics_model, spec.runtime == "article", spec.banks, spec.prompt_len, spec.seed)
            if spec.numerics
            else None
        )
        self.router = _ScaledRouter(spec.numerics_model, spec.seed) if self.model.is_moe else None
        self.events: list[Any] = []
        self.stats = _Stats()
        self.t = 0.0
        self.stale: dict[int, int] = {}  # decode address map corruption: logical -> logical whose slot it reads
        self._chunk_pages: list[range] = []  # full-size logical pages each prefill chunk wrote
        self._walk_cache: tuple[int, int, list[tuple[int, int]]] | None = None  # (version, breaks, table walked)
        self._run_cache: tuple[int, int] = (-1, 0)  # (version, largest free run)
        self.timing = Timing(self.cost_model, self._emit)
        # the parts this loop joins (each emits its own events and hands back plain data)
        path = path_bw_scale(spec.memory_path_contention)  # host-path contention slows the re-fetch link
        self.eviction = Eviction(self.kv, self.timing, self._emit, HOST_LINK_BW * path / self.gpu.hbm_bw,
                                 self.model.num_hidden_layers)
        self.partial = PartialEviction(self.kv, self._emit)
        self.pool_actions = PoolActions(self.kv, self._emit)
        self.hint = PageHint(self.kv, spec.prompt_len, spec.decode_steps, self.page_size)
        self._embedding_hit_rate = embedding_hit_rate(self.model, self.gpu.l2_bytes)
        self._version = 0  # bumps whenever a block table changes
        self._work_total = max(1, -(-spec.prompt_len // max(16, spec.low_mem_chunk_size)) + spec.decode_steps)
        self._work_done = 0

    # == the loop ===============================================================================
    def run(self) -> SimResult:
        spec = self.spec
        if self.placement is not None:
            self._emit(deployment_event(spec, self.placement))
        self._emit(PhaseEvent(t_us=0.0, phase="prefill", detail=f"{spec.prompt_len} tokens, {spec.runtime} runtime"))
        self._setup_pool()
        self._prefill()
        if spec.decode_steps:
            self._emit(PhaseEvent(t_us=self.t, phase="decode", detail=f"{spec.decode_steps} steps"))
            self._decode()
        self._emit(PhaseEvent(t_us=self.t, phase="validate", detail="end-of-run validation pass"))
        self._validate()
        self._emit(PhaseEvent(t_us=self.t, phase="idle", detail="done"))
        summary = summarize(self)
        self._emit(SummaryEvent(t_us=self.t, figures=summary))
        events = sorted(self.events, key=lambda e: e.t_us)  # stable: emission order breaks ties
        topology = self.plan.topology(self.model, self.cost_model)
        return SimResult(spec=spec, events=events, topology=topology, summary=summary, clock="layer")

    def _emit(self, event: Any) -> None:
        self.events.append(event)

    def _tick(self) -> None:
        self._work_done += 1
        if self.progress is not None and self._work_done % 16 == 0:
            self.progress(min(1.0, self._work_done / self._work_total))
        if self.check is not None and self._work_done % 16 == 0:
            self.check(len(self.events))

    # == setup ===================================================================================
    def _setup_pool(self) -> None:
        spec = self.spec
        if spec.fragmentation > 0:
            banks, slots = self.kv.fill_tenants(spec.fragmentation, self.rng)
            self._emit(PageAllocEvent(t_us=0.0, owner="tenant", phase="prefill", logical=list(range(len(banks))),
                                      banks=banks.tolist(), slots=slots.tolist()))
        if spec.decode_page_hint and spec.decode_steps:
            self._reserve_hint()
        self._snapshot(activation=0.0, banks=True)

    def _reserve_hint(self) -> None:
        hint = self.hint.reserve()
        if hint is None:
            n = self.hint.size
            self._alloc_fail(SEQ, n, True, f"no run of {n} adjacent free pages in one bank for decode_page_hint")
            return
        if not hint:
            return
        self.stats.hint_pages = len(hint)
        self._emit(PageAllocEvent(t_us=self.t, owner="hint", phase="prefill", logical=list(range(len(hint))),
                                  banks=[b for b, _ in hint], slots=[s for _, s in hint]))

    # == prefill ==================================================================================
    def _prefill(self) -> None:
        spec = self.spec
        disabled_from = self.faults.scheduler_disabled_from()
        sched = ChunkScheduler(spec.chunk_size, spec.low_mem_chunk_size, spec.low_mem_threshold_gib, self.page_size)
        chunk_plan = ChunkScheduler(spec.chunk_size, spec.low_mem_chunk_size, spec.low_mem_threshold_gib,
                                    self.page_size).plan(spec.prompt_len, self._free_bytes())
        start, index = 0, 0
        t0 = self.t
        while start < spec.prompt_len:
            sched.disabled = disabled_from is not None and index >= disabled_from
            decision = sched.next_chunk(index, start, spec.prompt_len, self._free_bytes())
            self._run_chunk(decision, len(chunk_plan))
            start, index = decision.token_end, index + 1
            self._tick()
        self.stats.prefill_layer_us = self.t - t0

    def _run_chunk(self, d: ChunkDecision, num_chunks: int) -> None:
        c, t_start = d.index, self.t
        self.stats.chunk_sizes.append(d.num_tokens)
        for state in self.faults.states:
            if not state.after_barrier and state.strikes_at_chunk(c, num_chunks):
                self._inject(state, chunk=c)
        self._actions(chunk=c, pressure=False)
        first_page = d.token_start // self.page_size
        need = (d.token_end - 1) // self.page_size + 1 - len(self.kv.allocator.table(SEQ))
        self._allocate(need, "prefill", chunk=c)
        stolen = self.faults.stolen_bandwidth("prefill", c, self.rng)
        ws = self._workspace(d.num_tokens)
        scale = 1.0 - stolen  # memory_path_contention slows host-path traffic only (_refetch), not HBM
        kernels = self.plan.step_kernels(self.model, [(d.num_tokens, d.token_start)])
        self.stats.attention_launches += sum(1 for k in kernels if k.stage == "attention" and k.kind == "attention")
        end = self._launch(kernels, "prefill", lambda k: CostEnv(hbm_bw_scale=scale), chunk=c)
        if stolen > 0:  # what the chunk would have taken with its bandwidth: the thief shows as the difference
            path = scale / (1.0 - stolen)
            expected = sum(self._cost(k, CostEnv(hbm_bw_scale=path)).time_us for k in kernels)
            self._detect_slow_chunk(c, end - t_start, expected)
        logical = range(d.token_start // self.page_size, (d.token_end - 1) // self.page_size + 1)
        self._chunk_pages.append(logical)
        self.kv.record_writes(logical, remapped=d.remapped, chunk_first_page=first_page,
                              continues=d.token_start % self.page_size != 0)
        self._emit(ChunkEvent(t_us=t_start, chunk=c, token_start=d.token_start, token_end=d.token_end,
                              chunk_size=d.chunk_size, reason=d.reason, pages=list(d.pages), barrier_us=end))
        self.t = end
        self._snapshot(activation=ws, banks=True, at=t_start)
        r = self.shadow.prefill_chunk(d.num_tokens, skip_remap=not d.remapped) if self.shadow is not None else None
        self._experts("prefill", d.num_tokens, chunk=c, at=t_start, counts=r.expert_counts if r else None)
        if r is not None:
            self._numerics(r, "prefill", chunk=c)
        self.partial.in_flight(logical)  # KV written, barrier not yet passed: pressure strikes here
        self._actions(chunk=c, pressure=True)
        self._barrier(c)
        for state in self.faults.states:
            if state.after_barrier and state.strikes_at_chunk(c, num_chunks):
                self._inject(state, chunk=c, chunk_pages=list(logical))

    def _barrier(self, c: int) -> None:
        """The chunk's barrier publishes its address remap; pages evicted while it was in flight are partially
        evicted (runtime/partial_eviction.py)."""
        lost = self.partial.barrier()
        if not lost:
            return
        self._version += 1
        self.stats.partial_evictions += len(lost)
        if self.shadow is not None:  # the tenant's writes land on the scaled pages of the same logical pages
            written = [p for p, b, s in lost if self.kv.content[b, s] == FOREIGN]
            self.shadow.overwrite_pages(self._scaled_pages(written))
        self.partial.injected(lost, c, self.t)

    def _scaled_pages(self, pages: list[int]) -> list[int]:
        """The scaled run's pages holding the same tokens as these full-size prefill pages."""
        assert self.shadow is not None
        out: set[int] = set()
        for p in pages:
            c = next((i for i, full in enumerate(self._chunk_pages) if p in full), None)
            if c is None or c >= len(self.shadow.chunk_pages):
                continue  # not a prefill page: nothing of it in the scaled run's chunks
            full, scaled = self._chunk_pages[c], self.shadow.chunk_pages[c]
            i = p - full.start
            lo = scaled.start + i * len(scaled) // len(full)
            hi = max(lo + 1, scaled.start + (i + 1) * len(scaled) // len(full))
            out.update(range(lo, min(hi, scaled.stop)))
        return sorted(out)

    # == decode ===================================================================================
    def _decode(self) -> None:
        spec = self.spec
        running: list[float] = []  # sorted model latencies so far (running median)
        for i in range(spec.decode_steps):
            t_start = self.t
            context = spec.prompt_len + i  # tokens cached before this step's token
            for state in self.faults.states:
                if state.strikes_at_step(i):
                    self._inject(state, step=i)
            self._actions(step=i)
            new_page = context % self.page_size == 0
            migrations = self._allocate(1, "decode", step=i) if new_page else []
            if new_page:
                self.kv.record_writes([context // self.page_size])
            refetched, refetch_us = self._refetch(i)
            once_us = refetch_us + sum(self._migration_cost().time_us for _ in migrations)
            breaks = self._breaks()
            extra_bytes, extra_us = walk_penalty(breaks)
            if self.stale:  # a stale entry fails the page's chunk-epoch check: a serialized re-translation + re-read
                extra_bytes += len(self.stale) * self.kv.page_bytes_layer
                extra_us += len(self.stale) * STALE_RETRY_US
            stolen = self.faults.stolen_bandwidth("decode", i, self.rng)
            kernels = self.plan.step_kernels(self.model, [(1, context)])
            reader = _kv_reader(kernels)
            switch = self.plan.switch_over(self.model) if i == 0 else []

            row_hit = i > 0 and self.rng.random() < self._embedding_hit_rate  # this token's row is L2-resident?
            env = _env_for(reader, CostEnv(1.0 - stolen, i > 0), CostEnv(1.0 - stolen, i > 0, extra_bytes, extra_us),
                           CostEnv(1.0 - stolen, row_hit))
            self.t = max(self.t, self.timing.stream_free(COPY))
            start = self.t
            stage_us: dict[str, float] = {}
            end = self._launch(switch + kernels, "decode", env, step=i, stages=stage_us)
            switch_us = stage_us.pop("switch_over", 0.0)
            layer_us = end - start
            # whole-model kernels (embedding lookup, switch-over) are paid once per step, the rest once per layer
            model_scope_us = sum(self._cost(k, env(k)).time_us for k in switch + kernels if k.scope == "model")
            model_us = (layer_us - model_scope_us) * self.model.num_hidden_layers + model_scope_us + once_us
            model_us += self._outside_layers_us(1, 1)
            median = running[len(running) // 2] if running else model_us
            jitter = abs(model_us - median)
            if i > 0:  # step 0 carries the switch-over: a known outlier, kept out of the median
                bisect.insort(running, model_us)
            over = model_us > spec.sla_ms * 1000.0
            self._record_step(i, layer_us, model_us, jitter, over, switch_us, breaks, refetched)
            self._emit(DecodeStepEvent.model_validate(dict(
                t_us=t_start, kind="decode_step", step=i, context_len=context + 1, latency_us=layer_us,
                model_latency_us=model_us, sla_us=spec.sla_ms * 1000.0, jitter_us=jitter, over_sla=over,
                stage_us=stage_us, cross_bank_reads=breaks, refetched_pages=refetched)))
            self._detect_jitter(i, model_us, median)
            self.t = end
            self._snapshot(activation=self._workspace(1), banks=new_page or bool(migrations), at=t_start)
            r = self.shadow.decode_step() if self.shadow is not None else None
            self._experts("decode", 1, step=i, at=t_start, counts=r.expert_counts if r else None)
            if r is not None:
                self._numerics(r, "decode", step=i)
            self._tick()

    def _outside_layers_us(self, tokens: int, seqs: int) -> float:
        """What a step pays once outside the layers (embedding, lm_head, sampling, host time): deployments only,
        so scenarios without one keep their figures."""
        if self.spec.deployment is None:
            return 0.0
        extras = step_extras(self.full_model, self.model, self.spec.deployment, self.gpu, tokens, seqs)
        return sum(self._cost(k, CostEnv()).time_us for k in extras.kernels) + extras.host_us

    def _record_step(self, i: int, layer_us: float, model_us: float, jitter: float, over: bool, switch_us: float,
                     breaks: int, refetched: int) -> None:
        s = self.stats
        if i == 0:
            s.first_step_us = layer_us
            s.switch_over_us = switch_us
        s.step_latency_us.append(layer_us)
        s.step_model_us.append(model_us)
        s.step_jitter_us.append(jitter)
        s.over_sla += int(over)
        s.cross_bank_reads = breaks

    def _detect_slow_chunk(self, chunk: int, took_us: float, expected_us: float) -> None:
        for state in self.faults.states:
            if state.watching and (msg := state.on_chunk(chunk, took_us, expected_us)):
                self._detected(state, msg, chunk=chunk)

    def _detect_jitter(self, step: int, model_us: float, median: float) -> None:
        for state in self.faults.states:
            if state.watching and (msg := state.on_step(step, model_us, median)):
                self._detected(state, msg, step=step)

    # == pages ====================================================================================
    def _allocate(self, n: int, phase: str, chunk: int | None = None, step: int | None = None) -> list[Migration]:
        if n <= 0:
            return []
        alloc = self.kv.allocator
        grant = alloc.allocate(SEQ, n, phase)  # type: ignore[arg-type]
        if grant is None:
            self._alloc_fail(SEQ, n, False, "the pool has no free page: evicting the oldest pages")
            self._evict(n - self.kv.pool.num_free)
            grant = alloc.allocate(SEQ, n, phase)  # type: ignore[arg-type]
            if grant is None and n > self.kv.pool.num_pages:
                raise ValueError(f"the KV pool ({self.kv.pool.num_pages} pages) cannot hold {n} more pages "
                                 f"even when empty: raise free_hbm_gib or page_size, or lower chunk_size")
            if grant is None:  # others hold the pool: the new pages live in host memory, re-fetched every step
                logical = alloc.spill(SEQ, n)
                self._alloc_fail(SEQ, n, False, f"nothing left to evict: pages {logical} spill to host memory")
                return []
        self._version += 1
        for m in grant.migrations:
            self._emit_migration(m)
        self._emit(PageAllocEvent(t_us=self.t, owner=SEQ, phase=phase, logical=grant.logical,  # type: ignore[arg-type]
                                  banks=grant.banks, slots=grant.slots))
        return grant.migrations

    def _alloc_fail(self, owner: str, n: int, contiguous: bool, reason: str) -> None:
        self.stats.alloc_failures += 1
        pool = self.kv.pool
        self._emit(AllocFailEvent(t_us=self.t, owner=owner, pages_wanted=n, contiguous=contiguous,
                                  free_pages=pool.num_free, largest_free_run=pool.largest_free_run(),
                                  reason=f"{reason} ({pool.num_free} pages free)"))

    def _migration_cost(self) -> KernelCost:
        k = Kernel("kv_page_migrate", "kv_migrate", "memory", 0.0, 2 * self.kv.page_bytes, stream=COPY,
                   shapes=f"1 page x {self.model.num_hidden_layers} layers (read + write)", scope="model")
        return self._cost(k, CostEnv())

    def _emit_migration(self, m: Migration) -> None:
        c = self._migration_cost()
        start = self.timing.copy(c, self.t, "decode" if m.reason == "make_room" else "idle")
        self.kv.moved(m.from_bank, m.from_slot, m.to_bank, m.to_slot)
        self.stats.migrations += 1
        self.stats.migrated_bytes += 2 * self.kv.page_bytes
        self._emit(PageMigrateEvent(t_us=start, owner=m.owner, logical=m.logical, from_bank=m.from_bank,
                                    from_slot=m.from_slot, to_bank=m.to_bank, to_slot=m.to_slot,
                                    bytes=2 * self.kv.page_bytes, dur_us=c.time_us, reason=m.reason))

    def _evict(self, n: int) -> list[Page]:
        out = self.eviction.evict(n, self.t)
        if out:
            self.partial.evicted(out)
            self._version += 1
            self.stats.evictions += len(out)
        return out

    def _refetch(self, step: int | None) -> tuple[int, float]:
        r = self.eviction.refetch(self.t, step)
        if r.restored:
            self._version += 1
        self.stats.refetched_pages += r.pages
        return r.pages, r.time_us

    def decode_map(self) -> list[tuple[int, int]]:
        """The address map decode reads through: the block table, with stale entries if that fault struck."""
        table = list(self.kv.allocator.table(SEQ))
        for p, src in self.stale.items():
            if p < len(table) and src < len(table) and table[src][0] != EVICTED:
                table[p] = table[src]
        return table

    def _breaks(self) -> int:
        cached = self._walk_cache
        if cached is not None and cached[0] == self._version:
            return cached[1]
        table = self.decode_map() if self.stale else self.kv.allocator.table(SEQ)
        walked = cached[2] if cached is not None and not self.stale else None
        if walked is not None and len(table) > len(walked) and table[: len(walked)] == walked:
            # the table only grew at its end (a decode's new page): the walk so far, then on through the new pages
            last = next((p for p in reversed(walked) if p[0] >= 0), None)
            tail = ([last] if last is not None else []) + table[len(walked) :]
            breaks = cached[1] + _walk_breaks(tail, self.spec.banks)
        else:
            breaks = _walk_breaks(table, self.spec.banks)
        self._walk_cache = (self._version, breaks, list(table))
        return breaks

    # == actions ==================================================================================
    def _actions(self, chunk: int | None = None, step: int | None = None, pressure: bool | None = None) -> None:
        """Actions due now (runtime/actions.py)."""
        for a in actions.due(self.spec.actions, chunk, step, pressure):
            self._action(a, step)

    def _action(self, a: ActionSpec, step: int | None) -> None:
        if a.do == "compact":
            self._compact()
        elif a.do == "pressure":
            self._pressure(a.amount_gib, step)
        elif a.do == "release":
            self.pool_actions.release(a.amount_gib, self.t)
            self._snapshot(activation=0.0, banks=True)
        else:
            self._validate(in_decode=step is not None)

    def _compact(self) -> None:
        """Compact the bank with the most free pages; a waiting hint reservation gets its room there first."""
        self.stats.compactions += 1
        for m in self.pool_actions.compact(self.hint.room()):
            self._emit_migration(m)
        self._version += 1
        self.t = max(self.t, self.timing.stream_free(COPY))
        if self.hint.pending:
            self._reserve_hint()
        self._snapshot(activation=0.0, banks=True)

    def _pressure(self, gib: float, step: int | None) -> None:
        """Another tenant takes `gib` of HBM: free pages first, then the sequence's oldest pages are evicted."""
        short = self.pool_actions.shortfall(gib)
        if short:
            self._evict(short)
        self.pool_actions.pressure(gib, self.t, in_decode=step is not None)
        self._snapshot(activation=0.0, banks=True)

    # == validation ===============================================================================
    def _validate(self, in_decode: bool = False) -> None:
        events, bad = crc_pass(self.kv, self.decode_map(), self.shadow, self.t)
        for e in events:
            self._emit(e)
        self.stats.crc_bad_banks |= set(bad)
        rebuilt = False
        for state in self.faults.states:
            if state.watching and (msg := state.on_validate(bad, self.shadow is not None)):
                self._detected(state, msg, banks=bad if bad and state.spec.kind != "ecc_bitflips" else None)
        for state in self.faults.of("stale_chunk_metadata"):
            if state.detected and self.stale:
                self.stale, rebuilt = {}, True
                self._version += 1
                self._emit(FaultEvent(t_us=self.t, fault=state.spec.kind, action="recovered",
                                      detail="address map rebuilt from the page pool's records"))
        self._repair(None if rebuilt else bad, in_decode)

    def _repair(self, bad: list[int] | None, in_decode: bool) -> None:
        """Partially evicted pages the pass found (every entry after a full rebuild: bad=None) are invalidated,
        so they are re-fetched from host memory (now, or in this decode step's re-fetch)."""
        damaged = self.partial.damaged(bad)
        if not damaged:
            return
        banks = self.partial.detected(damaged, self.t)
        self.partial.repair(damaged)
        self._version += 1
        self.stats.repaired_pages += len(damaged)
        if self.shadow is not None:
            self.shadow.restore_pages(self._scaled_pages(damaged))
        if not in_decode:
            self._refetch(None)
        self.partial.recovered(damaged, banks, self.t)

    # == faults ===================================================================================
    def _inject(self, state: FaultState, chunk: int | None = None, step: int | None = None,
                chunk_pages: list[int] | None = None) -> None:
        state.injected, state.chunk, state.step = True, chunk, step
        detail = state.on_inject(self, chunk, step, chunk_pages or [])
        self._emit(FaultEvent(t_us=self.t, fault=state.spec.kind, action="injected", detail=detail,
                              banks=state.banks, step=step, chunk=chunk))

    # FaultTarget: what a fault may do to this run
    def stale_map(self, chunk_pages: list[int], count: int) -> tuple[int, list[int]]:
        table = self.kv.allocator.table(SEQ)
        self.stale.update(stale_pages(chunk_pages, len(chunk_pages), count, len(table)))
        self._version += 1
        if self.shadow is not None:
            self.shadow.corrupt_map(self.shadow.scaled_tokens(self.stats.chunk_sizes[-1]) // self.shadow.page, count)
        return len(self.stale), sorted({table[src][0] for src in self.stale.values() if table[src][0] != EVICTED})

    def flip_weights(self, count: int, rate: float) -> int:
        return count if self.shadow is None else self.shadow.flip_weights(count, rate, self.rng)

    def _detected(self, state: FaultState, detail: str, banks: list[int] | None = None,
                  step: int | None = None, chunk: int | None = None) -> None:
        state.detected = True
        self._emit(FaultEvent(t_us=self.t, fault=state.spec.kind, action="detected", detail=detail,
                              banks=banks or state.banks, step=step, chunk=chunk))

    # == numerics and experts =======================================================================
    def _numerics(self, r: ShadowResult, phase: str, chunk: int | None = None, step: int | None = None) -> None:
        assert self.shadow is not None
        self._emit(NumericsEvent(t_us=self.t, phase=phase, scaled_model=self.shadow.name,  # type: ignore[arg-type]
                                 tokens=r.tokens, rel_error=r.rel_error, max_abs_error=r.max_abs_error,
                                 nan_count=r.nan_count, inf_count=r.inf_count, step=step, chunk=chunk))
        s = self.stats
        s.max_rel_error = max(s.max_rel_error, r.rel_error)
        nonfinite = r.nan_count + r.inf_count > 0
        s.nan_detected |= nonfinite
        for state in self.faults.states:
            if state.watching and (msg := state.on_numerics(r)):
                self._detected(state, msg, step=step, chunk=chunk)

    def _experts(self, phase: str, full_tokens: int, at: float, chunk: int | None = None,
                 step: int | None = None, counts: list[int] | None = None) -> None:
        if self.router is None:
            return
        if counts is None:  # numerics off: the scaled router alone on as many scaled tokens
            counts = self.router.counts(min(full_tokens, 256) if phase == "prefill" else 1)
        if self.traffic is None:  # a dense model has no experts to count
            return
        self._emit(ExpertsEvent(t_us=at, phase=phase, step=step, chunk=chunk,  # type: ignore[arg-type]
                                scaled_model=self.spec.numerics_model, counts=counts,
                                distinct_full=self.traffic.distinct(full_tokens),
                                assumed=self.traffic.routing.assumed))  # type: ignore[arg-type]

    # == time and memory ============================================================================
    def _cost(self, k: Kernel, env: CostEnv) -> KernelCost:
        return self.timing.cost(k, env)

    def _launch(self, kernels: list[Kernel], phase: str, env: Callable[[Kernel], CostEnv],
                chunk: int | None = None, step: int | None = None, stages: dict[str, float] | None = None) -> float:
        costs = self.stats.prefill_costs if phase == "prefill" else self.stats.decode_costs
        return self.timing.launch(kernels, self.t, phase, env, chunk, step, stages, costs)

    def _workspace(self, tokens: int) -> float:
        return workspace_bytes(self.model, tokens)

    def _free_bytes(self) -> float:
        return self.free_start - self.kv.used_pages * self.kv.page_bytes

    def _snapshot(self, activation: float, banks: bool, at: float | None = None) -> None:
        t = self.t if at is None else at
        kv, pool = self.kv, self.kv.pool
        total = self.placement.capacity_bytes if self.placement is not None else self.gpu.hbm_bytes
        used = total - self.free_start + kv.used_pages * kv.page_bytes + activation
        self.stats.peak_used_bytes = max(self.stats.peak_used_bytes, used)
        if banks or self._run_cache[0] != self._version:
            self._run_cache = (self._version, pool.largest_free_run())
        self._emit(MemoryEvent.model_validate(dict(
            t_us=t, kind="memory", hbm_total_bytes=total, hbm_used_bytes=used, hbm_free_bytes=total - used,
            kv_bytes=kv.owned_pages(SEQ) * kv.page_bytes, largest_free_run_bytes=self._run_cache[1] * kv.page_bytes,
            activation_bytes=activation)))
        if banks:
            hints = kv.allocator.hints.get(SEQ, [])
            reserved = np.bincount(np.array([b for b, _ in hints], dtype=np.int64), minlength=pool.banks)
            self._emit(BanksEvent(t_us=t, used=pool.used_per_bank(), capacity=pool.pages_per_bank,
                                  reserved=reserved.tolist() if hints else []))


def _env_for(reader: Kernel | None, plain: CostEnv, walking: CostEnv, lookup: CostEnv) -> Callable[[Kernel], CostEnv]:
    """The kernel that walks the block table pays the walk's extra bytes and latency; the embedding lookup hits
    or misses L2 with this step's token; the others see the plain conditions."""
    return lambda k: walking if k is reader else lookup if k.stage == "embedding" else plain


def embedding_hit_rate(model: ModelConfig, l2_bytes: float) -> float:
    """Share of decode tokens whose embedding row sits in L2, when rows in popularity order fill half of L2.

    Token frequencies are assumed Zipf (s = 1): the top n of V rows cover H(n) / H(V) of tokens,
    H(n) ~ ln n + 0.5772. Half of L2 is assumed left to embedding rows (the rest holds weights in flight)."""
    row = model.hidden_size * DTYPE_BYTES[model.embedding_dtype]
    rows = max(1, min(model.vocab_size, int(0.5 * l2_bytes / row)))
    return (math.log(rows) + 0.5772) / (math.log(model.vocab_size) + 0.5772)


def _kv_reader(kernels: list[Kernel]) -> Kernel | None:
    """The decode kernel that walks the block table (the article fetches K/V in its Q-projection stage)."""
    for k in kernels:
        if "kv_fetch" in k.name:
            return k
    for k in kernels:
        if k.kind == "attention":
            return k
    return None


class _ScaledRouter:
    """The scaled model's router alone (seeded gate weights, N(0, 1/H) like Layer.random), for expert counts
    when numerics are off: cheap enough for every chunk and step."""

    def __init__(self, model_name: str, seed: int) -> None:
        c = PRESETS[model_name]
        rng = np.random.default_rng(seed + 104_729)
        self.k = c.num_experts_per_tok
        self.gate = rng.standard_normal((c.num_experts, c.hidden_size), dtype=np.float32) / np.sqrt(c.hidden_size)
        self.rng = rng

    def counts(self, tokens: int) -> list[int]:
        x = self.rng.standard_normal((tokens, self.gate.shape[1]), dtype=np.float32)  # (T, H)
        logits = x @ self.gate.T  # (T, E)
        top = np.argpartition(-logits, self.k - 1, axis=-1)[:, : self.k]  # (T, k)
        return np.bincount(top.reshape(-1), minlength=self.gate.shape[0]).tolist()


def _walk_breaks(table: list[tuple[int, int]], num_banks: int) -> int:
    """cross_bank_reads along a block table of (bank, slot) pairs."""
    flat = np.fromiter(itertools.chain.from_iterable(table), dtype=np.int64, count=2 * len(table))
    return cross_bank_reads(flat[0::2], flat[1::2], num_banks)
