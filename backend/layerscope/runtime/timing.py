"""Timing: prices kernels with the cost model and lays them on streams, emitting one kernel event per launch.

    kernels ─▶ CostModel.cost (memoised per (kernel, env)) ─▶ start = max(data dependency, stream free)
            ─▶ KernelEvent ─▶ the stream is busy until start + time

Compute kernels run one after another (each depends on the one before); a "copy" stream kernel (migrations,
re-fetches) runs beside the compute it follows and does not hold it up. The article's fused decode stages
share their own stream "decode_fused" and follow each other on it.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate
from operator import attrgetter, itemgetter
from typing import Any, cast

from layerscope.events import KernelEvent, trusted_event
from layerscope.hardware.cost import DEFAULT_ENV, CostModel
from layerscope.hardware.gpus import GPU
from layerscope.hardware.kernel import CostEnv, Kernel, KernelCost

COPY = "copy"
PLAIN_ENV = DEFAULT_ENV  # the cost model's own default object: it tells it apart by identity first
# Prices kept per GPU across runs of its default cost model (a server's, a sweep worker's, a bench's repeated runs
# price the same shapes); a 500-request run prices ~14k, ~1-2 KB each with their kernels; past this many the memo
# starts afresh at the next run (bounded memory: tens of MB).
SHARED_COSTS_MAX = 50_000
# a memo of prices: the default env's keyed by the kernel alone (no tuple to build, no CostEnv hash per lookup: a
# run looks up ~15k), any other env's by (kernel, env); a Kernel never equals a tuple
Costs = dict[Kernel | tuple[Kernel, CostEnv], KernelCost]
_shared_costs: dict[GPU, Costs] = {}
_Hit = tuple[Kernel, KernelCost, dict[str, Any]]  # a kernel, its cost, its event fields (Timing._plain)


def default_costs(gpu: GPU) -> tuple[CostModel, Costs]:
    """The GPU's default cost model and the prices it has given in this process (pure in kernel and env: the
    model's constants are module constants)."""
    costs = _shared_costs.setdefault(gpu, {})
    if len(costs) > SHARED_COSTS_MAX:
        costs.clear()
    return CostModel(gpu), costs


def memo_price(cost_model: CostModel, costs: Costs) -> Callable[[Kernel], KernelCost]:
    """A kernel's price in the default env from `costs` (default_costs' memo), as Timing.cost gives it, holding no
    run's state: what a plan kept across runs (runtime/shared_plans.py) prices its launch floors with."""

    def price(k: Kernel) -> KernelCost:
        c = costs.get(k)
        if c is None:
            c = costs[k] = cost_model.cost(k, PLAIN_ENV)
        return c

    return price


