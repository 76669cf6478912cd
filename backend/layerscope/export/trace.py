"""Chrome / Perfetto trace JSON from a simulation: open it at ui.perfetto.dev (or chrome://tracing).

    pid 1 "A: <scenario>"  (times on the run's clock: one layer or the whole model, simulated µs)
      tid per stream        ph "X"  kernels (ts = start_us, dur = dur_us), args: stage, bytes, bound, ...
      tid "events"          ph "i"  migrations, evictions, allocation failures, faults, phases (instants)
    counters (ph "C")       HBM used (GiB), bank occupancy (pages per bank), decode step latency (µs)
    ph "M"                  process and thread names, thread order
    pid 2 "B: <compare label> (...)"   the same for the compare run of a comparison preset (its own clock from 0)

Times are the simulator's, in microseconds at full model size, on the run's clock (SimResult.clock): one
decoder layer's simulated time for a one-request run, the whole model's for a serving run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from layerscope.result import SimResult
from layerscope.runtime.chunks import GIB

PID = 1  # run A; the compare run (B) is PID + 1
STREAM_ORDER = ("compute", "decode_fused", "copy")
CLOCK_NAMES = {"layer": "one decoder layer, simulated microseconds",  # SimResult.clock: what ts counts
               "model": "the whole model (a client's clock), simulated microseconds"}


def to_perfetto(result: SimResult) -> dict[str, Any]:
    """The trace as a dict ({"traceEvents": [...], ...}); `result` is a layerscope.result.SimResult. A comparison's
    compare run is a second process (B) beside the main run (A), each on its own clock from 0."""
    out = _run_events(result, PID, f"A: {result.spec.name}")
    compare = getattr(result, "compare", None)
    if compare is not None:
        label = result.spec.compare.label if result.spec.compare is not None else compare.spec.name
        out += _run_events(compare, PID + 1, f"B: {label}")
    other: dict[str, Any] = {"scenario": result.spec.name, "model": result.spec.model, "runtime": result.spec.runtime,
                             "gpu": result.spec.gpu, "clock": CLOCK_NAMES[result.clock]}
    if compare is not None:
        other["compare"] = {"pid": PID + 1, "model": compare.spec.model, "runtime": compare.spec.runtime,
                            "gpu": compare.spec.gpu}
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": other}


def _run_events(result: Any, pid: int, name: str) -> list[dict[str, Any]]:
    events = result.events
    lane = _lane_of(events)
    tids = {s: i + 1 for i, s in enumerate(_streams(events, lane))}
    instants_tid = len(tids) + 1
    out: list[dict[str, Any]] = _metadata(name, pid, tids, instants_tid)
    for e in events:
        kind = e.kind
        if kind == "kernel":
            out.append(_slice(e, pid, tids[lane(e)]))
        elif kind == "memory":
            out.append(_counter("HBM used (GiB)", pid, e.t_us, {"used": e.hbm_used_bytes / GIB,
                                                                 "kv": e.kv_bytes / GIB,
                                                                 "activations": e.activation_bytes / GIB}))
        elif kind == "banks":
            out.append(_counter("bank occupancy (pages)", pid, e.t_us,
                                {f"bank{b:02d}": n for b, n in enumerate(e.used)}))
        elif kind == "decode_step":
            out.append(_counter("decode step latency (us)", pid, e.t_us, {"layer": e.latency_us,
                                                                          "model": e.model_latency_us}))
        elif kind in ("page_migrate", "page_evict", "alloc_fail", "fault", "phase", "crc", "chunk"):
            out.append(_instant(e, pid, instants_tid))
    return out


def to_json(result: Any) -> str:
    return json.dumps(to_perfetto(result), separators=(",", ":"), allow_nan=False, default=_finite)


def _lane_of(events: list[Any]) -> Callable[[Any], str]:
    """A kernel's thread: its stream, or with several GPUs of a data-parallel group (kernel rank > 0) its GPU's
    stream ("GPU 3 · comm"), so each rank's all-to-all and compute are a lane group of their own."""
    if not any(e.kind == "kernel" and e.rank for e in events):
        return lambda e: e.stream
    return lambda e: f"GPU {e.rank} · {e.stream}"


def _streams(events: list[Any], lane: Callable[[Any], str] | None = None) -> list[str]:
    lane = lane or (lambda e: e.stream)
    seen = {(getattr(e, "rank", 0), e.stream, lane(e)) for e in events if e.kind == "kernel"}
    order = {s: i for i, s in enumerate(STREAM_ORDER)}
    return [name for _, _, name in sorted(seen, key=lambda x: (x[0], order.get(x[1], len(order)), x[1]))]


def _metadata(name: str, pid: int, tids: dict[str, int], instants_tid: int) -> list[dict[str, Any]]:
    meta: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
         "args": {"name": f"{name} (one layer, simulated us)"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}},
    ]
    for stream, tid in [*tids.items(), ("events", instants_tid)]:
        meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": stream}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    return meta


def _slice(e: Any, pid: int, tid: int) -> dict[str, Any]:
    args: dict[str, Any] = {"stage": e.stage, "phase": e.phase, "bound": e.bound, "flops": e.flops,
                            "bytes": e.bytes, "hbm_util": round(e.hbm_util, 4), "l2_hit": round(e.l2_hit, 4)}
    if e.chunk is not None:
        args["chunk"] = e.chunk
    if e.step is not None:
        args["step"] = e.step
    if e.shapes:
        args["shapes"] = e.shapes
    args["source"] = e.source  # measured (a measured kernel table) or analytic (the roofline model)
    if e.table:
        args["table"] = e.table
    return {"ph": "X", "name": e.name, "cat": e.stage_kind, "ts": e.start_us, "dur": e.dur_us,
            "pid": pid, "tid": tid, "args": args}


def _counter(name: str, pid: int, ts: float, values: dict[str, float]) -> dict[str, Any]:
    return {"ph": "C", "name": name, "ts": ts, "pid": pid, "tid": 0, "args": values}


def _instant(e: Any, pid: int, tid: int) -> dict[str, Any]:
    data = e.model_dump(mode="json", exclude={"t_us"})
    kind = data.pop("kind")
    label = {
        "page_migrate": lambda: f"migrate {e.reason}",
        "page_evict": lambda: f"evict {len(e.logical)} pages",
        "alloc_fail": lambda: "alloc fail",
        "fault": lambda: f"fault {e.action}: {e.fault}",
        "phase": lambda: f"phase: {e.phase}",
        "crc": lambda: f"crc: {len(e.bad_banks)} bad banks",
        "chunk": lambda: f"chunk {e.chunk} [{e.token_start},{e.token_end})",
    }[kind]()
    scope = "g" if kind in ("phase", "fault") else "t"
    if kind == "chunk":  # page lists can be long; the count is what a trace reader wants
        data["pages"] = len(e.pages)
    return {"ph": "i", "s": scope, "name": label, "cat": kind, "ts": e.t_us, "pid": pid, "tid": tid,
            "args": _finite(data)}


def _finite(v: Any) -> Any:
    """JSON has no inf/NaN: write them as strings."""
    if isinstance(v, float) and (v != v or abs(v) == float("inf")):
        return str(v)
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v
