"""Every preset simulated and prepared when the server starts, so that a first visit finds its run in the cache.

    lifespan start ─▶ prewarm(runs, default first, then the library in order) ─▶ RunCache.get, one preset at a time

It starts START_DELAY_S after start-up and goes through the RunCache, so a visitor's load of the preset being
warmed waits on that same simulation, and one warm-up runs at a time (the cache's other simulation slot stays free
for visitors). A visitor's own simulation goes first: the warm-up waits while one runs, so the two do not take
turns on the interpreter's lock. A preset the server refuses (over max_sim_work) or that fails is logged and
skipped; the server works the same.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from layerscope import scenario as scn
from layerscope.protocol import RunRequest
from layerscope.server.load import check_work
from layerscope.server.runs import RunCache, Simulate, prepare

log = logging.getLogger("layerscope.server")
# the run cache holds every preset and this many runs besides (a visitor's own settings, replays)
CACHE_BEYOND_LIBRARY = 8
IDLE_POLL_S = 0.05  # how often a waiting warm-up checks whether a visitor's simulation has finished
# A page opened right after start-up simulates its own run without a warm-up beside it: the warm-up starts once
# the server has had no simulation to run for this long (the first page load's arrives well within it).
START_DELAY_S = 2.0


def hold_the_library(runs: RunCache) -> None:
    """Size the run cache to the preset library (the default 8 runs evicted presets of a 17-preset library, so a
    visit to each in turn simulated every one again)."""
    runs.hold_at_least(len(scn.preset_names()) + CACHE_BEYOND_LIBRARY)


async def start_prewarm(app: Any) -> asyncio.Task[int] | None:
    """From the app's lifespan: with app.state.prewarm, the process's one-off costs now (the real engine only),
    then every preset in the background; returns the background task to cancel at shutdown."""
    if not getattr(app.state, "prewarm", False):
        return None
    simulator = app.state.simulator
    if simulator.is_engine:
        await asyncio.to_thread(warm_process, simulator.simulate)
    s = app.state.settings
    return asyncio.create_task(prewarm(app.state.runs, s.default_scenario, s.max_sim_work))


def warm_process(simulate: Simulate) -> None:
    """What every process pays once, paid before the server answers: the claims table's probe run
    (claims.article_run) and its numerics figures for the default seed, the tour checks: one small run simulated
    and prepared (~1 s here; without it the first visitor's first screen waited for all of it)."""
    prepare(simulate(scn.ScenarioSpec(name="warm-up", prompt_len=512, chunk_size=256, decode_steps=4)))


def prewarm_order(names: list[str], default: str | None) -> list[str]:
    """The page's default preset first (the first page load asks for it), then the others in library order."""
    first = default if default in names else (names[0] if names else None)
    return ([first] if first else []) + [n for n in names if n != first]


async def prewarm(runs: RunCache, default: str | None, max_work: int) -> int:
    """Warm every preset; returns how many are now cached."""
    warmed = 0
    await asyncio.sleep(START_DELAY_S)
    for name in prewarm_order(scn.preset_names(), default):
        while runs.busy:
            await asyncio.sleep(IDLE_POLL_S)
        try:
            spec = scn.load_preset(name)
            check_work(runs.estimate_work, spec, RunRequest(scenario=name), max_work)
            await runs.get(spec, preset=True)  # a preset as shipped: its own slot, kept in the cache
            warmed += 1
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a preset that cannot be warmed is simulated on demand, as before
            log.warning("prewarm: %s skipped: %s", name, e)
    log.info("prewarm: %d presets cached", warmed)
    return warmed
