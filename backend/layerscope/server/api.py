"""REST routes: scenarios, schemas, Perfetto trace download, health, and a debug counter for tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from layerscope import scenario as scn
from layerscope.schemas import all_schemas

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


@router.get("/api/scenarios", response_model=list[ScenarioInfo], tags=["scenarios"])
def list_scenarios() -> list[ScenarioInfo]:
    out = []
    for name in scn.preset_names():
        try:
            spec = scn.load_preset(name)
        except scn.ScenarioError:
            continue  # a broken file must not hide the others
        out.append(ScenarioInfo(name=name, title=spec.title, description=spec.description))
    return out


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
    """The run as a Perfetto / chrome://tracing JSON file."""
    return await _download(request, scenario, _trace_json, "application/json", "trace.json")


@router.get("/api/report", tags=["export"], response_class=Response)
async def get_report(request: Request, scenario: NameQuery) -> Response:
    """The offline HTML report of a preset (Plotly embedded: opens with no network), as a download."""
    return await _download(request, scenario, _report_html, "text/html", "report.html")


async def _download(
    request: Request, scenario: str, export: Callable[[Any], str], media_type: str, suffix: str
) -> Response:
    """A preset's (cached) run exported off the event loop, as an attachment named after the preset."""
    spec = _preset(scenario)
    run = await request.app.state.runs.get(spec)
    body = await run_in_threadpool(export, run.result)
    return Response(
        body, media_type=media_type, headers={"Content-Disposition": f'attachment; filename="{spec.name}.{suffix}"'}
    )


def _report_html(result: Any) -> str:
    from layerscope.export.report import build_report

    return build_report(result)


def _trace_json(result: Any) -> str:
    from layerscope.export import trace  # imported late: tests of the REST layer need no exporter

    return trace.to_json(result)


@router.get("/healthz", tags=["ops"])
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/api/debug/sessions", tags=["ops"])
async def debug_sessions(request: Request) -> dict[str, int]:
    """Live websocket sessions and their tasks, asyncio tasks in the server, the longest client queue,
    snapshots dropped for slow readers; simulations run and runs cached (leak and load checks)."""
    live, runs = request.app.state.live, request.app.state.runs
    queues = [s.queue for s in live.open]
    return {
        "sessions": live.sessions,
        "tasks": live.tasks,
        "asyncio_tasks": len(asyncio.all_tasks()),
        "max_queue": max((len(q) for q in queues), default=0),
        "dropped_snapshots": sum(q.dropped_snapshots for q in queues),
        "simulations": runs.simulations,
        "cached_runs": len(runs),
    }
