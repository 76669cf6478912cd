"""Simulated runs made ready for playback, and a small LRU cache of them shared by all clients.

A run is simulated once per distinct spec (in a worker thread: it is CPU-bound) and its events are
turned into JSON-ready dicts once, each carrying its own JSON text, so fifty viewers of the same preset
cost one simulation and one json.dumps per event (frames are built by joining those texts).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import gc
import inspect
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

import pydantic_core
from pydantic import BaseModel

from layerscope.budget import Cancelled, RunBudget, Work
from layerscope.claims import build_claims
from layerscope.events import EVENT_ADAPTER, MERGEABLE_KINDS, RunEvent, SummaryEvent, Topology
from layerscope.gcpause import paused_gc
from layerscope.model.config import PRESETS
from layerscope.protocol import StreamedKernel
from layerscope.result import SimResult, run_clock
from layerscope.scenario import ScenarioSpec
from layerscope.server.diskcache import PreparedCache, gzip_text
from layerscope.server.overview import overview
from layerscope.tour import tour_results

log = logging.getLogger("layerscope.server")
MAX_COMPARE_POINTS = 2000  # decode latencies of the compare run sent with `loaded`
TRIM_DELAY_S = 1.0  # after a viewer leaves, before its run's memory is collected: its session is gone by then


Simulate = Callable[..., SimResult]  # (spec) or (spec, check=...): see RunCache


@dataclass(frozen=True)
class Simulator:
    """What the server needs of the engine, handed to it by the command that starts it (commands/serve.py): the
    server imports no engine, plan or hardware, so a test hands it a fake `simulate` as easily."""

    simulate: Simulate  # (spec) or (spec, check=...): see RunCache
    estimate_work: Callable[[ScenarioSpec], Work]  # a run's cost before it runs: the server refuses one over its limit
    topology: Callable[[ScenarioSpec], Topology]  # the topology the engine builds for a spec (a replayed run's)
    is_engine: bool = False  # the real engine, whose imports and first run prewarming pays before the server answers


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

    def __init__(self, data: dict[str, Any], text: str | None = None) -> None:
        super().__init__(data)
        self.text = compact_dumps(data) if text is None else text


# Items of a list encoded by one json.dumps call in dumps_in_pieces: a few hundred kB of text, a few ms of CPU.
LIST_PIECE = 2000


def dumps_in_pieces(value: Any) -> str:
    """compact_dumps(value), the same text, made of many short dumps: lists of more than
    LIST_PIECE items a slice at a time, dicts and lists of dicts item by item. One json.dumps call holds the
    interpreter's lock throughout: a heavy run's 10 MB `loaded` took 0.3-1 s in its worker thread, every viewer's
    frames waiting behind it (bench/README.md, Hardening); between pieces the event loop gets its turn."""
    if isinstance(value, dict) and all(type(k) is str for k in value):
        return "{" + ",".join(f"{compact_dumps(k)}:{dumps_in_pieces(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list) and len(value) > LIST_PIECE:
        pieces = (compact_dumps(value[i:i + LIST_PIECE])[1:-1] for i in range(0, len(value), LIST_PIECE))
        return "[" + ",".join(pieces) + "]"
    if isinstance(value, list) and any(isinstance(x, dict) for x in value):
        return "[" + ",".join(dumps_in_pieces(x) for x in value) + "]"
    return compact_dumps(value)


def compact_dumps(value: Any) -> str:
    """JSON text without spaces, as every message travels. pydantic-core's encoder (Rust; pydantic is a dependency
    anyway), not json.dumps: the same values, 5-8x faster on a heavy run's overview (two-node-1p3d's 6.8 MB
    `loaded`: 0.9-1.5 s of json.dumps, 0.11-0.18 s here; bench/README.md, First screen). The text differs from
    json.dumps' only in spelling: non-ASCII characters travel as UTF-8, not \\u escapes, and a small float may
    be spelt otherwise (0.00001 where repr writes 1e-05); both read back as the same values."""
    return pydantic_core.to_json(value).decode()


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


def claims_of(result: SimResult) -> list[dict[str, Any]]:
    """The claims table: the result's own if it carries one, else computed by layerscope.claims."""
    own = getattr(result, "claims", None)
    if own is not None:
        return [dict(c) if isinstance(c, dict) else c.model_dump(mode="json") for c in own]
    try:
        return [_finite(dict(c)) for c in build_claims(result)]
    except Exception:  # a claims bug must not stop the run from playing
        log.exception("claims table failed for %s", result.spec.name)
        return []


