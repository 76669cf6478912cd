"""POST /api/breakeven: the sweep panel's break-even view run on the server (issue 21).

The body names a preset (with optional overrides) that has a compare run, and input lengths x request rates; the
answer is `layerscope plan --break-even --json`'s object (sizing.break_even_cells): at every cell the goodput per
GPU of the preset's main run (A) and of its compare run (B) at the preset's SLOs (`goodput`), the winner and the
margin. Bounded as POST /api/sweep is: at most MAX_CELLS cells (two runs each), every run's work
checked before any runs, one sweep or break-even at a time (the same lock: 503 "busy, retry"), in a worker thread,
stopped when its client leaves.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from layerscope import scenario as scn
from layerscope.protocol import RunRequest
from layerscope.server.load import CommandError, check_work, requested_spec
from layerscope.server.sweep import MAX_POINTS, FieldName, Scalar, refuse, stop_when_gone, sweep_lock
from layerscope.sizing import Summarize, break_even_cells, deployment_label
from layerscope.strict import MAX_PROMPT_LEN
from layerscope.sweep import SweepCancelled, run_point

router = APIRouter()
MAX_CELLS = MAX_POINTS // 2  # two runs a cell: as many runs as a sweep's points
MAX_AXIS = 4  # values of each axis: 4 x 4 would be 32 runs, past the cells' bound anyway
MAX_RATE = 1000.0  # requests/s: past it every arrival is at once, which request_rate inf says already
MAX_SLO_MS = 3.6e6  # an hour: any SLO past it is no SLO


class BreakEvenBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scenario: str = Field(..., pattern=scn.NAME_RE.pattern, max_length=64,
                          description="preset name (/api/scenarios) with a compare run and goodput SLOs")
    set: dict[FieldName, Scalar | None] = Field(default_factory=dict, max_length=32,
                                                description="overrides of both runs at every cell")
    input_lens: list[Annotated[int, Field(ge=1, le=MAX_PROMPT_LEN)]] = Field(
        ..., min_length=1, max_length=MAX_AXIS, description="prompt lengths (tokens), the view's rows")
    request_rates: list[Annotated[float, Field(gt=0.0, le=MAX_RATE)]] = Field(
        ..., min_length=1, max_length=MAX_AXIS, description="request rates (req/s), the view's columns")
    slo: dict[Literal["ttft", "tpot", "e2el"], Annotated[float, Field(gt=0.0, le=MAX_SLO_MS)]] | None = Field(
        None, min_length=1, description="SLOs in ms (vllm bench serve --goodput); default: the preset's goodput")


def check_break_even(body: BreakEvenBody, max_work: int, estimate: Any) -> tuple[tuple[str, scn.ScenarioSpec],
                                                                                 tuple[str, scn.ScenarioSpec]]:
    """The two labelled runs (A: the preset, B: its compare run), every cell's work bounded; 422 naming the field."""
    cells = len(body.input_lens) * len(body.request_rates)
    if cells > MAX_CELLS:
        raise refuse("input_lens", f"{cells} cells ({2 * cells} runs); this server runs at most "
                      f"{MAX_CELLS} per break-even")
    req = RunRequest(scenario=body.scenario, set=dict(body.set))
    try:
        spec = requested_spec(req)
    except CommandError as e:
        raise refuse(e.field or "scenario", str(e)) from None
    if spec.workload is None:
        raise refuse("scenario", f"{body.scenario} runs one request: the break-even view needs a workload")
    if spec.compare is None:
        raise refuse("scenario", f"{body.scenario} has no compare run: the break-even view sets its main run "
                      "against its compare run")
    slos = body.slo or spec.goodput
    if not slos:
        raise refuse("slo", f"{body.scenario} names no goodput SLOs: give slo, e.g. {{\"ttft\": 1500, \"tpot\": 40}}")
    try:
        main = spec.with_overrides({"compare": None, "goodput": dict(slos)})
        other = scn.apply_overrides(main, dict(spec.compare.set), "compare.set")
        a, b = deployment_label(main), deployment_label(other)
        a = a if a != b else scn.main_label(spec)
        runs = ((a if a != spec.compare.label else f"{a} (main)", main), (spec.compare.label, other))
        for _, run in runs:
            for n in body.input_lens:
                for rate in body.request_rates:
                    one = run.with_overrides({"workload.input_len": n, "workload.request_rate": rate})
                    check_work(estimate, one, req, max_work)
    except CommandError as e:
        raise refuse("input_lens", str(e)) from None
    except (scn.ScenarioError, ValueError) as e:
        raise refuse("input_lens", f"cannot run this grid: {e}") from None
    return runs


def _summaries_until(stop: threading.Event) -> Summarize:
    """One run's summary, stopped at the next engine check once `stop` is set (the client left)."""

    def check(_events: int) -> None:
        if stop.is_set():
            raise SweepCancelled("the break-even's client left")

    def summarize(spec: scn.ScenarioSpec) -> dict[str, Any]:
        check(0)
        return run_point(spec.model_dump_json(), check)

    return summarize


@router.post("/api/breakeven", tags=["sweep"])
async def post_break_even(request: Request, body: BreakEvenBody) -> dict[str, Any]:
    """Run the break-even grid of a preset's main run against its compare run; answer `plan --break-even --json`'s
    object, plus the scenario's name."""
    state = request.app.state
    runs = check_break_even(body, state.settings.max_sim_work, state.runs.estimate_work)
    lock = sweep_lock(state)
    if lock.locked():
        raise HTTPException(503, "server busy: a sweep is running; retry shortly", headers={"Retry-After": "5"})
    async with lock:
        stop = threading.Event()
        watcher = asyncio.create_task(stop_when_gone(request, stop))
        try:
            result = await run_in_threadpool(break_even_cells, runs, list(body.input_lens),
                                             list(body.request_rates), _summaries_until(stop))
        except SweepCancelled:
            raise HTTPException(499, "the client closed the request; the break-even was stopped") from None
        except ValueError as e:
            raise refuse("input_lens", f"cannot simulate this grid: {e}") from None
        finally:
            stop.set()
            watcher.cancel()
    return {**result, "scenario": body.scenario}
