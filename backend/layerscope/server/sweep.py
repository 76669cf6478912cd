"""POST /api/sweep: a small grid of a preset run on the server, for the dashboard's sweep view.

The body names a preset, optional overrides and a grid {field: [values]}; the answer is what
`layerscope sweep ... --json` prints (layerscope.sweep.run_grid). The grid is bounded (points and the work of
each point, as a websocket `load` is) so no request can make the server compute without bound; one sweep runs
at a time per server, in a worker thread.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable
from itertools import product
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from starlette.concurrency import run_in_threadpool

from layerscope import scenario as scn
from layerscope.budget import Work
from layerscope.protocol import RunRequest
from layerscope.server.load import CommandError, check_work, refuse_client_traces, requested_spec
from layerscope.sweep import SweepCancelled, run_grid, run_points_until

router = APIRouter()
MAX_POINTS = 16  # grid points per request: a sweep of 16 timing-only runs takes seconds, not minutes
MAX_FIELDS = 3
MAX_VALUES = 8
Scalar = int | float | bool | str
FieldName = Annotated[str, StringConstraints(pattern=r"^[a-z_]+(\.[a-z_]+)?$", max_length=64)]


class SweepBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scenario: str = Field(..., pattern=scn.NAME_RE.pattern, max_length=64, description="preset name (/api/scenarios)")
    set: dict[FieldName, Scalar | None] = Field(
        default_factory=dict, max_length=32, description="overrides of every point"
    )
    grid: dict[FieldName, Annotated[list[Scalar | None], Field(min_length=1, max_length=MAX_VALUES)]] = Field(
        ..., min_length=1, max_length=MAX_FIELDS, description=f"field -> values; at most {MAX_POINTS} points in all"
    )


def refuse(field: str, message: str) -> HTTPException:
    """A 422 shaped like FastAPI's own validation errors, so the client reads one format."""
    return HTTPException(422, detail=[{"loc": ["body", *field.split(".")], "msg": message, "type": "value_error"}])


def check_grid(body: SweepBody, max_work: int, estimate: Callable[[scn.ScenarioSpec], Work]) -> scn.ScenarioSpec:
    """The preset with the body's overrides, every grid point's work bounded as a websocket `load` is (the compare
    run dropped, as the sweep does). A caller's mistake (an unknown preset or field, a bad override) is a 422
    naming the field; a point the scenario refuses (e.g. weights that do not fit) is left to run_grid, which keeps
    it in the answer with its error, as `layerscope sweep` does."""
    points = math.prod(len(v) for v in body.grid.values())
    if points > MAX_POINTS:
        raise refuse("grid", f"{points} points; this server runs at most {MAX_POINTS} per sweep")
    try:
        spec = requested_spec(RunRequest(scenario=body.scenario, set=dict(body.set)))
    except CommandError as e:
        raise refuse(e.field or "scenario", str(e)) from None
    keys = list(body.grid)
    for values in product(*body.grid.values()):
        req = RunRequest(scenario=body.scenario, set={**body.set, **dict(zip(keys, values, strict=True))})
        try:
            one = requested_spec(req).model_copy(update={"compare": None})
        except CommandError as e:
            if "unknown field" in str(e):
                raise refuse("grid", str(e)) from None
            continue  # refused by the scenario's own rules: run_grid reports it
        try:
            refuse_client_traces(req, one)  # the server opens no file a client names
            check_work(estimate, one, req, max_work)
        except CommandError as e:
            raise refuse("grid", f"the point {dict(zip(keys, values, strict=True))}: {e}") from None
    return spec


DISCONNECT_POLL_S = 0.2  # how often a running sweep asks whether its client is still there


async def stop_when_gone(request: Request, stop: threading.Event) -> None:
    """Set `stop` once the client disconnects (or the sweep ends and sets it itself)."""
    while not stop.is_set():
        if await request.is_disconnected():
            stop.set()
            return
        await asyncio.sleep(DISCONNECT_POLL_S)


def sweep_lock(state: Any) -> asyncio.Lock:
    """One sweep (or break-even, server/breakeven.py) at a time per app: each point is a CPU-bound simulation."""
    if getattr(state, "sweep_lock", None) is None:
        state.sweep_lock = asyncio.Lock()
    return state.sweep_lock


@router.post("/api/sweep", tags=["sweep"])
async def post_sweep(request: Request, body: SweepBody) -> dict[str, Any]:
    """Run a small grid of a preset (timing only) and answer `layerscope sweep --json`'s object."""
    state = request.app.state
    spec = check_grid(body, state.settings.max_sim_work, state.runs.estimate_work)
    lock = sweep_lock(state)
    if lock.locked():  # no queue behind it: a client that gave up would still hold its place
        raise HTTPException(503, "server busy: a sweep is running; retry shortly", headers={"Retry-After": "5"})
    async with lock:
        stop = threading.Event()
        watcher = asyncio.create_task(stop_when_gone(request, stop))
        try:
            result = await run_in_threadpool(run_grid, spec, {k: list(v) for k, v in body.grid.items()}, 1,
                                             None, run_points_until(stop))
        except ValueError as e:  # the engine refuses a combination the schema allows (e.g. weights do not fit)
            raise refuse("grid", f"cannot simulate this grid: {e}") from None
        except SweepCancelled:  # nobody reads the answer; the lock is free for the next sweep
            raise HTTPException(499, "the client closed the request; the sweep was stopped") from None
        finally:
            stop.set()
            watcher.cancel()
    # the figure a one-request scenario's sweep draws (the panel's y axis); a serving sweep draws its Pareto front
    return {**result, "metric": spec.sweep.metric if spec.sweep is not None else None}