def tour_of(result: SimResult) -> list[dict[str, Any]]:
    """Each tour step's claim checked against this run (the tour panel marks it passed or failed)."""
    return [_finite(row) for row in tour_results(result)]


def _end_us(e: BaseModel) -> float:
    return e.t_us + e.dur_us if e.kind == "kernel" else e.t_us  # type: ignore[attr-defined]


@dataclass(eq=False)
class PreparedRun:
    """A run ready to stream: events as JSON-ready dicts (EncodedEvent) sorted by time, plus what `loaded` says.

    Made in two steps (RunCache, in worker threads): prepare_first_screen makes what the first screen draws
    (`loaded`: topology, overview, compare run), and the viewers get it at once; finish then makes what follows it
    (the streamed events playback needs, the claims and tour checks: the `details` message). A heavy run's finish
    was ~1.3 s of a cold server's 6-8 s prepare step (bench/README.md, Sixth round): the first
    screen no longer waits for it. `await run.finished()` before reading events, claims or tour."""

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
    result: Any = field(default=None, repr=False)  # the engine's own result (for exports)
    num_events: int = 0  # events in the run, those that travel only in the overview included (`loaded.num_events`)
    num_streamed: int = 0  # len(events) once finished: what the cache's event bound counts from the first screen on
    done: concurrent.futures.Future[None] = field(default_factory=lambda: _running_future(), repr=False)
    # `loaded.text` gzipped, once made (loaded_gzip): held with the run, so within the run cache's bound (runs and
    # events); it adds about 1/6 of the text's size (two-nodes-wide-ep: 10.7 MB of text, 1.7 MB gzipped)
    loaded_gz: bytes | None = field(default=None, init=False, repr=False)
    _gzip_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @cached_property
    def loaded(self) -> EncodedEvent:
        """The `loaded` message, encoded once per run (in the worker thread): a 64-request run's is 3.3 MB, 0.2 s
        of json.dumps that blocked the event loop, and every viewer's frames, once per viewer. It carries no
        claims nor tour results (empty lists: the `details` message brings them) and the compare run without
        its claims."""
        compare = None if self.compare is None else {k: v for k, v in self.compare.items() if k != "claims"}
        data = {
            "type": "loaded",
            "scenario": _finite(self.spec.model_dump(mode="json")),  # e.g. request_rate: inf
            "topology": self.topology,
            "duration_us": self.duration_us,
            "num_events": self.num_events or len(self.events),
            "compare": _finite(compare),
            "claims": [],
            "tour_results": [],
            "overview": self.overview,
        }
        return EncodedEvent(data, dumps_in_pieces(data))

    @cached_property
    def details(self) -> EncodedEvent:
        """The `details` message (protocol.DetailsMessage): what the first screen does not draw (made by finish)."""
        compare_claims = None if self.compare is None else self.compare.get("claims", [])
        return EncodedEvent({"type": "details", "claims": self.claims, "tour_results": self.tour,
                             "compare_claims": compare_claims})

    @cached_property
    def loaded_whole(self) -> str:
        """`loaded` with the details inside (its `details` field): what the disk cache holds, so that a cold
        server's first screen from disk (GET /api/loaded, a websocket `load`) has its claims and tour at once.
        Spliced, not encoded again: the details are a few kB."""
        return f'{self.loaded.text[:-1]},"details":{self.details.text}}}'

    def loaded_gzip(self) -> bytes:
        """`loaded.text` gzipped (diskcache.GZIP_LEVEL), made once per run, in a worker thread (~0.1 s for a 10 MB
        text: never on the event loop): what GET /api/loaded sends a client that takes gzip, 1.7 MB instead of
        10.7 MB of JSON for two-nodes-wide-ep. Thread-safe: two requests at once compress it once."""
        with self._gzip_lock:
            if self.loaded_gz is None:
                self.loaded_gz = gzip_text(self.loaded.text)
            return self.loaded_gz

    async def finished(self) -> None:
        """Until finish() has run (at once if it has); re-raises what it raised."""
        if not self.done.done():
            await asyncio.wrap_future(self.done)
        self.done.result()

    @cached_property
    def snapshot_index(self) -> list[int]:
        """Indices of the mergeable snapshots in `events`, ascending (Playback merges a frame's by them)."""
        return [i for i, e in enumerate(self.events) if e["kind"] in MERGEABLE_KINDS]


