"""FastAPI app factory: routers for pages, REST and the websocket; settings and the run cache on app.state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from layerscope import __version__
from layerscope.paths import frontend_dir
from layerscope.protocol import MAX_REPLAY_BYTES
from layerscope.server import api, pages, sweep, ws
from layerscope.server.prewarm import hold_the_library, start_prewarm
from layerscope.server.runs import RunCache, Simulate, default_simulate
from layerscope.server.security import BodyLimit, SecurityHeaders
from layerscope.server.settings import Settings


def create_app(settings: Settings | None = None, simulate: Simulate | None = None, prewarm: bool = False) -> FastAPI:
    """`simulate` defaults to the engine; tests pass a fake to exercise the server alone. `prewarm`: every preset
    simulated from start-up (server/prewarm.py; `layerscope serve --prewarm`)."""
    settings = settings or Settings()
    app = FastAPI(
        title="LayerScope",
        version=__version__,
        description="Live view of one decoder layer during prefill and decode. Websocket protocol: docs/protocol.md.",
        lifespan=_lifespan,
    )
    app.state.settings = settings
    app.state.runs = RunCache(
        simulate or default_simulate, settings.cache_runs, settings.max_concurrent_sims, settings.cache_events
    )
    hold_the_library(app.state.runs)
    app.state.prewarm = prewarm
    app.state.real_engine = simulate is None
    app.state.live = ws.LiveCounter()
    app.state.templates = Jinja2Templates(directory=str(frontend_dir() / "templates"))
    app.add_middleware(BodyLimit, max_bytes=MAX_REPLAY_BYTES)  # the largest body: a recording to export
    app.add_middleware(SecurityHeaders)
    app.include_router(pages.router)
    app.include_router(api.router)
    app.include_router(sweep.router)
    app.include_router(ws.router)
    app.mount("/static", StaticFiles(directory=str(frontend_dir() / "static")), name="static")
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    warming = await start_prewarm(app)  # None unless create_app(prewarm=True)
    yield
    if warming is not None:
        warming.cancel()
