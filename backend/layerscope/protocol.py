"""Websocket messages between the dashboard and the server (documented in docs/protocol.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from layerscope.events import Phase

MAX_MESSAGE_BYTES = 64 * 1024  # a client message above this is refused
MAX_REPLAY_BYTES = 16 * 1024 * 1024  # ... except a `load` carrying recorded `events`, up to this
MAX_REPLAY_EVENTS = 200_000
MAX_SPEED = 1e6
PROTOCOL_VERSION = 2  # 2: frames carry kernels as StreamedKernel, no longer the whole KernelEvent


class _Command(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunRequest(_Command):
    """Which run: a preset with overrides, an inline spec, or a recording to replay. The `load` command, and the
    body of the export routes (`POST /api/trace`, `/api/report`, `/api/events`), so a download is the run on screen."""

    scenario: str | None = Field(None, max_length=64, description="a preset name")
    spec: dict[str, Any] | None = Field(None, description="an inline scenario spec")
    set: dict[str, Any] = Field(default_factory=dict, description="field overrides")
    events: list[dict[str, Any]] | None = Field(
        None,
        min_length=1,
        max_length=MAX_REPLAY_EVENTS,
        description="a recorded event stream (`layerscope run --events`) to replay instead of simulating. Its first "
        "line (`run`) holds the spec it was simulated from: with neither `scenario` nor `spec` that spec is replayed; "
        "with one, it must be the same run. A recording without that line needs `scenario` or `spec`",
    )


class LoadCommand(RunRequest):
    type: Literal["load"]
    loaded: bool = Field(
        True,
        description="false: the client has this run's `loaded` message already (a preset as shipped, from GET "
        "/api/loaded/NAME, which the page preloads beside its scripts): the answer is `state` alone",
    )


class ExportRequest(RunRequest):
    """The body of the export routes: a `load` message, `type` optional."""

    type: Literal["load"] | None = None


class PlayCommand(_Command):
    type: Literal["play"]
    speed: float | None = Field(None, gt=0.0, le=MAX_SPEED)


class PauseCommand(_Command):
    type: Literal["pause"]


class StepCommand(_Command):
    type: Literal["step"]


class SeekCommand(_Command):
    type: Literal["seek"]
    t_us: float = Field(..., ge=0.0, le=1e12)


class SpeedCommand(_Command):
    type: Literal["speed"]
    speed: float = Field(..., gt=0.0, le=MAX_SPEED)


Command = Annotated[
    LoadCommand | PlayCommand | PauseCommand | StepCommand | SeekCommand | SpeedCommand,
    Field(discriminator="type"),
]
COMMAND_ADAPTER: TypeAdapter[Any] = TypeAdapter(Command)


class DetailsMessage(BaseModel):
    """What the first screen does not draw, sent after `loaded` once the server has made it (the claims panel and
    the tour show "computing…" until then): the claims table, the tour's checks, the compare run's claims. Playback
    starts after it: a `play` or `seek` sent earlier waits for it."""

    type: Literal["details"] = "details"
    claims: list[dict[str, Any]] = Field(default_factory=list, description="layerscope.claims, this run's")
    tour_results: list[dict[str, Any]] = Field(
        default_factory=list, description="each tour step's check against this run (layerscope.tour.tour_results)"
    )
    compare_claims: list[dict[str, Any]] | None = Field(
        None, description="the compare run's claims (the claims panel's column B); null without a compare run"
    )


class LoadedMessage(BaseModel):
    type: Literal["loaded"] = "loaded"
    scenario: dict[str, Any]
    topology: dict[str, Any]
    duration_us: float
    num_events: int
    compare: dict[str, Any] | None = Field(None, description="the compare run, its claims in `details`")
    claims: list[dict[str, Any]] = Field(default_factory=list, description="empty: `details` carries them")
    tour_results: list[dict[str, Any]] = Field(default_factory=list, description="empty: `details` carries them")
    overview: dict[str, Any] | None = Field(
        None, description="the whole run and its compare run as column tables (layerscope.server.overview)"
    )
    details: DetailsMessage | None = Field(
        None, description="the details already (GET /api/loaded of a run prepared whole, the disk cache); a "
        "websocket `load` sends them as a message of their own after `loaded`"
    )


class StreamedKernel(BaseModel):
    """A kernel launch as frames carry it: what the dashboard's streamed state needs (store.kernels, the phase now,
    the topology's stage running now). The whole record (events.KernelEvent: name, flops, bytes, bound, shapes, ...)
    is row `row` of loaded.overview.runs[0].tables.kernel; recordings and exports (`layerscope run --events`,
    POST /api/events, the Perfetto trace) carry it whole. Values are the KernelEvent's own, unrounded."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["kernel"] = "kernel"
    t_us: float = Field(..., description="launch time (the KernelEvent's t_us == start_us), simulated µs")
    stage: str
    phase: Phase
    dur_us: float
    row: int = Field(..., ge=0, description="the launch's row in loaded.overview.runs[0].tables.kernel")


class FrameMessage(BaseModel):
    type: Literal["frame"] = "frame"
    seq: int
    t_us: float
    events: list[dict[str, Any]] = Field(
        ..., description="events in time order, as events.py defines them, except kernels: StreamedKernel records"
    )
    dropped_snapshots: int = 0  # grid/memory snapshots this client lost because it read slowly
    reset: bool = False
    created_ms: float | None = None  # server wall clock (ms since the epoch) when the frame was made: delay checks


class EndMessage(BaseModel):
    type: Literal["end"] = "end"
    summary: dict[str, Any]


class StateMessage(BaseModel):
    type: Literal["state"] = "state"
    playing: bool
    speed: float
    t_us: float


class ErrorMessage(BaseModel):
    type: Literal["error"] = "error"
    message: str
    field: str | None = None


ServerMessage = LoadedMessage | DetailsMessage | FrameMessage | EndMessage | StateMessage | ErrorMessage