def _running_future() -> concurrent.futures.Future[None]:
    """A future marked running, so no one can cancel it: asyncio.wrap_future passes a cancelled waiter's
    cancellation on to the future it wraps, and one viewer leaving would fail every other viewer's load."""
    future: concurrent.futures.Future[None] = concurrent.futures.Future()
    future.set_running_or_notify_cancel()
    return future


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
    }  # its "claims" (the claims panel's column B) added by finish


# Kinds the dashboard reads only from loaded.overview (the bank map rebuilds each run's state at the cursor from its
# page events there), so they are not streamed again frame by frame: a serving run's page_alloc events carry
# hundreds of (bank, slot) pairs each and were most of its frames' bytes (bench/README.md). A serving run's request
# and step events are there too (serving.js draws lanes, steps and histograms from the whole run and ignores them
# in frames). Recordings and exports are written from the engine's result and stay complete.
OVERVIEW_ONLY = frozenset({"page_alloc", "page_free", "page_migrate", "page_evict", "request", "step"})


def streamed_events(result: SimResult) -> list[dict[str, Any]]:
    """The events frames carry, sorted by time (stably: ties keep the run's order): all but OVERVIEW_ONLY, kernels
    slim (`row` counts kernels in the run's order, as the overview's table lists them)."""
    out: list[dict[str, Any]] = []  # EncodedEvents
    row = 0
    for e in result.events:
        if e.kind == "kernel":
            out.append(streamed_kernel(e, row))
            row += 1
        elif e.kind not in OVERVIEW_ONLY:
            out.append(event_dict(e))
    return sorted(out, key=lambda e: e["t_us"])


def prepare(result: SimResult) -> PreparedRun:
    """The whole run prepared in one go (replays, warm-up, tests); RunCache does it in two steps."""
    return finish(prepare_first_screen(result))


def prepare_first_screen(result: SimResult) -> PreparedRun:
    """What `loaded` needs (its text encoded here, in the caller's worker thread, not on the event loop). With the
    cyclic collector paused, as a simulation runs: the overview's ~100k rows and cells hold no cycles, and the
    collector's passes over the heap they grow were half of a heavy preset's prepare (two-nodes-wide-ep 1.0 s
    against 0.4 s, bench/README.md)."""
    with paused_gc():
        return _first_screen(result)


def _first_screen(result: SimResult) -> PreparedRun:
    run = PreparedRun(
        spec=result.spec,
        events=[],
        times=[],
        topology=result.topology.model_dump(mode="json"),
        summary=_finite(dict(result.summary)),
        duration_us=max((_end_us(e) for e in result.events), default=0.0),
        compare=_compare_dict(result.spec, result.compare),
        overview=overview(result, _num_layers(result.spec)),
        result=result,
        num_events=len(result.events),
        num_streamed=sum(e.kind not in OVERVIEW_ONLY for e in result.events),
    )
    run.loaded  # noqa: B018 -- made here, in the caller's worker thread
    return run


def finish(run: PreparedRun) -> PreparedRun:
    """The rest (make_rest), and the run marked done (or failed: finished() re-raises)."""
    if run.done.done():
        return run
    try:
        make_rest(run)
    except BaseException as e:
        run.done.set_exception(e)
        raise
    run.done.set_result(None)
    return run


