"""FastAPI app factory: routers for pages, REST and the websocket; settings and the run cache on app.state."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from layerscope import __version__
from layerscope.paths import frontend_dir
from layerscope.protocol import MAX_REPLAY_BYTES
from layerscope.server import api, breakeven, pages, sweep, ws
from layerscope.server.diskcache import PreparedCache
from layerscope.server.load import scrub
from layerscope.server.prewarm import hold_the_library, start_prewarm
from layerscope.server.runs import ExportCache, RunCache, Simulator
from layerscope.server.security import BodyLimit, RequestGuard, SecurityHeaders
from layerscope.server.settings import Settings

log = logging.getLogger("layerscope.server")
EXPORT_GETS = ("/api/report", "/api/trace")  # downloads a link can start: refused when another site starts them


def create_app(simulator: Simulator, settings: Settings | None = None, prewarm: bool = False) -> FastAPI:
    """`simulator`: what the server needs of the engine, handed in by the command that starts it
    (commands/serve.py build_app; tests hand it a fake simulate). `prewarm`: every preset simulated from start-up
    (server/prewarm.py; `layerscope serve --prewarm`)."""
    settings = settings or Settings()
    app = FastAPI(
        title="LayerScope",
        version=__version__,
        description="Live view of one decoder layer during prefill and decode. Websocket protocol: docs/protocol.md.",
        lifespan=_lifespan,
    )
    app.state.settings = settings
    app.state.simulator = simulator
    app.state.prepared = prepared_cache(simulator, settings)
    app.state.runs = RunCache(
        simulator,
        settings.cache_runs,
        settings.max_concurrent_sims,
        settings.cache_events,
        max_queue=settings.max_queue,
        max_run_events=settings.max_run_events,
        max_cpu_s=settings.max_run_cpu_s,
        max_memory_events=settings.max_memory_events,
        disk=app.state.prepared,
    )
    app.state.exports = ExportCache(
        settings.export_cache_bytes, settings.max_concurrent_exports, settings.max_export_queue
    )
    hold_the_library(app.state.runs)
    app.state.prewarm = prewarm
    app.state.live = ws.LiveCounter()
    app.state.templates = Jinja2Templates(directory=str(frontend_dir() / "templates"))
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _internal_error)
    app.add_middleware(BodyLimit, max_bytes=MAX_REPLAY_BYTES)  # the largest body: a recording to export
    app.add_middleware(RequestGuard, settings=settings, guarded_gets=EXPORT_GETS)  # before any body is read
    app.add_middleware(SecurityHeaders)  # outermost: refusals carry the headers too
    app.include_router(pages.router)
    app.include_router(api.router)
    app.include_router(sweep.router)
    app.include_router(breakeven.router)
    app.include_router(ws.router)
    app.mount("/static", StaticFiles(directory=str(frontend_dir() / "static")), name="static")
    return app


def prepared_cache(simulator: Simulator, settings: Settings) -> PreparedCache | None:
    """The on-disk cache of prepared presets, if the settings name a folder; keyed by the simulator's name too."""
    if not settings.prepared_cache_dir:
        return None
    sim = simulator.simulate
    name = f"{getattr(sim, '__module__', '')}.{getattr(sim, '__qualname__', type(sim).__qualname__)}"
    return PreparedCache(Path(settings.prepared_cache_dir), name, settings.prepared_cache_bytes)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.runs.open()  # a lifespan after a shutdown (an ASGI test client per call) serves again
    warming = await start_prewarm(app)  # None unless create_app(prewarm=True)
    yield
    if warming is not None:
        warming.cancel()
    app.state.runs.close()  # shutting down: every simulation stops at its next check, so the process can exit


def _clean(value: Any) -> str:
    return scrub(str(value))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """422 naming each field, without echoing the input (a NaN or a lone surrogate there cannot be JSON)."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    detail = [{"type": _clean(e.get("type", "")), "loc": [_clean(p) for p in e.get("loc", ())],
               "msg": _clean(e.get("msg", ""))} for e in errors]
    return JSONResponse({"detail": detail}, status_code=422)


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    log.error("internal error on %s", request.url.path, exc_info=exc)
    return JSONResponse({"detail": f"internal error ({type(exc).__name__}), in the server's log"}, status_code=500)
