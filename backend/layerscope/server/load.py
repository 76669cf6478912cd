"""From a run request (the websocket `load`, the body of the export routes) to a prepared run, with one set of rules:

    RunRequest ─▶ spec: a preset + `set`, an inline `spec`, or a recording's own `run` line
               ─▶ simulated through the RunCache (work bounded by Settings.max_sim_work)
                  or replayed from `events` (not cached; a recording of another run is refused)

Every refusal is a CommandError naming the field, so the websocket sends an `error` and HTTP answers 422.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from layerscope import scenario as scn
from layerscope.budget import BudgetExceeded, Cancelled, Work
from layerscope.events import ChunkEvent, RunEvent, SummaryEvent
from layerscope.protocol import RunRequest
from layerscope.server.runs import Busy, PreparedRun, ReplayError, RunCache, parse_recording, replay_run
from layerscope.server.settings import Settings

log = logging.getLogger("layerscope.server")
NOT_SETTINGS = {"name", "title", "description", "tour", "sweep"}  # words about a run, not what makes it
MAX_DIFFS_SHOWN = 4


class CommandError(ValueError):
    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(scrub(message))
        self.field = field


class SimulationFailed(CommandError):
    """The engine raised on a spec the schema accepts: a bug on the server's side, not the client's."""


class ServerBusy(CommandError):
    """The server cannot take the run now (runs.Busy): the websocket says so, HTTP answers 503 with Retry-After."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


# Anything that looks like a server-side path (/home/..., C:\...) in a message sent to a client becomes <path>.
_PATH_RE = re.compile(r"(?:(?<=[\s'\"(=:])|^)(?:/|[A-Za-z]:\\)[^\s'\",)]+")


def scrub(message: str) -> str:
    """A message fit for a client: no server path, no lone surrogate (which no JSON encoder writes)."""
    return _PATH_RE.sub("<path>", message).encode("utf-8", "backslashreplace").decode("utf-8")


async def load_run(runs: RunCache, settings: Settings, req: RunRequest) -> PreparedRun:
    if req.events is None:
        spec = requested_spec(req)
        refuse_client_traces(req, spec)
        check_work(runs.estimate_work, spec, req, settings.max_sim_work)
        preset = req.scenario is not None and not req.set
        run = await _guarded(spec, runs.get(spec, preset=preset))
        check_loaded_size(run, settings.max_loaded_bytes)
        return run
    try:
        recorded = await asyncio.to_thread(parse_recording, req.events)
    except ReplayError as e:
        raise CommandError(str(e), e.field) from None
    header = recorded[0] if recorded and isinstance(recorded[0], RunEvent) else None
    events = recorded[1:] if header is not None else recorded
    spec = replay_spec(req, header, events)
    # the engine's topology for the spec is built in the worker thread too, and refused like a simulation
    run = await _guarded(spec, asyncio.to_thread(lambda: replay_run(spec, events, runs.topology(spec))))
    check_loaded_size(run, settings.max_loaded_bytes)
    return run


async def loaded_from_disk(runs: RunCache, settings: Settings, req: RunRequest) -> tuple[bytes, str] | None:
    """A preset's `loaded` message from the on-disk cache (server/diskcache.py), gzipped and as text, when its run
    is not in memory; None otherwise (no cache, not stored, a request load_run refuses: it says why). The run is
    simulated when the page's websocket `load` comes (once its scripts have run), not here: a simulation started
    here held the interpreter while the page's modules were still being served, and the first screens from disk
    took longer (paired, bench/README.md "First screen, fifth round")."""
    if runs.disk is None:
        return None
    try:
        spec = requested_spec(req)
    except CommandError:
        return None
    if runs.cached(spec) is not None:
        return None
    found = await asyncio.to_thread(runs.disk.get_gzip, spec)
    if found is None or len(found[1]) > settings.max_loaded_bytes:
        return None
    return found


def check_loaded_size(run: PreparedRun, limit: int) -> None:
    size = len(run.loaded.text)
    if size > limit:
        raise CommandError(
            f"this run's first screen (`loaded`) would be {size / 2**20:.1f} MiB; this server sends at most "
            f"{limit / 2**20:.1f} MiB (fewer or shorter requests)"
        )


