"""The dashboard page and its vendored Plotly.js (frontend/static/vendor: the cartesian partial bundle; no CDN)."""

from __future__ import annotations

import asyncio
import gzip
from functools import cache
from pathlib import Path
from typing import Annotated, Any, get_args

from fastapi import APIRouter, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, Response

from layerscope import scenario as scn
from layerscope.model.config import NUMERIC_PRESETS, PRESETS
from layerscope.paths import frontend_dir
from layerscope.protocol import RunRequest
from layerscope.server.load import CommandError, ServerBusy, SimulationFailed, load_run, loaded_from_disk

router = APIRouter()
THEMES = ("dark", "light")  # the dashboard's themes (frontend/static/js/palette.js), chosen with ?theme=


def plotly_js() -> Path:
    """The dashboard's Plotly.js: the cartesian partial bundle (scatter, bar, heatmap and kin), 1.5 MB instead of
    the full 4.8 MB, vendored with its licence (frontend/static/vendor/README.md)."""
    return frontend_dir() / "static" / "vendor" / "plotly-cartesian.min.js"


@cache
def _plotly_bytes(gzipped: bool) -> bytes:
    """The script as sent, read (and gzip-compressed: 0.5 MB) once per process."""
    raw = plotly_js().read_bytes()
    return gzip.compress(raw, compresslevel=6, mtime=0) if gzipped else raw


@cache
def module_urls() -> tuple[str, ...]:
    """Every ES module of the dashboard, for <link rel=modulepreload>: the browser fetches the whole module graph at
    once instead of one level of imports after another (bench/README.md, "First screen")."""
    js = frontend_dir() / "static" / "js"
    return tuple(f"/static/js/{p.relative_to(js).as_posix()}" for p in sorted(js.rglob("*.js")) if p.name != "main.js")


def form_options() -> dict[str, Any]:
    """Choices of the settings form, straight from the scenario schema's literals."""
    return {
        "models": [m for m in PRESETS if m not in NUMERIC_PRESETS],
        "gpus": list(get_args(scn.GpuName)),
        "runtimes": list(get_args(scn.Runtime)),
        "allocators": list(get_args(scn.AllocatorPolicy)),
        "faults": list(get_args(scn.FaultKind)),
    }


# Query keys of a link that still shows a preset as shipped (the view's theme, units and moment): its first run can
# be preloaded over HTTP. Any other key (a setting) makes another run, asked for over the websocket.
AS_SHIPPED_KEYS = frozenset({"scenario", "theme", "units", "t", "x0", "x1", "step", "kernel"})


def preloaded_preset(query: dict[str, str], names: list[str], default: str) -> str | None:
    """The preset whose `loaded` message the page preloads (GET /api/loaded/NAME, fetched beside the scripts
    instead of after them and a websocket round: bench/README.md, "First screen, fourth round"), or None."""
    name = query.get("scenario", default)
    return name if name in names and set(query) <= AS_SHIPPED_KEYS else None


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index(request: Request) -> HTMLResponse:
    settings = request.app.state.settings
    names = scn.preset_names()
    default = settings.default_scenario or (names[0] if names else "")
    theme = request.query_params.get("theme", "dark")  # the page says so if it is neither (main.js)
    return request.app.state.templates.TemplateResponse(
        request,
        "index.html",
        {"default_scenario": default, "options": form_options(), "theme": theme if theme in THEMES else "dark",
          "modules": module_urls(), "presets": names,
          "preload": preloaded_preset(dict(request.query_params), names, default)},
    )


@router.get("/api/loaded/{name}", tags=["scenarios"])
async def preset_loaded(request: Request, name: Annotated[str, PathParam(pattern=scn.NAME_RE.pattern)]) -> Response:
    """The `loaded` message (docs/protocol.md) of a preset as shipped, the same text a websocket `load` of it is
    answered with: the page fetches it while its scripts arrive, then sends `load` with `loaded: false`."""
    if name not in scn.preset_names():
        raise HTTPException(404, f"unknown scenario {name!r}; presets: {', '.join(scn.preset_names())}")
    stored = await loaded_from_disk(request.app.state.runs, request.app.state.settings, RunRequest(scenario=name))
    if stored is not None:
        gz, text = stored
        headers = {"Cache-Control": "no-store", "Vary": "Accept-Encoding"}
        if "gzip" in request.headers.get("accept-encoding", ""):  # the file as it is: 1.7 MB instead of 11 MB
            return Response(gz, media_type="application/json", headers={**headers, "Content-Encoding": "gzip"})
        return Response(text, media_type="application/json", headers=headers)
    try:
        run = await load_run(request.app.state.runs, request.app.state.settings, RunRequest(scenario=name))
    except ServerBusy as e:
        raise HTTPException(503, str(e), headers={"Retry-After": str(e.retry_after_s)}) from None
    except SimulationFailed as e:
        raise HTTPException(500, str(e)) from None
    except CommandError as e:
        raise HTTPException(422, str(e)) from None
    headers = {"Cache-Control": "no-store", "Vary": "Accept-Encoding"}
    if "gzip" in request.headers.get("accept-encoding", ""):  # made once per run, in a worker thread
        packed = run.loaded_gz or await asyncio.to_thread(run.loaded_gzip)
        return Response(packed, media_type="application/json", headers={**headers, "Content-Encoding": "gzip"})
    return Response(run.loaded.text, media_type="application/json", headers=headers)


@router.get("/vendor/plotly.min.js", include_in_schema=False)
def vendor_plotly(request: Request) -> Response:
    if not plotly_js().is_file():
        raise HTTPException(500, "plotly-cartesian.min.js missing from frontend/static/vendor")
    gzipped = "gzip" in request.headers.get("accept-encoding", "")
    headers = {"Cache-Control": "public, max-age=86400", "Vary": "Accept-Encoding"}
    if gzipped:
        headers["Content-Encoding"] = "gzip"
    return Response(_plotly_bytes(gzipped), media_type="text/javascript", headers=headers)
