"""The dashboard page and its vendored Plotly.js (served from the installed plotly package: no CDN)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse

from layerscope import scenario as scn
from layerscope.model.config import NUMERIC_PRESETS, PRESETS

router = APIRouter()
THEMES = ("dark", "light")  # the dashboard's themes (frontend/static/js/palette.js), chosen with ?theme=


def plotly_js() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def form_options() -> dict[str, Any]:
    """Choices of the settings form, straight from the scenario schema's literals."""
    return {
        "models": [m for m in PRESETS if m not in NUMERIC_PRESETS],
        "gpus": list(get_args(scn.GpuName)),
        "runtimes": list(get_args(scn.Runtime)),
        "allocators": list(get_args(scn.AllocatorPolicy)),
        "faults": list(get_args(scn.FaultKind)),
    }


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index(request: Request) -> HTMLResponse:
    settings = request.app.state.settings
    names = scn.preset_names()
    default = settings.default_scenario or (names[0] if names else "")
    theme = request.query_params.get("theme", "dark")  # the page says so if it is neither (main.js)
    return request.app.state.templates.TemplateResponse(
        request,
        "index.html",
        {"default_scenario": default, "options": form_options(), "theme": theme if theme in THEMES else "dark"},
    )


@router.get("/vendor/plotly.min.js", include_in_schema=False)
def vendor_plotly() -> FileResponse:
    path = plotly_js()
    if not path.is_file():
        raise HTTPException(500, "plotly.min.js missing from the installed plotly package")
    return FileResponse(path, media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"})
