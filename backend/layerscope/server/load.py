"""From a run request (the websocket `load`, the body of the export routes) to a prepared run, with one set of rules:

    RunRequest ─▶ spec: a preset + `set`, an inline `spec`, or a recording's own `run` line
               ─▶ simulated through the RunCache (work bounded by Settings.max_sim_work)
                  or replayed from `events` (not cached; a recording of another run is refused)

Every refusal is a CommandError naming the field, so the websocket sends an `error` and HTTP answers 422.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import BaseModel

from layerscope import scenario as scn
from layerscope.events import ChunkEvent, RunEvent, SummaryEvent
from layerscope.protocol import RunRequest
from layerscope.server.runs import PreparedRun, ReplayError, RunCache, parse_recording, replay_run
from layerscope.server.settings import Settings

log = logging.getLogger("layerscope.server")
NOT_SETTINGS = {"name", "title", "description", "tour", "sweep"}  # words about a run, not what makes it
MAX_DIFFS_SHOWN = 4


class CommandError(ValueError):
    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class SimulationFailed(CommandError):
    """The engine raised on a spec the schema accepts: a bug on the server's side, not the client's."""


async def load_run(runs: RunCache, settings: Settings, req: RunRequest) -> PreparedRun:
    if req.events is None:
        spec = requested_spec(req)
        check_work(spec, req, settings.max_sim_work)
        return await _guarded(spec, runs.get(spec))
    try:
        recorded = await asyncio.to_thread(parse_recording, req.events)
    except ReplayError as e:
        raise CommandError(str(e), e.field) from None
    header = recorded[0] if recorded and isinstance(recorded[0], RunEvent) else None
    events = recorded[1:] if header is not None else recorded
    spec = replay_spec(req, header, events)
    return await _guarded(spec, asyncio.to_thread(replay_run, spec, events))


async def _guarded(spec: scn.ScenarioSpec, work: Any) -> PreparedRun:
    try:
        return await work
    except CommandError:
        raise
    except ValueError as e:  # the engine refuses a combination the schema allows
        raise CommandError(f"cannot simulate this scenario: {e}") from None
    except Exception as e:  # never let a simulator bug take the connection down
        log.exception("simulation failed for %s", spec.name)
        raise SimulationFailed(f"simulation failed: {type(e).__name__}: {e}") from None


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


def check_work(spec: scn.ScenarioSpec, req: RunRequest, limit: int) -> None:
    """Refuse runs bigger than the server allows before spending CPU on them."""
    if spec.workload is not None:
        _check_workload(spec, limit)
        return
    chunks = -(-spec.prompt_len // min(spec.chunk_size, spec.low_mem_chunk_size))
    work = (chunks + spec.decode_steps) * (2 if spec.compare else 1)
    if work > limit:
        name = "prompt_len" if chunks > spec.decode_steps else "decode_steps"
        where = "set" if name in req.set else ("spec" if req.spec is not None else "scenario")
        raise CommandError(
            f"field '{name}': this run needs {work} chunks + decode steps{' (x2 for compare)' * bool(spec.compare)}"
            f"; this server simulates at most {limit} per run (raise chunk_size or shorten the run)",
            f"{where}.{name}" if where != "scenario" else where,
        )


def _check_workload(spec: scn.ScenarioSpec, limit: int) -> None:
    """A workload's work: the engine steps it needs at least (prompt tokens over the step budget, plus the
    decode steps of each wave of concurrent requests), with every length at its range's top."""
    w = spec.workload
    assert w is not None
    if w.trace is not None:
        raise CommandError("field 'workload.trace': trace files are read by the CLI only", "workload.trace")
    r = w.range_ratio
    prompt = w.num_requests * (w.shared_prefix_len + int(w.input_len * (1 + r)))
    budget = spec.scheduler.max_num_batched_tokens if spec.runtime == "vllm" else spec.chunk_size
    concurrent = min(w.num_requests, spec.scheduler.max_num_seqs, w.max_concurrency or w.num_requests)
    waves = -(-w.num_requests // concurrent)
    work = (-(-prompt // budget) + waves * int(w.output_len * (1 + r))) * (2 if spec.compare else 1)
    if work > limit:
        name = "workload.num_requests" if waves > 1 else "workload.output_len"
        raise CommandError(
            f"field '{name}': this workload needs about {work} engine steps"
            f"{' (x2 for compare)' * bool(spec.compare)}; this server simulates at most {limit} per run "
            "(fewer or shorter requests, or more of them at once)",
            name,
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
        if name is not None and name not in diffs and e.chunk_size != getattr(spec, name):
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