async def _guarded(spec: scn.ScenarioSpec, work: Any) -> PreparedRun:
    try:
        return await work
    except CommandError:
        raise
    except Busy as e:
        raise ServerBusy(str(e), e.retry_after_s) from None
    except Cancelled:
        raise CommandError("the run was cancelled (the server is shutting down, or nobody waits for it)") from None
    except BudgetExceeded as e:
        raise CommandError(str(e)) from None
    except ValueError as e:  # the engine refuses a combination the schema allows
        raise CommandError(f"cannot simulate this scenario: {e}", _named_field(str(e))) from None
    except Exception as e:  # never let a simulator bug take the connection down; its text stays in the log
        log.exception("simulation failed for %s", spec.name)
        raise SimulationFailed(f"simulation failed: internal error ({type(e).__name__}), in the server's log") from None


def _named_field(message: str) -> str | None:
    return message.split("field '", 1)[1].split("'", 1)[0] if message.startswith("field '") else None


def requested_spec(req: RunRequest) -> scn.ScenarioSpec:
    """The preset with its overrides, or the inline spec with its overrides."""
    if (req.scenario is None) == (req.spec is None):
        also = "; a recording whose first line is its `run` spec needs neither" if req.events is not None else ""
        raise CommandError(
            f"load needs exactly one of 'scenario' (a preset name) or 'spec' (an inline spec){also}", "scenario"
        )
    try:
        base = scn.load_preset(req.scenario) if req.scenario is not None else scn.parse_spec(req.spec, "spec")
        return scn.apply_overrides(base, req.set, "set") if req.set else base
    except scn.ScenarioError as e:
        raise CommandError(str(e), _field_of(str(e), req)) from None


def spec_traces(spec: scn.ScenarioSpec) -> set[str]:
    """The trace files a spec would read: its workload's, and its compare run's."""
    traces = {spec.workload.trace} if spec.workload is not None and spec.workload.trace is not None else set()
    if spec.compare is not None:
        nested = spec.compare.set.get("workload")
        inner = nested.get("trace") if isinstance(nested, dict) else None
        traces |= {str(v) for v in (spec.compare.set.get("workload.trace"), inner) if v is not None}
    return traces


def refuse_client_traces(req: RunRequest, spec: scn.ScenarioSpec) -> None:
    """The server opens no file a client names: a trace reaches a run only from a shipped preset, as it ships."""
    traces = spec_traces(spec)
    if not traces:
        return
    shipped = spec_traces(scn.load_preset(req.scenario)) if req.scenario is not None else set()
    if traces <= shipped:
        return
    field = _trace_field(req)
    raise CommandError(
        f"field '{field}': this server opens no file a client names; use a preset's own trace, or a synthetic "
        "workload (num_requests, input_len, output_len, request_rate); trace files are for the CLI "
        "(`layerscope run --set workload.trace=FILE`)",
        field,
    )


def _trace_field(req: RunRequest) -> str:
    """Where the request named a trace: set.workload.trace, spec.compare.set.workload.trace, ..."""
    for where, data in (("set", req.set), ("spec", req.spec or {})):
        if _names_trace(data):
            return f"{where}.workload.trace"
        compare = data.get("compare")
        inner = compare.get("set") if isinstance(compare, dict) else None
        if isinstance(inner, dict) and _names_trace(inner):
            return f"{where}.compare.set.workload.trace"
    return "workload.trace"


def _names_trace(fields: dict[str, Any]) -> bool:
    nested = fields.get("workload")
    return "workload.trace" in fields or (isinstance(nested, dict) and "trace" in nested)