def make_rest(run: PreparedRun) -> None:
    """What follows the first screen (in a worker thread): the streamed events, claims, tour checks, the compare
    run's claims, `details` and the whole `loaded` text (the collector paused, as for the first screen)."""
    with paused_gc():
        _make_rest(run)


def _make_rest(run: PreparedRun) -> None:
    result = run.result
    run.events = streamed_events(result)
    run.times = [e["t_us"] for e in run.events]
    run.claims = claims_of(result)
    run.tour = tour_of(result)
    if run.compare is not None:
        run.compare = {**run.compare, "claims": claims_of(result.compare)}  # the claims panel's column B
    run.snapshot_index, run.details, run.loaded_whole  # noqa: B018


def _num_layers(spec: ScenarioSpec) -> int:
    cfg = PRESETS.get(spec.model)
    return int(cfg.num_hidden_layers) if cfg is not None else 1


class ReplayError(ValueError):
    """A recorded event that does not fit the event schema; `field` is its place (`events.12.dur_us`)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def parse_recording(events: list[dict[str, Any]]) -> list[BaseModel]:
    """Recorded events (`layerscope run --events`) validated one by one against the event schema; the first bad
    one raises ReplayError naming it. Only the first line may be the recording's `run` spec."""
    from pydantic import ValidationError

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


def replay_run(spec: ScenarioSpec, events: list[BaseModel], topology: Topology) -> PreparedRun:
    """Prepare parsed recorded events (parse_recording, without the `run` line) for playback as if `spec` had
    just been simulated: `topology` is the one the engine builds for the spec (Simulator.topology: a deployment's
    all-reduce stages included), the summary the recording's `summary`."""
    summary = next((dict(e.figures) for e in reversed(events) if isinstance(e, SummaryEvent)), {})
    return prepare(SimResult(spec=spec, events=list(events), topology=topology, summary=summary, clock=run_clock(spec)))


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


class Busy(Exception):
    """The server cannot take this run now (simulation queue full, memory held by viewers): retry later."""

    def __init__(self, message: str, retry_after_s: int = 5) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass
class _Pending:
    """A simulation under way: its result, its budget (cancelled when nobody waits any more), who waits for it."""

    future: asyncio.Future[PreparedRun]
    budget: RunBudget
    task: asyncio.Task[None] | None = None
    waiters: int = 0
    queued: bool = True  # waiting for a slot (counted in RunCache._queued)
    started: bool = False


