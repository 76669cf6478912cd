"""Simulated runs made ready for playback, and a small LRU cache of them shared by all clients.

A run is simulated once per distinct spec (in a worker thread: it is CPU-bound) and its events are
turned into JSON-ready dicts once, each carrying its own JSON text, so fifty viewers of the same preset
cost one simulation and one json.dumps per event (frames are built by joining those texts).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, Protocol

from pydantic import BaseModel

from layerscope.events import MERGEABLE_KINDS, Topology
from layerscope.protocol import StreamedKernel
from layerscope.scenario import ScenarioSpec
from layerscope.server.overview import overview

log = logging.getLogger("layerscope.server")
MAX_COMPARE_POINTS = 2000  # decode latencies of the compare run sent with `loaded`


class SimResultLike(Protocol):
    """What runtime.engine.simulate returns (duck-typed so tests can pass a small fake)."""

    spec: ScenarioSpec
    events: list[BaseModel]
    topology: Topology
    summary: dict[str, Any]
    compare: Any


Simulate = Callable[[ScenarioSpec], SimResultLike]


def default_simulate(spec: ScenarioSpec) -> SimResultLike:
    from layerscope.runtime.engine import simulate  # imported late: the engine is heavy and optional for tests

    return simulate(spec)


def _finite(v: Any) -> Any:
    """JSON has no inf/nan: send them as the strings JavaScript's Number() reads back."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list) and v and isinstance(v[0], (float, dict)):
        return [_finite(x) for x in v]
    return v


class EncodedEvent(dict[str, Any]):
    """An event (or the `loaded` message) as a JSON-ready dict that also holds its JSON text, made once per run.

    Equal to the plain dict (tests and merging see a dict); the sender joins `.text`s instead of
    json.dumps-ing the same event again for every viewer and every frame. Never mutate one: the text
    would go stale.
    """

    __slots__ = ("text",)

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.text = json.dumps(data, separators=(",", ":"))


def event_dict(event: BaseModel) -> EncodedEvent:
    return EncodedEvent({k: _finite(v) for k, v in event.model_dump(mode="json").items()})


# What a streamed kernel event carries besides `row` (protocol.StreamedKernel): ~110 bytes instead of ~400. Full
# kernel events were 87% of a 64-request run's frame bytes (bench/README.md, "Serving views"), and the timeline and
# the detail pane read kernels from loaded.overview anyway.
STREAMED_KERNEL_FIELDS = frozenset(StreamedKernel.model_fields) - {"row"}


def streamed_kernel(event: BaseModel, row: int) -> EncodedEvent:
    """The slim kernel record frames carry: the same values as the full event's, fewer fields, in its model's field
    order (as model_dump(include=...) gave them; read directly, a third of the time for a 20 000-launch run)."""
    fields = _streamed_fields(type(event))
    return EncodedEvent({**{k: _finite(getattr(event, k)) for k in fields}, "row": row})