def check_work(estimate: Callable[[scn.ScenarioSpec], Work], spec: scn.ScenarioSpec, req: RunRequest,
               limit: int) -> None:
    """Refuse runs bigger than the server allows before spending CPU on them (`estimate`: Simulator.estimate_work)."""
    work = estimate(spec)
    if work.units <= limit:
        return
    name = work.field
    where = "set" if name in req.set else ("spec" if req.spec is not None else None)
    compare = " (its compare run included)" if spec.compare else ""
    raise CommandError(
        f"field '{name}': this run needs about {work.units} engine steps, weighted by batch width and numerics"
        f"{compare}; this server simulates at most {limit} per run (fewer or shorter requests, more of them "
        "at once in a larger KV pool, a larger chunk_size, numerics off)",
        f"{where}.{name}" if where else name,
    )


# -- replays: the recorded run and no other --------------------------------------------------------------------
def replay_spec(req: RunRequest, header: RunEvent | None, events: list[BaseModel]) -> scn.ScenarioSpec:
    """The spec a recording is replayed under: its own (`run` line), or the one asked for, if it is that run."""
    own = _header_spec(header) if header is not None else None
    if own is not None and req.scenario is None and req.spec is None:
        if req.set:
            raise CommandError("a recording replays with its own settings: 'set' cannot change them", "set")
        return own
    asked = requested_spec(req)
    where = "scenario" if req.scenario is not None else "spec"
    if own is not None:
        diffs = {k: (v, getattr(asked, k)) for k, v in _settings(own).items() if v != _settings(asked)[k]}
        if diffs:
            raise CommandError(
                f"this recording is a run of {own.name!r} ({_show(diffs, 0)}), not of {asked.name!r} "
                f"({_show(diffs, 1)}); send it without 'scenario' and 'spec' to replay it with its own settings",
                where,
            )
        return asked
    diffs = _recorded_differences(events, asked)
    if diffs:
        raise CommandError(
            f"this recording is not a run of {asked.name!r}: recorded {_show(diffs, 0)}, the scenario has "
            f"{_show(diffs, 1)}", where
        )
    return asked


def _header_spec(header: RunEvent) -> scn.ScenarioSpec:
    try:
        return scn.parse_spec(header.spec, "events.0.spec")
    except scn.ScenarioError as e:
        raise CommandError(str(e), "events.0.spec") from None


def _settings(spec: scn.ScenarioSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", exclude=NOT_SETTINGS)


def _recorded_differences(events: list[BaseModel], spec: scn.ScenarioSpec) -> dict[str, tuple[Any, Any]]:
    """A recording without its `run` line still says some of its settings (summary figures, chunk sizes):
    the ones that differ from `spec`, as {field: (recorded, spec's)}."""
    figures = next((e.figures for e in reversed(events) if isinstance(e, SummaryEvent)), {})
    want: dict[str, Any] = {k: getattr(spec, k) for k in ("model", "runtime", "gpu", "allocator", "prompt_len",
                                                          "decode_steps")}
    want["page_size"] = spec.effective_page_size
    diffs = {k: (figures[k], v) for k, v in want.items() if k in figures and figures[k] != v}
    in_force = {"default": "chunk_size", "low_memory": "low_mem_chunk_size"}
    for e in events:
        name = in_force.get(e.reason) if isinstance(e, ChunkEvent) else None
        if name is not None and isinstance(e, ChunkEvent) and name not in diffs and e.chunk_size != getattr(spec, name):
            diffs[name] = (e.chunk_size, getattr(spec, name))
    return diffs


def _show(diffs: dict[str, tuple[Any, Any]], side: int) -> str:
    shown = [f"{k}={v[side]}" for k, v in list(diffs.items())[:MAX_DIFFS_SHOWN]]
    return ", ".join(shown) + (f", +{len(diffs) - MAX_DIFFS_SHOWN} more" if len(diffs) > MAX_DIFFS_SHOWN else "")


def _field_of(message: str, req: RunRequest) -> str:
    """The field a ScenarioError names ("field 'chunk_size': ..."), else where the bad input came from."""
    if "field '" in message:
        name = message.split("field '", 1)[1].split("'", 1)[0]
        in_set = req.set and (name in req.set or name.split(".")[0] in req.set)
        return f"{'set' if in_set else 'spec'}.{name}"
    if "unknown field '" in message or "unknown field " in message:
        return "set"
    return "scenario" if req.scenario is not None else "spec"