def release_freed_memory() -> None:
    """Give the heap pages free()d runs leave behind back to the OS (glibc keeps them; a dropped 150k-event run
    left ~180 MB of RSS without this, measured), so an idle server's RSS falls back."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class ExportCache:
    """Exports (report, trace, events) of cached runs, LRU, bounded in bytes, and how many are built at once
    (`slots`, with at most `max_queue` waiting: then Busy). A report of a 150k-event run costs seconds of CPU
    and tens of MB: built once, downloaded many times."""

    def __init__(self, max_bytes: int, slots: int, max_queue: int) -> None:
        self._items: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._bytes, self._max_bytes = 0, max_bytes
        self._slots_n, self._max_queue = slots, max_queue
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting = 0
        self.built = 0  # exports actually built (tests)

    async def get(self, key: tuple[str, str] | None, build: Callable[[], str]) -> str:
        """The export under `key` (None: not cacheable, e.g. a replay), built in a worker thread if missing."""
        if key is not None and key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        loop = asyncio.get_running_loop()
        if self._slots is None or self._loop is not loop:
            self._slots, self._loop = asyncio.Semaphore(self._slots_n), loop
        if self._slots.locked() and self._waiting >= self._max_queue:
            raise Busy(f"server busy: {self._slots_n} exports building and {self._waiting} waiting; retry shortly")
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        try:
            if key is not None and key in self._items:  # built by the request before this one
                return self._items[key]
            self.built += 1
            text = await asyncio.to_thread(build)
        finally:
            self._slots.release()
        if key is not None and len(text) <= self._max_bytes:
            self._items[key] = text
            self._bytes += len(text)
            while self._bytes > self._max_bytes:
                _, old = self._items.popitem(last=False)
                self._bytes -= len(old)
        return text


class RunCache:
    """Bounded LRU of prepared runs keyed by the spec's canonical JSON; concurrent loads share one simulation.

    Bounds: `max_concurrent` simulations at once (plus one slot of their own for presets as shipped, so a viewer
    opening a preset never waits behind custom runs), at most `max_queue` waiting for a slot (then Busy), each
    stopped past `max_run_events` events or `max_cpu_s` CPU seconds (layerscope.budget), and at most
    `max_memory_events` events held by the cache, the viewers and the simulations under way together (Busy when a
    new run cannot fit). A simulation nobody waits for any more is cancelled. Viewers `hold` the run they show: a
    custom run no viewer holds leaves the cache (presets stay, within `max_runs` and `max_events`)."""

    def __init__(
        self,
        simulator: Simulator,
        max_runs: int = 8,
        max_concurrent: int = 2,
        max_events: int = 500_000,
        *,
        max_queue: int = 8,
        max_run_events: int | None = None,
        max_cpu_s: float = math.inf,
        max_memory_events: int | None = None,
        disk: PreparedCache | None = None,
    ) -> None:
        self._simulate = simulator.simulate
        self.estimate_work = simulator.estimate_work
        self.topology = simulator.topology
        self._max = max_runs
        self._max_events = max_events  # runs hold their events as dicts: bound memory by events, not only runs
        self._max_queue, self._max_cpu_s = max_queue, max_cpu_s
        self._max_run_events = max_run_events or 10**12
        self._max_memory_events = max_memory_events or 10**12
        self._runs: OrderedDict[str, PreparedRun] = OrderedDict()
        self._presets: set[str] = set()  # keys of runs of presets as shipped: kept when nobody watches
        self._held: dict[str, tuple[PreparedRun, int]] = {}  # runs viewers show, with how many viewers
        self._pending: dict[str, _Pending] = {}
        self.disk = disk  # a preset's `loaded` text is written there once prepared
        self._max_concurrent = max_concurrent
        self._slots: asyncio.Semaphore | None = None
        self._preset_slot: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queued = 0
        self._running = 0
        self._closing = False
        self._trim: asyncio.TimerHandle | None = None
        self._trim_collect = False  # the pending trim collects (a run left the cache)
        self._preset_running = threading.Event()  # custom runs yield to it (RunBudget.yield_to)
        self._presets_simulating = 0
        self.simulations = 0  # how many times the engine actually ran (for tests and /api/debug)
        self.cancelled = 0  # simulations stopped because nobody waited for them any more

    def __len__(self) -> int:
        return len(self._runs)

    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._loop is not loop:  # a test client may run each request on a new loop
            self._loop, self._pending = loop, {}
            self._slots, self._preset_slot = asyncio.Semaphore(self._max_concurrent), asyncio.Semaphore(1)

    async def get(self, spec: ScenarioSpec, preset: bool = False) -> PreparedRun:
        """The prepared run of `spec`; `preset`: it is a preset as shipped (its own slot, kept in the cache)."""
        self._bind()
        key = spec.model_dump_json()
        if key in self._runs:
            self._runs.move_to_end(key)
            return self._runs[key]
        if key in self._held:
            return self._held[key][0]
        pending = self._pending.get(key) or self._start(key, spec, preset)
        pending.waiters += 1
        try:
            return await asyncio.shield(pending.future)
        finally:
            pending.waiters -= 1
            if pending.waiters == 0 and not pending.future.done():  # the last client waiting for it left
                self._cancel(pending)

    def cached(self, spec: ScenarioSpec) -> PreparedRun | None:
        """The prepared run of `spec` if it is in memory (cached or shown), else None; simulates nothing."""
        key = spec.model_dump_json()
        return self._runs.get(key) or (self._held[key][0] if key in self._held else None)

    def _start(self, key: str, spec: ScenarioSpec, preset: bool) -> _Pending:
        if self._closing:
            raise Busy("the server is shutting down")
        slots = self._preset_slot if preset else self._slots
        assert slots is not None
        if slots.locked() and self._queued >= self._max_queue:
            raise Busy(f"server busy: {len(self._pending)} runs simulating or waiting to; retry in a few seconds")
        self._queued += 1  # until it holds a slot
        budget = RunBudget(self._max_run_events, self._max_cpu_s, yield_to=None if preset else self._preset_running)
        pending = _Pending(asyncio.get_running_loop().create_future(), budget)
        pending.future.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: waiters re-raise it
        self._pending[key] = pending
        pending.task = asyncio.create_task(self._run(key, spec, preset, pending))
        pending.task.add_done_callback(lambda task: self._finished(key, pending, task))
        return pending

    def _cancel(self, pending: _Pending) -> None:
        pending.budget.cancel()  # a running simulation stops at its next check (runtime.budget.CHECK_EVERY steps)
        if not pending.started and pending.task is not None:
            pending.task.cancel()  # still queued for a slot: never starts

    async def _run(self, key: str, spec: ScenarioSpec, preset: bool, pending: _Pending) -> None:
        slots = self._preset_slot if preset else self._slots
        assert slots is not None
        async with slots:
            self._queued -= 1
            pending.queued = False
            if not preset:  # presets are few and small: a viewer opening one is never refused for memory
                self._make_room(self._running + 1)
            pending.started = True
            self.simulations += 1
            self._running += 1
            self._presets_simulating += preset
            if preset:
                self._preset_running.set()
            try:
                run = await asyncio.to_thread(self._simulate_and_prepare, spec, pending.budget)
            finally:
                self._running -= 1
                self._presets_simulating -= preset
                if not self._presets_simulating:
                    self._preset_running.clear()
        self._runs[key] = run
        if preset:
            self._presets.add(key)
        evicted = self._evict(keep=key)
        settle_heap(collect=evicted)
        pending.future.set_result(run)  # the waiters send `loaded` now, then wait for run.finished()
        await self._finish(spec, run, preset)

    async def _finish(self, spec: ScenarioSpec, run: PreparedRun, preset: bool) -> None:
        """The run's rest (runs.finish) in a worker thread, once its `loaded` is on its way; then the heap settled,
        and a preset's `loaded` gzipped for GET /api/loaded and its whole `loaded` written to disk in another."""
        try:
            await asyncio.to_thread(make_rest, run)
        except Exception as e:  # the run's failure: finished() re-raises it to each viewer
            run.done.set_exception(e)
            return
        settle_heap(collect=False)  # before the viewers go on: the new objects out of the collector's passes too
        run.done.set_result(None)
        if preset:  # gzip and write in a worker thread
            asyncio.get_running_loop().run_in_executor(None, self._store, spec, run)

    def _store(self, spec: ScenarioSpec, run: PreparedRun) -> None:
        """A preset's `loaded` gzipped once (what GET /api/loaded sends a warm server's pages), and its whole
        `loaded` written to disk (in a worker thread)."""
        run.loaded_gzip()
        if self.disk is not None:
            self.disk.put(spec, run.loaded_whole)

    def _finished(self, key: str, pending: _Pending, task: asyncio.Task[None]) -> None:
        """However the task ended (even cancelled before it ran): the bookkeeping, and an answer for the waiters."""
        if pending.queued:
            self._queued -= 1
            pending.queued = False
        if self._pending.get(key) is pending:
            del self._pending[key]
        error = Cancelled("the run was cancelled") if task.cancelled() else task.exception()
        if isinstance(error, Cancelled):
            self.cancelled += 1
        if error is not None and not pending.future.done():
            pending.future.set_exception(error if isinstance(error, Exception) else Cancelled("the run was cancelled"))

    def _simulate_and_prepare(self, spec: ScenarioSpec, budget: RunBudget) -> PreparedRun:
        budget.start()
        takes_check = "check" in inspect.signature(self._simulate).parameters  # test fakes take the spec alone
        result = self._simulate(spec, check=budget.check) if takes_check else self._simulate(spec)
        budget.check(len(result.events))  # a run shorter than one check interval is still bounded
        return prepare_first_screen(result)

    def _evict(self, keep: str) -> bool:
        evicted = False
        for key in list(self._runs):
            over = len(self._runs) > self._max or self.num_events > self._max_events
            if not over:
                break
            if key != keep:  # the newest run always stays, however large
                self._runs.pop(key)
                self._presets.discard(key)
                evicted = True
        return evicted

    def _make_room(self, simulations: int) -> None:
        """Room for `simulations` runs of up to max_run_events each beside what is held: drop cached runs nobody
        watches (oldest first), else refuse."""
        if self._max_memory_events >= 10**12:  # unbounded
            return
        need = simulations * min(self._max_run_events, self._max_memory_events)
        for key in list(self._runs):
            if self.memory_events + need <= self._max_memory_events:
                break
            if key not in self._held:
                self._runs.pop(key)
                self._presets.discard(key)
        if self.memory_events + need > self._max_memory_events:
            raise Busy(
                f"server busy: viewers hold {self.memory_events} events of runs and {simulations - 1} more runs are "
                f"simulating (at most {self._max_memory_events} events at once); retry when a viewer leaves",
                retry_after_s=10,
            )

    # -- what viewers hold ---------------------------------------------------------------------------------
    def hold(self, run: PreparedRun) -> None:
        key = run.spec.model_dump_json()
        self._held[key] = (run, self._held.get(key, (run, 0))[1] + 1)

    def release(self, run: PreparedRun) -> None:
        """A viewer stopped showing `run`: a custom run nobody shows any more leaves the cache, and its memory
        goes back to the OS."""
        key = run.spec.model_dump_json()
        held, count = self._held.get(key, (run, 0))
        if count > 1:
            self._held[key] = (held, count - 1)
            return
        self._held.pop(key, None)
        dropped = key in self._runs and key not in self._presets
        if dropped:
            self._runs.pop(key)
        self._schedule_trim(collect=dropped)

    def _schedule_trim(self, collect: bool) -> None:
        """Once the leaving viewer's session is gone too (it still holds the run now): collect what a dropped run
        left (`collect`; unfreezing first: settle_heap froze it, and a frozen cycle is never collected) and hand the
        freed heap back to the OS. Coalesced: one pass however many viewers leave at once. A viewer leaving a run the
        cache keeps (a preset) drops nothing worth a full collection: one over every cached run's objects held the
        event loop for 1-3 s (20 presets cached), every page opened meanwhile waiting (bench/README.md, "First
        screen, fourth round"); reference counting frees the session's own objects."""
        self._trim_collect = self._trim_collect or collect
        loop = self._loop
        if self._trim is not None or loop is None:
            return

        def trim() -> None:
            self._trim = None
            if self._trim_collect:
                settle_heap(collect=True)
            self._trim_collect = False
            with contextlib.suppress(RuntimeError):  # the loop's executor is gone: shutting down
                loop.run_in_executor(None, release_freed_memory)  # 40-90 ms under load: off the event loop

        self._trim = loop.call_later(TRIM_DELAY_S, trim)

    def hold_at_least(self, runs: int) -> None:
        """Keep at least this many runs (server/prewarm.py sizes the cache to the preset library)."""
        self._max = max(self._max, runs)

    @property
    def busy(self) -> bool:
        """Whether a simulation is running (server/prewarm.py waits for a visitor's to finish)."""
        return bool(self._pending)

    @property
    def num_events(self) -> int:
        return sum(r.num_streamed or len(r.events) for r in self._runs.values())

    @property
    def memory_events(self) -> int:
        """Events of every run alive: cached or shown (once each)."""
        alive = {**{k: r for k, (r, _) in self._held.items()}, **self._runs}
        return sum(r.num_events or len(r.events) for r in alive.values())

    def open(self) -> None:
        """Serving (again): an app whose lifespan starts after an earlier shutdown takes runs again."""
        self._closing = False

    def close(self) -> None:
        """Shutting down: cancel every simulation (each stops within a check interval) and take no new one."""
        self._closing = True
        for pending in list(self._pending.values()):
            self._cancel(pending)
