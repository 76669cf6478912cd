"""The recorder: where an instance's events go, typed in one place.

Every instance of a run appends to the run's one event list (the loop sorts it by time at the end, stably: ties
keep the order events were made), or, in a summary-only run (`layerscope bench`, `sweep`), to nowhere: it then
feeds the run's ServingMetrics directly instead. The hottest events (a serving run's requests, pages, steps and
memory snapshots) are built with trusted_event: every field typed here, in declaration order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from layerscope.events import (
    BanksEvent,
    MemoryEvent,
    PageAllocEvent,
    PageCacheEvent,
    PageEvictEvent,
    PageFreeEvent,
    RequestEvent,
    StepEvent,
    trusted_event,
)
from layerscope.runtime.kv.cache_manager import CACHE_OWNER
from layerscope.runtime.metrics import ServingMetrics
from layerscope.runtime.request import Request


def _drop(event: Any) -> None:
    """Where a summary-only run's rare events go (phases, migrations, numerics): nowhere."""


class Recorder:
    """`events` None: a summary-only run, whose metrics are fed as its steps finish (`metrics`). `gpu_events`
    False: only the instance's requests and steps are kept, not what its GPU does (kernels, pages, memory, banks,
    phases: `emit_gpu`), as for a deployment's replicas past the first (runtime/replicas.py)."""

    def __init__(self, events: list[Any] | None, instance: int = 0, metrics: ServingMetrics | None = None,
                 gpu_events: bool = True) -> None:
        self.events = events
        self.keeps = events is not None
        self.emit: Callable[[Any], None] = events.append if events is not None else _drop
        self.emit_gpu = self.emit if gpu_events else _drop
        self.instance = instance
        self.metrics = metrics if events is None else None

    def request(self, req: Request, what: str, t: float, frontend_us: float = 0.0) -> None:
        self.emit(trusted_event(RequestEvent, {  # four a request
            "t_us": float(t), "kind": "request", "request_id": req.request_id, "what": what, "input_len": req.input_len,
            "output_len": req.output_len, "num_computed_tokens": req.num_computed_tokens,
            "num_output_tokens": req.num_output_tokens, "frontend_us": float(frontend_us), "instance": self.instance}))

    def request_pages(self, t: float, rid: int, phase: str, first: int, banks: list[int], slots: list[int]) -> None:
        """Pages a request's block table gained, from logical page `first` on (thousands a run)."""
        self.emit_gpu(trusted_event(PageAllocEvent, {
            "t_us": float(t), "kind": "page_alloc", "owner": f"req{rid}", "phase": phase,
            "logical": list(range(first, first + len(banks))), "banks": banks, "slots": slots, "request_id": rid,
            "instance": self.instance}))

    def pages_freed(self, t: float, rid: int | None, where: list[tuple[int, int]]) -> None:
        self.emit_gpu(PageFreeEvent(t_us=t, owner=f"req{rid}", banks=[b for b, _ in where], slots=[s for _, s in where],
                                request_id=rid, instance=self.instance))

    def pages_evicted(self, t: float, owner: str, where: list[tuple[int, int]], page_bytes: float) -> None:
        self.emit_gpu(PageEvictEvent(t_us=t, owner=owner, logical=list(range(len(where))), banks=[b for b, _ in where],
                                 slots=[s for _, s in where], bytes=len(where) * page_bytes, instance=self.instance))

    def cache_frees(self, t: float, drained: Iterable[tuple[str, int | None, list[tuple[int, int]]]],
                    page_bytes: float) -> int:
        """The pool's frees since the last drain (KVCacheManager.drain_log): a request's blocks back to the pool, or
        prefix-cache blocks evicted for room, or a finished request's blocks kept in the prefix cache; how many were
        evicted."""
        evicted = 0
        for what, rid, where in drained:
            if not where:
                continue
            if what == "evict":
                evicted += len(where)
            if not self.keeps:
                continue  # no page events to draw
            if what == "evict":
                self.pages_evicted(t, CACHE_OWNER, where, page_bytes)
            elif what == "keep":  # a finished request's full blocks stay in the prefix cache
                assert rid is not None, "kept blocks name the request that let go of them"
                self.emit_gpu(PageCacheEvent(t_us=t, owner=f"req{rid}", banks=[b for b, _ in where],
                                         slots=[s for _, s in where], request_id=rid, instance=self.instance))
            else:
                self.pages_freed(t, rid, where)
        return evicted

    def step(self, index: int, t: float, layer_us: float, model_us: float, num_seqs: int, prefill: int,
             decode: int, token_budget: int, request_ids: list[int], num_tokens: list[int],
             cached_blocks: int | None, num_sampled: list[int]) -> None:
        """`num_sampled`: the list the instance fills in when the step ends (sampled_into)."""
        self.emit(trusted_event(StepEvent, {  # every field typed here: no need to validate 100-long lists
            "t_us": float(t), "kind": "step", "index": index, "start_us": float(t), "dur_us": float(layer_us),
            "model_dur_us": float(model_us), "num_seqs": num_seqs, "prefill_tokens": prefill,
            "decode_tokens": decode, "token_budget": token_budget, "request_ids": request_ids,
            "num_tokens": num_tokens, "cached_blocks": cached_blocks, "num_sampled": num_sampled,
            "instance": self.instance}))

    def memory(self, t: float, total: float, used: float, kv_bytes: float, largest_free_run_bytes: float,
               activation: float) -> None:
        self.emit_gpu(trusted_event(MemoryEvent, {  # one a step
            "t_us": float(t), "kind": "memory", "hbm_total_bytes": float(total), "hbm_used_bytes": float(used),
            "hbm_free_bytes": float(total - used), "kv_bytes": float(kv_bytes),
            "largest_free_run_bytes": float(largest_free_run_bytes), "activation_bytes": float(activation)}))

    def banks(self, t: float, used: list[int], capacity: int, reserved: list[int] | None = None) -> None:
        self.emit_gpu(BanksEvent(t_us=t, used=used, capacity=capacity, reserved=reserved or []))
