"""The one-request step policy: one request through one instance, its prompt in chunks, then decode step by step.

    SingleRequestScheduler (chunks.py) ─▶ a prefill chunk: pages (KVManager) ─▶ kernels ─▶ times ─▶ barrier
                                       ─▶ a decode step: a new page every page_size tokens, block-table walk,
                                          re-fetches, kernels, times
    RequestHooks (request_hooks.py): faults, actions, partial eviction and validation at each chunk's and step's edges
    NumericShadow (scaled numpy layer on the same schedule, optional) ─▶ numerics, experts, CRCs

The clock is one decoder layer's simulated time ("layer"): kernels of the layer's chunk or step are laid on their
streams (compute serial; "copy" for migrations and re-fetches; "decode_fused" for the article's one-launch
pipeline). Whole-model figures are the layer's times x num_hidden_layers, plus costs paid once per model step
(Instance.model_step_us: migrations and re-fetches move whole-model pages; the article's first-step switch-over).
Same spec and seed -> the same events, byte for byte: all randomness comes from numpy Generators seeded from
spec.seed, and nothing depends on wall time.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable

import numpy as np

from layerscope.events import ChunkEvent, DecodeStepEvent, PageAllocEvent, PhaseEvent
from layerscope.hardware.kernel import CostEnv, Kernel
from layerscope.model.config import DTYPE_BYTES, ModelConfig
from layerscope.runtime.chunks import ChunkDecision, ChunkScheduler, SingleRequestScheduler, path_bw_scale
from layerscope.runtime.deployment import deployment_event
from layerscope.runtime.instance import Instance
from layerscope.runtime.kv.eviction import HOST_LINK_BW, Eviction
from layerscope.runtime.kv.manager import SEQ
from layerscope.runtime.kv.walk import walk_penalty
from layerscope.runtime.partial_eviction import PartialEviction
from layerscope.runtime.plan import workspace_bytes
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.request import Request
from layerscope.runtime.request_hooks import RequestHooks
from layerscope.runtime.request_pages import RequestPages
from layerscope.runtime.request_state import RequestState
from layerscope.runtime.shadow import NumericShadow, ScaledRouter
from layerscope.runtime.sharded import step_extras
from layerscope.runtime.timing import COPY
from layerscope.scenario import ScenarioSpec

# A stale address-map entry: the kernel finds the wrong chunk epoch on the page, re-walks the page table and
# re-reads the page, serialized (assumed one HBM round trip plus a page-table walk, ~1 us).
STALE_RETRY_US = 1.0


class RequestInstance(Instance):
    clock = "layer"

    def __init__(self, spec: ScenarioSpec, recorder: Recorder) -> None:
        super().__init__(spec, recorder, max(spec.chunk_size, spec.low_mem_chunk_size))
        self.rng = np.random.default_rng(spec.seed)
        self.state = st = RequestState()
        self.stats = st.stats
        self.shadow = (NumericShadow(spec.numerics_model, spec.runtime == "article", spec.banks, spec.prompt_len,
                                     spec.seed) if spec.numerics else None)
        path = path_bw_scale(spec.memory_path_contention)  # host-path contention slows the re-fetch link
        eviction = Eviction(self.kv, self.timing, self.emit, HOST_LINK_BW * path / self.gpu.hbm_bw,
                            self.model.num_hidden_layers)
        self.pages = RequestPages(st, self.kv, self.timing, recorder, eviction, PartialEviction(self.kv, self.emit),
                                  self.migration_cost, self.hbm, spec.banks)
        router = ScaledRouter(spec.numerics_model, spec.seed) if self.model.is_moe else None
        self.hooks = RequestHooks(spec, st, self.kv, self.pages, self.timing, self.emit, self.shadow, self.traffic,
                                  router, self.rng)
        self.faults = self.hooks.faults
        self.request = Request(0, 0.0, spec.prompt_len, spec.decode_steps + 1, np.zeros(0, dtype=np.int32))
        chunks = ChunkScheduler(spec.chunk_size, spec.low_mem_chunk_size, spec.low_mem_threshold_gib, self.page_size)
        self.scheduler = SingleRequestScheduler(chunks, self.free_bytes, self.faults.scheduler_disabled_from())
        self.scheduler.add_request(self.request)
        self._num_chunks = 0  # the prompt's chunks at the free HBM when prefill starts (faults strike by it)
        self._embedding_hit_rate = embedding_hit_rate(self.model, self.gpu.l2_bytes)
        self._work_total = max(1, -(-spec.prompt_len // max(16, spec.low_mem_chunk_size)) + spec.decode_steps)
        self._latencies: list[float] = []  # sorted model step latencies so far (running median)

    # == what the loop asks =========================================================================
    def start(self) -> None:
        spec = self.spec
        if self.placement is not None:
            self.emit(deployment_event(spec, self.placement))
        self.emit(PhaseEvent(t_us=0.0, phase="prefill", detail=f"{spec.prompt_len} tokens, {spec.runtime} runtime"))
        if spec.fragmentation > 0:
            banks, slots = self.kv.fill_tenants(spec.fragmentation, self.rng)
            self.emit(PageAllocEvent(t_us=0.0, owner="tenant", phase="prefill", logical=list(range(len(banks))),
                                     banks=banks.tolist(), slots=slots.tolist()))
        if spec.decode_page_hint and spec.decode_steps:
            self.hooks.reserve_hint()
        self.pages.snapshot(activation=0.0, banks=True)
        self._num_chunks = len(self.scheduler.chunks.plan(spec.prompt_len, self.free_bytes()))

    def has_work(self) -> bool:
        return self.scheduler.has_unfinished()

    def num_unfinished(self) -> int:
        return self.scheduler.num_unfinished()

    def progress(self) -> float:
        return self.num_steps / self._work_total

    def step(self, t: float) -> tuple[float, int]:
        assert t == self.state.t, "the loop steps the instance from where its last step ended (its own clock)"
        out = self.scheduler.schedule()
        d = self.scheduler.chunk
        if d is not None:
            self._chunk(d)
            if d.token_end == self.spec.prompt_len:
                self.stats.prefill_layer_us = self.state.t
        else:
            i = self.request.num_output_tokens - 1
            if i == 0:
                self.emit(PhaseEvent(t_us=self.state.t, phase="decode", detail=f"{self.spec.decode_steps} steps"))
            self._decode_step(i)
        self.num_steps += 1
        return self.state.t, len(self.scheduler.update_from_output(out).finished)

    def finish(self, t: float) -> None:
        self.emit(PhaseEvent(t_us=self.state.t, phase="validate", detail="end-of-run validation pass"))
        self.hooks.validate()
        self.emit(PhaseEvent(t_us=self.state.t, phase="idle", detail="done"))

    # == a prefill chunk ============================================================================
    def _chunk(self, d: ChunkDecision) -> None:
        st, hooks, c = self.state, self.hooks, d.index
        t_start = st.t
        self.stats.chunk_sizes.append(d.num_tokens)
        for state in self.faults.states:
            if not state.after_barrier and state.strikes_at_chunk(c, self._num_chunks):
                hooks.inject(state, chunk=c)
        hooks.actions(chunk=c, pressure=False)
        first_page = d.token_start // self.page_size
        self.pages.allocate((d.token_end - 1) // self.page_size + 1 - len(self.kv.allocator.table(SEQ)), "prefill")
        stolen = self.faults.stolen_bandwidth("prefill", c, self.rng)
        ws = workspace_bytes(self.model, d.num_tokens)
        scale = 1.0 - stolen  # memory_path_contention slows host-path traffic only (re-fetches), not HBM
        kernels = self.plan.step_kernels(self.model, [(d.num_tokens, d.token_start)])
        self.stats.attention_launches += sum(1 for k in kernels if k.stage == "attention" and k.kind == "attention")
        end = self.timing.launch(kernels, st.t, "prefill", lambda k: CostEnv(hbm_bw_scale=scale), c, None, None,
                                 self.stats.prefill_costs)
        if stolen > 0:  # what the chunk would have taken with its bandwidth: the thief shows as the difference
            path = scale / (1.0 - stolen)
            expected = sum(self.timing.cost(k, CostEnv(hbm_bw_scale=path)).time_us for k in kernels)
            hooks.watch_chunk(c, end - t_start, expected)
        logical = range(d.token_start // self.page_size, (d.token_end - 1) // self.page_size + 1)
        st.chunk_pages.append(logical)
        self.kv.record_writes(logical, remapped=d.remapped, chunk_first_page=first_page,
                              continues=d.token_start % self.page_size != 0)
        self.emit(ChunkEvent(t_us=t_start, chunk=c, token_start=d.token_start, token_end=d.token_end,
                             chunk_size=d.chunk_size, reason=d.reason, pages=list(d.pages), barrier_us=end))
        st.t = end
        self.pages.snapshot(activation=ws, banks=True, at=t_start)
        r = self.shadow.prefill_chunk(d.num_tokens, skip_remap=not d.remapped) if self.shadow is not None else None
        hooks.experts("prefill", d.num_tokens, chunk=c, at=t_start, counts=r.expert_counts if r else None)
        if r is not None:
            hooks.numerics(r, "prefill", chunk=c)
        self.pages.partial.in_flight(logical)  # KV written, barrier not yet passed: pressure strikes here
        hooks.actions(chunk=c, pressure=True)
        hooks.barrier(c)
        for state in self.faults.states:
            if state.after_barrier and state.strikes_at_chunk(c, self._num_chunks):
                hooks.inject(state, chunk=c, chunk_pages=list(logical))

    # == a decode step ==============================================================================
    def _decode_step(self, i: int) -> None:
        spec, st, hooks = self.spec, self.state, self.hooks
        t_start = st.t
        context = spec.prompt_len + i  # tokens cached before this step's token
        for state in self.faults.states:
            if state.strikes_at_step(i):
                hooks.inject(state, step=i)
        hooks.actions(step=i)
        new_page = context % self.page_size == 0
        migrations = self.pages.allocate(1, "decode") if new_page else []
        if new_page:
            self.kv.record_writes([context // self.page_size])
        refetched, refetch_us = self.pages.refetch(i)
        once_us = refetch_us + sum(self.migration_cost().time_us for _ in migrations)
        breaks = self.pages.breaks()
        kernels = self.plan.step_kernels(self.model, [(1, context)])
        switch = self.plan.switch_over(self.model) if i == 0 else []
        env = self._decode_env(i, breaks, kernels)
        st.t = max(st.t, self.timing.stream_free(COPY))
        start = st.t
        stage_us: dict[str, float] = {}
        end = self.timing.launch(switch + kernels, st.t, "decode", env, None, i, stage_us, self.stats.decode_costs)
        switch_us = stage_us.pop("switch_over", 0.0)
        layer_us = end - start
        model_scope_us = sum(self.timing.cost(k, env(k)).time_us for k in switch + kernels if k.scope == "model")
        model_us = self.model_step_us(layer_us, model_scope_us, once_us, self._outside_layers_us(1, 1))
        running = self._latencies
        median = running[len(running) // 2] if running else model_us
        jitter = abs(model_us - median)
        if i > 0:  # step 0 carries the switch-over: a known outlier, kept out of the median
            bisect.insort(running, model_us)
        over = model_us > spec.sla_ms * 1000.0
        self._record_step(i, layer_us, model_us, jitter, over, switch_us, breaks)
        self.emit(DecodeStepEvent.model_validate(dict(
            t_us=t_start, kind="decode_step", step=i, context_len=context + 1, latency_us=layer_us,
            model_latency_us=model_us, sla_us=spec.sla_ms * 1000.0, jitter_us=jitter, over_sla=over,
            stage_us=stage_us, cross_bank_reads=breaks, refetched_pages=refetched)))
        hooks.watch_step(i, model_us, median)
        st.t = end
        self.pages.snapshot(activation=workspace_bytes(self.model, 1), banks=new_page or bool(migrations), at=t_start)
        r = self.shadow.decode_step() if self.shadow is not None else None
        hooks.experts("decode", 1, step=i, at=t_start, counts=r.expert_counts if r else None)
        if r is not None:
            hooks.numerics(r, "decode", step=i)

    def _decode_env(self, i: int, breaks: int, kernels: list[Kernel]) -> Callable[[Kernel], CostEnv]:
        """The conditions each of the step's kernels runs in: the block-table walk's extra bytes and latency (and
        a stale entry's re-translation) for its reader, this token's embedding row in L2 or not, stolen bandwidth."""
        extra_bytes, extra_us = walk_penalty(breaks)
        stale = self.state.stale
        if stale:  # a stale entry fails the page's chunk-epoch check: a serialized re-translation + re-read
            extra_bytes += len(stale) * self.kv.page_bytes_layer
            extra_us += len(stale) * STALE_RETRY_US
        stolen = self.faults.stolen_bandwidth("decode", i, self.rng)
        reader = _kv_reader(kernels)
        row_hit = i > 0 and self.rng.random() < self._embedding_hit_rate  # this token's row is L2-resident?
        plain = CostEnv(1.0 - stolen, i > 0)
        walking = CostEnv(1.0 - stolen, i > 0, extra_bytes, extra_us)
        lookup = CostEnv(1.0 - stolen, row_hit)
        return lambda k: walking if k is reader else lookup if k.stage == "embedding" else plain

    def _outside_layers_us(self, tokens: int, seqs: int) -> float:
        """What a step pays once outside the layers (embedding, lm_head, sampling, host time): deployments only,
        so scenarios without one keep their figures."""
        if self.spec.deployment is None:
            return 0.0
        extras = step_extras(self.full_model, self.model, self.spec.deployment, self.gpu, tokens, seqs)
        return sum(self.timing.cost(k, CostEnv()).time_us for k in extras.kernels) + extras.host_us

    def _record_step(self, i: int, layer_us: float, model_us: float, jitter: float, over: bool, switch_us: float,
                     breaks: int) -> None:
        s = self.stats
        if i == 0:
            s.first_step_us = layer_us
            s.switch_over_us = switch_us
        s.step_latency_us.append(layer_us)
        s.step_model_us.append(model_us)
        s.step_jitter_us.append(jitter)
        s.over_sla += int(over)
        s.cross_bank_reads = breaks


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
