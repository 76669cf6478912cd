"""REST routes: scenarios, schemas, exports of the run on screen (trace, report, events), health, a debug counter."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel

from layerscope import scenario as scn
from layerscope.export import trace
from layerscope.export.events import to_jsonl
from layerscope.export.report import build_report
from layerscope.protocol import MAX_MESSAGE_BYTES, ExportRequest
from layerscope.schemas import all_schemas
from layerscope.server.load import CommandError, ServerBusy, SimulationFailed, load_run
from layerscope.server.runs import Busy

router = APIRouter()
NamePath = Annotated[str, Path(pattern=scn.NAME_RE.pattern, description="preset name (see /api/scenarios)")]
NameQuery = Annotated[str, Query(pattern=scn.NAME_RE.pattern, description="preset name (see /api/scenarios)")]


class ScenarioInfo(BaseModel):
    name: str
    title: str
    description: str


def _preset(name: str) -> scn.ScenarioSpec:
    try:
        return scn.load_preset(name)
    except scn.ScenarioError as e:
        if name in scn.preset_names():  # the file exists but is invalid: that is the server's fault
            raise HTTPException(500, f"preset {name!r} is invalid: {e}") from None
        raise HTTPException(404, f"unknown scenario {name!r}; presets: {', '.join(scn.preset_names())}") from None


def preset_files() -> tuple[str, tuple[tuple[str, int, int], ...]]:
    """What the preset list is read from: the scenarios folder, and each preset file's name, mtime (ns) and size
    (what scn.preset_names() globs and scn.load_preset() reads). 22 stat calls: well under a millisecond."""
    folder = scn.scenarios_dir()
    files = []
    for path in sorted(folder.glob("*.yaml")):
        with contextlib.suppress(OSError):  # removed meanwhile: not a preset any more
            st = path.stat()
            files.append((path.name, st.st_mtime_ns, st.st_size))
    return str(folder), tuple(files)


# The last answer of list_scenarios and the preset files it was read from: parsing and validating every preset's
# YAML took 46-62 ms a call (22 presets), on the page's critical path (controls.js asks for the list before the
# first screen); a file changed, added or removed changes the key, and the list is read again.
_listed: tuple[object, list[ScenarioInfo]] | None = None


@router.get("/api/scenarios", response_model=list[ScenarioInfo], tags=["scenarios"])
def list_scenarios() -> list[ScenarioInfo]:
    global _listed
    key = preset_files()
    if _listed is not None and _listed[0] == key:
        return list(_listed[1])
    out = []
    for name in scn.preset_names():
        try:
            spec = scn.load_preset(name)
        except scn.ScenarioError:
            continue  # a broken file must not hide the others
        out.append(ScenarioInfo(name=name, title=spec.title, description=spec.description))
    _listed = (key, out)
    return list(out)


@router.get("/api/scenarios/{name}", tags=["scenarios"])
def get_scenario(name: NamePath) -> dict[str, Any]:
    """The validated spec of one preset, with defaults filled in."""
    return _preset(name).model_dump(mode="json")


@router.get("/api/schema", tags=["schema"])
def get_schema(which: Literal["scenario", "events", "messages", "all"] = "scenario") -> dict[str, Any]:
    schemas = all_schemas()
    return schemas if which == "all" else schemas[which]


@router.get("/api/trace", tags=["export"], response_class=Response)
async def get_trace(request: Request, scenario: NameQuery) -> Response:
    """A preset's run, as it is, as a Perfetto / chrome://tracing JSON file (POST: the run on screen)."""
    return await _export(request, ExportRequest(scenario=_preset(scenario).name), "trace")


@router.get("/api/report", tags=["export"], response_class=Response)
async def get_report(request: Request, scenario: NameQuery) -> Response:
    """A preset's offline HTML report (Plotly embedded: opens with no network) (POST: the run on screen)."""
    return await _export(request, ExportRequest(scenario=_preset(scenario).name), "report")


@router.post("/api/trace", tags=["export"], response_class=Response)
async def post_trace(request: Request, body: ExportRequest) -> Response:
    """The run a `load` message with this body shows, as a Perfetto / chrome://tracing JSON file."""
    return await _export(request, body, "trace")


@router.post("/api/report", tags=["export"], response_class=Response)
async def post_report(request: Request, body: ExportRequest) -> Response:
    """The run a `load` message with this body shows, as the offline HTML report."""
    return await _export(request, body, "report")


