"""Chrome / Perfetto trace JSON from a simulation: open it at ui.perfetto.dev (or chrome://tracing).

    pid 1 "<scenario> (one layer, simulated µs)"
      tid per stream        ph "X"  kernels (ts = start_us, dur = dur_us), args: stage, bytes, bound, ...
      tid "events"          ph "i"  migrations, evictions, allocation failures, faults, phases (instants)
    counters (ph "C")       HBM used (GiB), bank occupancy (pages per bank), decode step latency (µs)
    ph "M"                  process and thread names, thread order

Times are the simulator's: one decoder layer's simulated time in microseconds, at full model size.
"""

from __future__ import annotations

import json
from typing import Any

from layerscope.runtime.chunks import GIB

PID = 1
STREAM_ORDER = ("compute", "decode_fused", "copy")


def to_perfetto(result: Any) -> dict[str, Any]:
    """The trace as a dict ({"traceEvents": [...], ...}); `result` is a runtime.engine.SimResult."""
    events = result.events
    streams = _streams(events)
    tids = {s: i + 1 for i, s in enumerate(streams)}
    instants_tid = len(tids) + 1
    out: list[dict[str, Any]] = _metadata(result.spec.name, tids, instants_tid)
    for e in events:
        kind = e.kind
        if kind == "kernel":
            out.append(_slice(e, tids[e.stream]))
        elif kind == "memory":
            out.append(_counter("HBM used (GiB)", e.t_us, {"used": e.hbm_used_bytes / GIB,
                                                            "kv": e.kv_bytes / GIB,
                                                            "activations": e.activation_bytes / GIB}))
        elif kind == "banks":
            out.append(_counter("bank occupancy (pages)", e.t_us, {f"bank{b:02d}": n for b, n in enumerate(e.used)}))
        elif kind == "decode_step":
            out.append(_counter("decode step latency (us)", e.t_us, {"layer": e.latency_us,
                                                                     "model": e.model_latency_us}))
        elif kind in ("page_migrate", "page_evict", "alloc_fail", "fault", "phase", "crc", "chunk"):
            out.append(_instant(e, instants_tid))
    return {
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": {"scenario": result.spec.name, "model": result.spec.model, "runtime": result.spec.runtime,
                      "gpu": result.spec.gpu, "clock": "one decoder layer, simulated microseconds"},
    }


def to_json(result: Any) -> str:
    return json.dumps(to_perfetto(result), separators=(",", ":"), allow_nan=False, default=_finite)


def _streams(events: list[Any]) -> list[str]:
    seen = {e.stream for e in events if e.kind == "kernel"}
    known = [s for s in STREAM_ORDER if s in seen]
    return known + sorted(seen - set(known))


def _metadata(name: str, tids: dict[str, int], instants_tid: int) -> list[dict[str, Any]]:
    meta: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0,
         "args": {"name": f"{name} (one layer, simulated us)"}},
    ]
    for stream, tid in [*tids.items(), ("events", instants_tid)]:
        meta.append({"ph": "M", "name": "thread_name", "pid": PID, "tid": tid, "args": {"name": stream}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": tid, "args": {"sort_index": tid}})
    return meta


def _slice(e: Any, tid: int) -> dict[str, Any]:
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
            "pid": PID, "tid": tid, "args": args}


def _counter(name: str, ts: float, values: dict[str, float]) -> dict[str, Any]:
    return {"ph": "C", "name": name, "ts": ts, "pid": PID, "tid": 0, "args": values}


def _instant(e: Any, tid: int) -> dict[str, Any]:
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
    return {"ph": "i", "s": scope, "name": label, "cat": kind, "ts": e.t_us, "pid": PID, "tid": tid,
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
