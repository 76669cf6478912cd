"""FastAPI app factory: routers for pages, REST and the websocket; settings and the run cache on app.state."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from layerscope import __version__
from layerscope import scenario as scn
from layerscope.paths import frontend_dir
from layerscope.protocol import MAX_REPLAY_BYTES
from layerscope.server import api, pages, sweep, ws
from layerscope.server.prewarm import prewarm as prewarm_presets
from layerscope.server.prewarm import warm_process
from layerscope.server.runs import RunCache, Simulate, default_simulate
from layerscope.server.security import BodyLimit, SecurityHeaders
from layerscope.server.settings import Settings

# the run cache holds every preset (warmed at start) and this many runs besides (a visitor's settings, replays)
CACHE_BEYOND_LIBRARY = 8


def create_app(settings: Settings | None = None, simulate: Simulate | None = None, prewarm: bool = False) -> FastAPI:
    """`simulate` defaults to the engine; tests pass a fake to exercise the server alone. `prewarm`: simulate every
    preset in the background from start-up (server/prewarm.py; `layerscope serve` does)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = None
        if prewarm and simulate is None:  # the real engine: its one-off costs before the first page asks
            await asyncio.to_thread(warm_process)
        if prewarm:
            task = asyncio.create_task(prewarm_presets(app.state.runs, settings.default_scenario,
                                                       settings.max_sim_work))
        yield
        if task is not None:
            task.cancel()

    app = FastAPI(
        lifespan=lifespan,
        title="LayerScope",
        version=__version__,
        description="Live view of one decoder layer during prefill and decode. Websocket protocol: docs/protocol.md.",
    )
    app.state.settings = settings
    app.state.runs = RunCache(
        simulate or default_simulate, max(settings.cache_runs, len(scn.preset_names()) + CACHE_BEYOND_LIBRARY),
        settings.max_concurrent_sims, settings.cache_events
    )
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