class Timing:
    def __init__(self, cost_model: CostModel, emit: Callable[[Any], None] | None,
                 costs: Costs | None = None, instance: int = 0,
                 rank: int = 0) -> None:
        """`emit` None: a run that keeps no events (a summary-only serving run) builds no kernel events. `costs`: the
        memo of `cost_model`'s prices to use (default_costs'), else one of this Timing's own. `instance`: the engine
        instance its kernel events say they ran on; `rank`: the GPU of its group they ran on."""
        self.cost_model = cost_model
        self.instance = instance
        self.rank = rank
        self.emit = emit
        self.streams: dict[str, float] = {}  # stream -> time it is free
        self._costs: Costs = {} if costs is None else costs
        self._by_id: dict[int, _Hit] = {}
        self._fields: dict[int, tuple[KernelCost, dict[str, Any]]] = {}  # a cost's kernel-event fields, by id
        # a step's kernels' streams -> (stream, index of its last kernel) for each (`_end_to_end`)
        self._layouts: dict[tuple[str, ...], tuple[tuple[str, int], ...]] = {}

    def stream_free(self, stream: str) -> float:
        return self.streams.get(stream, 0.0)

    def cost(self, k: Kernel, env: CostEnv = PLAIN_ENV) -> KernelCost:
        if env is PLAIN_ENV:
            return self._plain(k)[1]
        return self._cost(k, env)

    def _plain(self, k: Kernel) -> _Hit:
        """The same Kernel object again (a plan's memoised kernels): its cost and event fields without hashing
        its fields."""
        hit = self._by_id.get(id(k))
        if hit is None or hit[0] is not k:
            c = self._cost(k, PLAIN_ENV)
            fields = self._event_fields(c) if self.emit is not None else {}  # no events: no event fields
            hit = self._by_id[id(k)] = (k, c, fields)  # holds k: its id is not reused meanwhile
        return hit

    def _cost(self, k: Kernel, env: CostEnv) -> KernelCost:
        key: Kernel | tuple[Kernel, CostEnv] = k if env is PLAIN_ENV else (k, env)
        c = self._costs.get(key)
        if c is None:
            c = self._costs[key] = self.cost_model.cost(k, env)
        return c

    def launch(
        self,
        kernels: list[Kernel],
        t: float,
        phase: str,
        env: Callable[[Kernel], CostEnv] | None = None,
        chunk: int | None = None,
        step: int | None = None,
        stages: dict[str, float] | None = None,
        costs: list[KernelCost] | None = None,
    ) -> float:
        """Lay kernels end to end from time t (a copy-stream kernel runs beside the compute it follows);
        returns when the last one ends."""
        streams, emit, by_id = self.streams, self.emit, self._by_id
        if env is None and emit is None and costs is None and stages is None:  # a summary-only run's every step
            end = self._end_to_end(kernels, t)
            if end is not None:
                return end
        dep = t  # end of the last non-copy kernel: the data dependency
        end = t
        for k in kernels:
            if env is None:  # the serving loop's every step: inlined, one lookup gives cost and event fields
                hit = by_id.get(id(k))
                if hit is None or hit[0] is not k:
                    hit = self._plain(k)
                c, fields = hit[1], hit[2]
            else:
                c = self.cost(k, env(k))
                fields = self._event_fields(c)
            stream = k.stream
            free = streams.get(stream, 0.0)
            start = free if free > dep else dep  # max(dep, free), without the call
            if emit is not None:
                emit(_kernel_event(fields, phase, start, chunk, step))
            finish = start + c.time_us
            streams[stream] = finish
            if stream != COPY:
                dep = finish
            if finish > end:
                end = finish
            if costs is not None:
                costs.append(c)
            if stages is not None:
                stages[k.stage] = stages.get(k.stage, 0.0) + c.time_us
        return end

    def _end_to_end(self, kernels: list[Kernel], t: float) -> float | None:
        """`launch` of kernels that run end to end from t (no copy stream; each of their streams free by t; no
        negative time): the loop's own sums (start + time, the start the previous finish), at C speed; None for
        any other."""
        by_id = self._by_id
        found = list(map(by_id.get, map(id, kernels)))  # an entry holds its kernel: a found id is that kernel
        while None in found:  # a kernel not seen yet (a step's new attention): price it
            i = found.index(None)
            found[i] = self._plain(kernels[i])
        hits = cast(list[_Hit], found)
        streams_of = tuple(map(_STREAM, kernels))
        layout = self._layouts.get(streams_of)
        if layout is None:
            layout = self._layouts[streams_of] = _last_of_each(streams_of)
        streams = self.streams
        if layout is _NOT_END_TO_END or any(streams.get(s, 0.0) > t for s, _ in layout):
            return None
        times = list(map(_TIME_US, map(_COST, hits)))
        if times and min(times) < 0.0:
            return None
        ends = list(accumulate(times, initial=t))  # ends[i + 1]: when kernel i finishes
        for s, i in layout:
            streams[s] = ends[i + 1]
        return ends[-1]

    def copy(self, c: KernelCost, t: float, phase: str, step: int | None = None) -> float:
        """A copy-stream kernel issued at t: starts when the copy engine is free; returns its start."""
        start = max(t, self.stream_free(COPY))
        self.kernel_event(c, phase, start, None, step)
        self.streams[COPY] = start + c.time_us
        return start

    def kernel_event(self, c: KernelCost, phase: str, start: float, chunk: int | None, step: int | None) -> None:
        if self.emit is not None:
            self.emit(_kernel_event(self._event_fields(c), phase, start, chunk, step))

    def _event_fields(self, c: KernelCost) -> dict[str, Any]:
        # The fields that depend on the kernel and its cost alone are built once per KernelCost (costs are
        # memoised, so a serving run's thousands of steps reuse them).
        hit = self._fields.get(id(c))
        if hit is None or hit[0] is not c:
            # holds c: its id is not reused meanwhile
            hit = self._fields[id(c)] = (c, _cost_fields(c, self.instance, self.rank))
        return hit[1]


_STREAM = attrgetter("stream")
_COST = itemgetter(1)
_TIME_US = attrgetter("time_us")
_NOT_END_TO_END: tuple[tuple[str, int], ...] = ()  # a layout with a copy-stream kernel (or none at all)


def _last_of_each(streams: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """(stream, index of its last kernel) for each stream of a step's kernels; none if one is on the copy stream."""
    if COPY in streams or not streams:
        return _NOT_END_TO_END
    last = {s: i for i, s in enumerate(streams)}
    return tuple(last.items())


def _kernel_event(fields: dict[str, Any], phase: str, start: float, chunk: int | None, step: int | None) -> Any:
    values = fields.copy()  # a copy keeps the declaration order
    values["t_us"] = values["start_us"] = float(start)
    values["phase"] = phase
    values["chunk"] = chunk
    values["step"] = step
    return trusted_event(KernelEvent, values)


def _cost_fields(c: KernelCost, instance: int, rank: int = 0) -> dict[str, Any]:
    """A kernel event's fields, in declaration order; t_us, phase, start_us, chunk and step are filled per launch."""
    k = c.kernel
    return {
        "t_us": 0.0, "kind": "kernel", "name": k.name, "stage": k.stage, "stage_kind": k.kind, "phase": "",
        "stream": k.stream, "start_us": 0.0, "dur_us": float(c.time_us), "flops": float(k.flops),
        "bytes": float(k.bytes), "bound": c.bound, "hbm_util": float(c.hbm_util), "l2_hit": float(c.l2_hit),
        "chunk": None, "step": None, "shapes": k.shapes, "scope": k.scope, "source": c.source,
        "table": c.table.label() if c.table is not None else "", "instance": instance,
        "rank": rank}  # the simulated GPU of the instance's group