@router.post("/api/events", tags=["export"], response_class=Response)
async def post_events(request: Request, body: ExportRequest) -> Response:
    """The run a `load` message with this body shows, as JSON lines: its `run` spec, then every event (what
    `layerscope run --events` writes; the dashboard replays it)."""
    return await _export(request, body, "events")


async def _export(request: Request, body: ExportRequest, what: str) -> Response:
    """The run a `load` of `body` plays (same cache, same work limit, same checks), exported off the event loop,
    as an attachment named after the scenario and what differs from its preset."""
    size = len(await request.body())
    if size > MAX_MESSAGE_BYTES and body.events is None:  # only a recording may be large, as on the websocket
        raise HTTPException(413, f"body of {size} bytes is over the {MAX_MESSAGE_BYTES}-byte limit without 'events'")
    try:
        run = await load_run(request.app.state.runs, request.app.state.settings, body)
        export, media_type, suffix = EXPORTS[what]
        key = (run.spec.model_dump_json(), what) if body.events is None else None  # replays are not cached
        try:
            text = await request.app.state.exports.get(key, lambda: export(run.result))
        except Busy as e:
            raise ServerBusy(str(e), e.retry_after_s) from None
    except ServerBusy as e:
        raise HTTPException(503, str(e), headers={"Retry-After": str(e.retry_after_s)}) from None
    except SimulationFailed as e:
        raise HTTPException(500, str(e)) from None
    except CommandError as e:
        loc = ["body", *(e.field.split(".") if e.field else [])]
        raise RequestValidationError([{"type": "value_error", "loc": loc, "msg": str(e), "input": None}]) from None
    disposition = f'attachment; filename="{export_name(run.spec)}.{suffix}"'
    return Response(text, media_type=media_type, headers={"Content-Disposition": disposition})


def export_name(spec: scn.ScenarioSpec) -> str:
    """`decode-pulses_gpu=h200_chunk_size=2048`: the scenario, then each setting that differs from its preset."""
    try:
        preset = scn.load_preset(spec.name).model_dump(mode="json") if spec.name in scn.preset_names() else {}
    except scn.ScenarioError:
        preset = {}
    mine = spec.model_dump(mode="json", exclude={"name", "title", "description", "tour"})
    parts = [spec.name] + [f"{k}={_short(v)}" for k, v in mine.items() if preset and preset.get(k) != v]
    return _UNSAFE.sub("-", "_".join(parts))[:MAX_NAME]


_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]")
MAX_NAME = 180  # file systems allow 255 bytes; the suffix follows


def _short(v: Any) -> str:
    if isinstance(v, list):  # faults, actions: their kinds
        kinds = (str(x.get("kind") or x.get("do") or "item") if isinstance(x, dict) else str(x) for x in v)
        return "+".join(kinds) or "none"
    if isinstance(v, dict):
        return str(v.get("label", "custom"))
    if v is None:
        return "none"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _report_html(result: Any) -> str:
    return build_report(result)


def _events_jsonl(result: Any) -> str:
    return to_jsonl(result)


def _trace_json(result: Any) -> str:
    return trace.to_json(result)


EXPORTS: dict[str, tuple[Callable[[Any], str], str, str]] = {  # what -> (exporter, media type, file suffix)
    "trace": (_trace_json, "application/json", "trace.json"),
    "report": (_report_html, "text/html", "report.html"),
    "events": (_events_jsonl, "application/x-ndjson", "events.jsonl"),
}


@router.get("/healthz", tags=["ops"])
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/api/debug/sessions", tags=["ops"])
async def debug_sessions(request: Request) -> dict[str, int]:
    """Live websocket sessions and their tasks, asyncio tasks in the server, the longest client queue,
    snapshots dropped for slow readers; simulations run and runs cached (leak and load checks); first screens
    served from the on-disk cache of prepared presets and files written there."""
    live, runs, disk = request.app.state.live, request.app.state.runs, request.app.state.prepared
    queues = [s.queue for s in live.open]
    return {
        "sessions": live.sessions,
        "tasks": live.tasks,
        "asyncio_tasks": len(asyncio.all_tasks()),
        "max_queue": max((len(q) for q in queues), default=0),
        "dropped_snapshots": sum(q.dropped_snapshots for q in queues),
        "simulations": runs.simulations,
        "cancelled_simulations": runs.cancelled,
        "cached_runs": len(runs),
        "memory_events": runs.memory_events,
        "exports_built": request.app.state.exports.built,
        "prepared_disk_hits": disk.hits if disk is not None else 0,
        "prepared_disk_written": disk.written if disk is not None else 0,
    }