@cache
def _streamed_fields(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(f for f in model.model_fields if f in STREAMED_KERNEL_FIELDS)


def claims_of(result: SimResultLike) -> list[dict[str, Any]]:
    """The claims table: the result's own if it carries one, else computed by layerscope.claims."""
    own = getattr(result, "claims", None)
    if own is not None:
        return [dict(c) if isinstance(c, dict) else c.model_dump(mode="json") for c in own]
    try:
        from layerscope.claims import build_claims

        return [_finite(dict(c)) for c in build_claims(result)]
    except Exception:  # a claims bug must not stop the run from playing
        log.exception("claims table failed for %s", result.spec.name)
        return []


def tour_of(result: SimResultLike) -> list[dict[str, Any]]:
    """Each tour step's claim checked against this run (the tour panel marks it passed or failed)."""
    from layerscope.tour import tour_results

    return [_finite(row) for row in tour_results(result)]


def _end_us(e: BaseModel) -> float:
    return e.t_us + e.dur_us if e.kind == "kernel" else e.t_us  # type: ignore[attr-defined]


@dataclass(frozen=True)
class PreparedRun:
    """A run ready to stream: events as JSON-ready dicts (EncodedEvent) sorted by time, plus what `loaded` says."""

    spec: ScenarioSpec
    events: list[dict[str, Any]]
    times: list[float]  # events[i]["t_us"], for bisection
    topology: dict[str, Any]
    summary: dict[str, Any]
    duration_us: float
    compare: dict[str, Any] | None = None
    claims: list[dict[str, Any]] = field(default_factory=list)
    tour: list[dict[str, Any]] = field(default_factory=list)
    overview: dict[str, Any] | None = None  # the whole run (and its compare run) for the first screen
    result: Any = field(default=None, repr=False, compare=False)  # the engine's own result (for exports)
    num_events: int = 0  # events in the run, those that travel only in the overview included (`loaded.num_events`)

    @cached_property
    def loaded(self) -> EncodedEvent:
        """The `loaded` message, encoded once per run (prepare does it, in the worker thread): a 64-request run's is
        3.3 MB, 0.2 s of json.dumps that blocked the event loop, and every viewer's frames, once per viewer."""
        return EncodedEvent(
            {
                "type": "loaded",
                "scenario": _finite(self.spec.model_dump(mode="json")),  # e.g. request_rate: inf
                "topology": self.topology,
                "duration_us": self.duration_us,
                "num_events": self.num_events or len(self.events),
                "compare": _finite(self.compare),
                "claims": self.claims,
                "tour_results": self.tour,
                "overview": self.overview,
            }
        )

    @cached_property
    def snapshot_index(self) -> list[int]:
        """Indices of the mergeable snapshots in `events`, ascending (Playback merges a frame's by them)."""
        return [i for i, e in enumerate(self.events) if e["kind"] in MERGEABLE_KINDS]


def _compare_dict(spec: ScenarioSpec, compare: Any) -> dict[str, Any] | None:
    if compare is None:
        return None
    steps = [e for e in compare.events if getattr(e, "kind", "") == "decode_step"]
    stride = max(1, -(-len(steps) // MAX_COMPARE_POINTS))
    return {
        "label": spec.compare.label if spec.compare else "compare",
        "scenario": _finite(compare.spec.model_dump(mode="json")),
        "summary": _finite(dict(compare.summary)),
        "decode_latency_us": [[e.t_us, e.step, e.model_latency_us] for e in steps[::stride]],
        "claims": claims_of(compare),  # the claims panel's column B
    }


# Kinds the dashboard reads only from loaded.overview (the bank map rebuilds each run's state at the cursor from its
# page events there), so they are not streamed again frame by frame: a serving run's page_alloc events carry
# hundreds of (bank, slot) pairs each and were most of its frames' bytes (bench/README.md). A serving run's request
# and step events are there too (serving.js draws lanes, steps and histograms from the whole run and ignores them
# in frames). Recordings and exports are written from the engine's result and stay complete.
OVERVIEW_ONLY = frozenset({"page_alloc", "page_free", "page_migrate", "page_evict", "request", "step"})


def streamed_events(result: SimResultLike) -> list[EncodedEvent]:
    """The events frames carry, sorted by time (stably: ties keep the run's order): all but OVERVIEW_ONLY, kernels
    slim (`row` counts kernels in the run's order, as the overview's table lists them)."""
    out: list[EncodedEvent] = []
    row = 0
    for e in result.events:
        if e.kind == "kernel":  # type: ignore[attr-defined]
            out.append(streamed_kernel(e, row))
            row += 1
        elif e.kind not in OVERVIEW_ONLY:  # type: ignore[attr-defined]
            out.append(event_dict(e))
    return sorted(out, key=lambda e: e["t_us"])


def prepare(result: SimResultLike) -> PreparedRun:
    events = streamed_events(result)
    duration = max((_end_us(e) for e in result.events), default=0.0)
    claims = claims_of(result)
    run = PreparedRun(
        spec=result.spec,
        events=events,
        times=[e["t_us"] for e in events],
        topology=result.topology.model_dump(mode="json"),
        summary=_finite(dict(result.summary)),
        duration_us=duration,
        compare=_compare_dict(result.spec, result.compare),
        claims=claims,
        tour=tour_of(result),
        overview=overview(result, _num_layers(result.spec)),
        result=result,
        num_events=len(result.events),
    )
    run.loaded, run.snapshot_index  # noqa: B018 -- made here, in the caller's worker thread, not on the event loop
    return run


def _num_layers(spec: ScenarioSpec) -> int:
    from layerscope.model.config import PRESETS

    cfg = PRESETS.get(spec.model)
    return int(cfg.num_hidden_layers) if cfg is not None else 1


@dataclass
class _Recorded:
    """A recorded run in the shape of the engine's result (no compare run: a recording holds one run)."""

    spec: ScenarioSpec
    events: list[BaseModel]
    topology: Topology
    summary: dict[str, Any]
    compare: Any = None


class ReplayError(ValueError):
    """A recorded event that does not fit the event schema; `field` is its place (`events.12.dur_us`)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def parse_recording(events: list[dict[str, Any]]) -> list[BaseModel]:
    """Recorded events (`layerscope run --events`) validated one by one against the event schema; the first bad
    one raises ReplayError naming it. Only the first line may be the recording's `run` spec."""
    from pydantic import ValidationError

    from layerscope.events import EVENT_ADAPTER, RunEvent

    parsed: list[BaseModel] = []
    for i, raw in enumerate(events):
        try:
            parsed.append(EVENT_ADAPTER.validate_python(raw))
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(p) for p in ("events", i, *err["loc"]))
            raise ReplayError(f"field '{field}': {err['msg']}", field) from None
        if i > 0 and isinstance(parsed[-1], RunEvent):
            raise ReplayError(f"field 'events.{i}': a `run` line opens a recording; one file holds one run",
                              f"events.{i}")
    return parsed


def replay_run(spec: ScenarioSpec, events: list[BaseModel]) -> PreparedRun:
    """Prepare parsed recorded events (parse_recording, without the `run` line) for playback as if `spec` had
    just been simulated: the topology is the runtime plan's for the spec, the summary the recording's `summary`."""
    from layerscope.events import SummaryEvent
    from layerscope.hardware.cost import CostModel
    from layerscope.hardware.gpus import gpu
    from layerscope.model.config import PRESETS
    from layerscope.runtime.plan import get_runtime

    summary = next((dict(e.figures) for e in reversed(events) if isinstance(e, SummaryEvent)), {})
    topology = get_runtime(spec.runtime).topology(PRESETS[spec.model], CostModel(gpu(spec.gpu)))
    return prepare(_Recorded(spec=spec, events=list(events), topology=topology, summary=summary))


def settle_heap(collect: bool) -> None:
    """Keep the cached runs' objects out of the cyclic collector's full passes, which stall the event loop.

    A prepared serving-64-h200-tp8 run is ~180k tracked objects (its event dicts, overview rows, the engine's
    result) and a full pass over them took 33-126 ms on this machine (gc.callbacks, measured), every frame of every
    viewer waiting behind it. They live as long as the cache holds the run and hold no cycles worth finding, so
    freeze() moves every tracked object to the permanent generation the collector skips (reference counting still
    frees them when the run is dropped). After an eviction (`collect`), unfreeze and collect once first, so that
    cycles among what was dropped are still reclaimed."""
    if collect:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


class RunCache:
    """Bounded LRU of prepared runs keyed by the spec's canonical JSON; concurrent loads share one simulation."""

    def __init__(
        self, simulate: Simulate, max_runs: int = 8, max_concurrent: int = 2, max_events: int = 500_000
    ) -> None:
        self._simulate = simulate
        self._max = max_runs
        self._max_events = max_events  # runs hold their events as dicts: bound memory by events, not only runs
        self._runs: OrderedDict[str, PreparedRun] = OrderedDict()
        self._pending: dict[str, asyncio.Future[PreparedRun]] = {}
        self._max_concurrent = max_concurrent
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.simulations = 0  # how many times the engine actually ran (for tests and /api/debug)

    def __len__(self) -> int:
        return len(self._runs)

    def _bind(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._loop is not loop:  # a test client may run each request on a new loop
            self._loop, self._slots, self._pending = loop, asyncio.Semaphore(self._max_concurrent), {}
        return self._slots

    async def get(self, spec: ScenarioSpec) -> PreparedRun:
        slots = self._bind()
        key = spec.model_dump_json()
        if key in self._runs:
            self._runs.move_to_end(key)
            return self._runs[key]
        if key in self._pending:
            return await asyncio.shield(self._pending[key])
        fut: asyncio.Future[PreparedRun] = asyncio.get_running_loop().create_future()
        self._pending[key] = fut
        try:
            async with slots:
                self.simulations += 1
                run = await asyncio.to_thread(lambda: prepare(self._simulate(spec)))
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # mark retrieved: waiters re-raise it, nobody else needs to
            raise
        finally:
            del self._pending[key]
        fut.set_result(run)
        self._runs[key] = run
        evicted = False
        while len(self._runs) > 1 and (len(self._runs) > self._max or self.num_events > self._max_events):
            self._runs.popitem(last=False)  # the newest run always stays, however large
            evicted = True
        settle_heap(collect=evicted)
        return run

    def hold_at_least(self, runs: int) -> None:
        """Keep at least this many runs (server/prewarm.py sizes the cache to the preset library)."""
        self._max = max(self._max, runs)

    @property
    def busy(self) -> bool:
        """Whether a simulation is running (server/prewarm.py waits for a visitor's to finish)."""
        return bool(self._pending)

    @property
    def num_events(self) -> int:
        return sum(len(r.events) for r in self._runs.values())

    def get_sync(self, spec: ScenarioSpec) -> PreparedRun:
        """For plain (threaded) REST handlers: simulate without touching the async bookkeeping."""
        key = spec.model_dump_json()
        if key in self._runs:
            return self._runs[key]
        self.simulations += 1
        return prepare(self._simulate(spec))
