"""What a one-request run's instance calls at its chunks' and steps' edges: faults (inject, detect), actions
(compact, pressure, release, validate), partial eviction at a chunk's barrier, the end-of-run validation pass, and
the numeric shadow's and expert counts' events (a numerics fault is seen there)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from layerscope.events import ExpertsEvent, FaultEvent, NumericsEvent, PageAllocEvent
from layerscope.runtime import actions
from layerscope.runtime.actions import PoolActions
from layerscope.runtime.faults import FaultPlan, FaultState, stale_pages
from layerscope.runtime.kv.allocator import EVICTED
from layerscope.runtime.kv.hint import PageHint
from layerscope.runtime.kv.manager import FOREIGN, SEQ, KVManager
from layerscope.runtime.request_pages import RequestPages
from layerscope.runtime.request_state import RequestState
from layerscope.runtime.routing import ExpertTraffic
from layerscope.runtime.shadow import NumericShadow, ScaledRouter, ShadowResult
from layerscope.runtime.timing import COPY, Timing
from layerscope.runtime.validation import crc_pass
from layerscope.scenario import ActionSpec, ScenarioSpec

Rng = Any  # numpy Generator: the run's one stream of draws, in the order the run makes them


class RequestHooks:
    """Also the FaultTarget (runtime/faults.py): what a fault may do to the run."""

    def __init__(self, spec: ScenarioSpec, state: RequestState, kv: KVManager, pages: RequestPages, timing: Timing,
                 emit: Callable[[Any], None], shadow: NumericShadow | None, traffic: ExpertTraffic | None,
                 router: ScaledRouter | None, rng: Rng) -> None:
        self.spec, self.state, self.kv, self.pages, self.timing, self.emit = spec, state, kv, pages, timing, emit
        self.shadow, self.traffic, self.router, self.rng = shadow, traffic, router, rng
        self.faults = FaultPlan(spec.faults, spec.decode_steps)
        self.partial = pages.partial
        self.pool_actions = PoolActions(kv, emit)
        self.hint = PageHint(kv, spec.prompt_len, spec.decode_steps, kv.page_size)

    # == actions ==================================================================================
    def actions(self, chunk: int | None = None, step: int | None = None, pressure: bool | None = None) -> None:
        """Actions due now (runtime/actions.py)."""
        for a in actions.due(self.spec.actions, chunk, step, pressure):
            self._action(a, step)

    def _action(self, a: ActionSpec, step: int | None) -> None:
        if a.do == "compact":
            self._compact()
        elif a.do == "pressure":
            short = self.pool_actions.shortfall(a.amount_gib)  # free pages first, then the oldest are evicted
            if short:
                self.pages.evict(short)
            self.pool_actions.pressure(a.amount_gib, self.state.t, in_decode=step is not None)
            self.pages.snapshot(activation=0.0, banks=True)
        elif a.do == "release":
            self.pool_actions.release(a.amount_gib, self.state.t)
            self.pages.snapshot(activation=0.0, banks=True)
        else:
            self.validate(in_decode=step is not None)

    def _compact(self) -> None:
        """Compact the bank with the most free pages; a waiting hint reservation gets its room there first."""
        self.state.stats.compactions += 1
        for m in self.pool_actions.compact(self.hint.room()):
            self.pages.migrate(m)
        self.state.version += 1
        self.state.t = max(self.state.t, self.timing.stream_free(COPY))
        if self.hint.pending:
            self.reserve_hint()
        self.pages.snapshot(activation=0.0, banks=True)

    def reserve_hint(self) -> None:
        hint = self.hint.reserve()
        if hint is None:
            n = self.hint.size
            self.pages.alloc_fail(SEQ, n, True, f"no run of {n} adjacent free pages in one bank for decode_page_hint")
            return
        if not hint:
            return
        self.state.stats.hint_pages = len(hint)
        self.emit(PageAllocEvent(t_us=self.state.t, owner="hint", phase="prefill", logical=list(range(len(hint))),
                                 banks=[b for b, _ in hint], slots=[s for _, s in hint]))

    # == validation and partial eviction ==========================================================
    def validate(self, in_decode: bool = False) -> None:
        st = self.state
        events, bad = crc_pass(self.kv, self.pages.decode_map(), self.shadow, st.t)
        for e in events:
            self.emit(e)
        st.stats.crc_bad_banks |= set(bad)
        rebuilt = False
        for state in self.faults.states:
            if state.watching and (msg := state.on_validate(bad, self.shadow is not None)):
                self.detected(state, msg, banks=bad if bad and state.spec.kind != "ecc_bitflips" else None)
        for state in self.faults.of("stale_chunk_metadata"):
            if state.detected and st.stale:
                st.stale, rebuilt = {}, True
                st.version += 1
                self.emit(FaultEvent(t_us=st.t, fault=state.spec.kind, action="recovered",
                                     detail="address map rebuilt from the page pool's records"))
        self._repair(None if rebuilt else bad, in_decode)

    def _repair(self, bad: list[int] | None, in_decode: bool) -> None:
        """Partially evicted pages the pass found (every entry after a full rebuild: bad=None) are invalidated,
        so they are re-fetched from host memory (now, or in this decode step's re-fetch)."""
        damaged = self.partial.damaged(bad)
        if not damaged:
            return
        banks = self.partial.detected(damaged, self.state.t)
        self.partial.repair(damaged)
        self.state.version += 1
        self.state.stats.repaired_pages += len(damaged)
        if self.shadow is not None:
            self.shadow.restore_pages(self.scaled_pages(damaged))
        if not in_decode:
            self.pages.refetch(None)
        self.partial.recovered(damaged, banks, self.state.t)

    def barrier(self, c: int) -> None:
        """The chunk's barrier publishes its address remap; pages evicted while it was in flight are partially
        evicted (runtime/partial_eviction.py)."""
        lost = self.partial.barrier()
        if not lost:
            return
        self.state.version += 1
        self.state.stats.partial_evictions += len(lost)
        if self.shadow is not None:  # the tenant's writes land on the scaled pages of the same logical pages
            written = [p for p, b, s in lost if self.kv.content[b, s] == FOREIGN]
            self.shadow.overwrite_pages(self.scaled_pages(written))
        self.partial.injected(lost, c, self.state.t)

    def scaled_pages(self, pages: list[int]) -> list[int]:
        """The scaled run's pages holding the same tokens as these full-size prefill pages."""
        assert self.shadow is not None
        out: set[int] = set()
        chunk_pages = self.state.chunk_pages
        for p in pages:
            c = next((i for i, full in enumerate(chunk_pages) if p in full), None)
            if c is None or c >= len(self.shadow.chunk_pages):
                continue  # not a prefill page: nothing of it in the scaled run's chunks
            full, scaled = chunk_pages[c], self.shadow.chunk_pages[c]
            i = p - full.start
            lo = scaled.start + i * len(scaled) // len(full)
            hi = max(lo + 1, scaled.start + (i + 1) * len(scaled) // len(full))
            out.update(range(lo, min(hi, scaled.stop)))
        return sorted(out)

    # == faults ===================================================================================
    def inject(self, state: FaultState, chunk: int | None = None, step: int | None = None,
               chunk_pages: list[int] | None = None) -> None:
        state.injected, state.chunk, state.step = True, chunk, step
        detail = state.on_inject(self, chunk, step, chunk_pages or [])
        self.emit(FaultEvent(t_us=self.state.t, fault=state.spec.kind, action="injected", detail=detail,
                             banks=state.banks, step=step, chunk=chunk))

    def stale_map(self, chunk_pages: list[int], count: int) -> tuple[int, list[int]]:
        table = self.kv.allocator.table(SEQ)
        st = self.state
        st.stale.update(stale_pages(chunk_pages, len(chunk_pages), count, len(table)))
        st.version += 1
        if self.shadow is not None:
            self.shadow.corrupt_map(self.shadow.scaled_tokens(st.stats.chunk_sizes[-1]) // self.shadow.page, count)
        return len(st.stale), sorted({table[src][0] for src in st.stale.values() if table[src][0] != EVICTED})

    def flip_weights(self, count: int, rate: float) -> int:
        return count if self.shadow is None else self.shadow.flip_weights(count, rate, self.rng)

    def detected(self, state: FaultState, detail: str, banks: list[int] | None = None,
                 step: int | None = None, chunk: int | None = None) -> None:
        state.detected = True
        self.emit(FaultEvent(t_us=self.state.t, fault=state.spec.kind, action="detected", detail=detail,
                             banks=banks or state.banks, step=step, chunk=chunk))

    def watch_chunk(self, chunk: int, took_us: float, expected_us: float) -> None:
        for state in self.faults.states:
            if state.watching and (msg := state.on_chunk(chunk, took_us, expected_us)):
                self.detected(state, msg, chunk=chunk)

    def watch_step(self, step: int, model_us: float, median: float) -> None:
        for state in self.faults.states:
            if state.watching and (msg := state.on_step(step, model_us, median)):
                self.detected(state, msg, step=step)

    # == numerics and experts =======================================================================
    def numerics(self, r: ShadowResult, phase: str, chunk: int | None = None, step: int | None = None) -> None:
        assert self.shadow is not None
        self.emit(NumericsEvent(t_us=self.state.t, phase=phase, scaled_model=self.shadow.name,
                                tokens=r.tokens, rel_error=r.rel_error, max_abs_error=r.max_abs_error,
                                nan_count=r.nan_count, inf_count=r.inf_count, step=step, chunk=chunk))
        s = self.state.stats
        s.max_rel_error = max(s.max_rel_error, r.rel_error)
        s.nan_detected |= r.nan_count + r.inf_count > 0
        for state in self.faults.states:
            if state.watching and (msg := state.on_numerics(r)):
                self.detected(state, msg, step=step, chunk=chunk)

    def experts(self, phase: str, full_tokens: int, at: float, chunk: int | None = None,
                step: int | None = None, counts: list[int] | None = None) -> None:
        if self.router is None:
            return
        if counts is None:  # numerics off: the scaled router alone on as many scaled tokens
            counts = self.router.counts(min(full_tokens, 256) if phase == "prefill" else 1)
        if self.traffic is None:  # a dense model has no experts to count
            return
        self.emit(ExpertsEvent(t_us=at, phase=phase, step=step, chunk=chunk,
                               scaled_model=self.spec.numerics_model, counts=counts,
                               distinct_full=self.traffic.distinct(full_tokens),
                               assumed=self.traffic.routing.assumed))
