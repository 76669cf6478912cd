"""The whole run at a glance, sent once with `loaded`: the dashboard draws it before play is pressed.

For the run and its compare run (if any), the events the time views and the bank map need, as column
tables ({"cols": [...], "rows": [[...], ...]}): repeated strings become indices into a per-column `dict`
list, so a 20 000-launch run travels as a few hundred kB rather than megabytes of repeated names. A kernel
launch's fields that its price fixes (SHARED: name, duration, bytes, bound, ...) repeat across the steps that
launch the same kernel, so they travel once, in the table's `shared` rows, and each launch's row holds its own
fields (start, step, chunk, engine) and the index of its shared row (docs/protocol.md). The compare run is never
streamed frame by frame (one clock plays one run); its panels are drawn from here.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from layerscope.scenario import main_label

# fields kept per kind: what the timeline, memory, latency, stages, bank map, numerics and log draw
FIELDS: dict[str, tuple[str, ...]] = {
    "kernel": (
        "name",
        "stage",
        "stage_kind",
        "phase",
        "stream",
        "start_us",
        "dur_us",
        "flops",
        "bytes",
        "bound",
        "hbm_util",
        "l2_hit",
        "chunk",
        "step",
        "shapes",
        "scope",
        "source",
        "table",
        "instance",  # the engine (replicas; a disaggregated run's pools): the timeline's lanes per engine
    ),
    "phase": ("t_us", "phase"),
    "chunk": ("t_us", "chunk", "token_start", "token_end", "chunk_size", "reason", "barrier_us", "pages"),
    "memory": ("t_us", "hbm_total_bytes", "hbm_used_bytes", "hbm_free_bytes", "kv_bytes", "largest_free_run_bytes"),
    "decode_step": (
        "t_us",
        "step",
        "context_len",
        "latency_us",
        "model_latency_us",
        "sla_us",
        "jitter_us",
        "over_sla",
        "cross_bank_reads",
        "refetched_pages",
    ),
    "step": ("t_us", "index", "start_us", "dur_us", "model_dur_us", "num_seqs", "prefill_tokens", "decode_tokens",
             "token_budget", "request_ids", "num_tokens", "cached_blocks", "num_sampled", "instance"),
    "request": ("t_us", "request_id", "what", "input_len", "output_len", "num_computed_tokens", "num_output_tokens",
                "frontend_us", "instance"),  # front-of-engine time added to every token; the replica that served it
    "deployment": ("t_us", "gpu", "num_gpus", "tp", "ep", "moe_tp", "weight_dtype", "kv_dtype",
                   "gpu_memory_utilization", "cuda_graphs", "max_model_len", "per_gpu", "max_num_batched_tokens",
                   "max_num_seqs", "prefix_caching", "scheduler_source"),  # the card's scheduler row
    "page_alloc": ("t_us", "owner", "phase", "logical", "banks", "slots", "request_id"),
    "page_free": ("t_us", "owner", "banks", "slots", "request_id"),
    "page_migrate": ("t_us", "owner", "from_bank", "from_slot", "to_bank", "to_slot"),
    "page_evict": ("t_us", "owner", "banks", "slots"),
    "banks": ("t_us", "used", "capacity", "reserved"),
    "crc": ("t_us", "checked_banks", "bad_banks", "source"),
    "fault": ("t_us", "fault", "action", "detail", "banks", "step", "chunk"),
    "alloc_fail": ("t_us", "owner", "pages_wanted", "free_pages", "largest_free_run", "reason"),
    "experts": ("t_us", "phase", "step", "chunk", "scaled_model", "counts", "distinct_full", "assumed"),
    # a data-parallel group (issue 20): its ranks, and each lockstep step's per-rank work and expert load
    "dp_group": ("t_us", "dp", "tp", "ep", "nodes", "all2all_backend", "ranks"),
    "dp_step": ("t_us", "index", "start_us", "dur_us", "slowest_rank", "busy_us", "tokens", "a2a_us", "moe_us",
                "a2a_kernels", "expert_rows"),
    "numerics": (
        "t_us",
        "phase",
        "scaled_model",
        "tokens",
        "rel_error",
        "max_abs_error",
        "nan_count",
        "inf_count",
        "step",
        "chunk",
    ),
}


# fields a launch shares with every launch of the same priced kernel: a 61k-launch run (two-nodes-wide-ep) has
# ~3.4k distinct tuples of them, so its kernel table is 2.6 MB of JSON instead of 7.4 MB (bench/README.md)
SHARED: dict[str, tuple[str, ...]] = {
    "kernel": tuple(c for c in FIELDS["kernel"] if c not in ("start_us", "step", "instance")),
}
_HASHABLE = frozenset({int, float, str, bool, type(None)})  # cells a shared row can be keyed by


def _json_float(v: Any, exact: bool = False) -> Any:
    if isinstance(v, BaseModel):  # a nested record (the deployment's per_gpu figures)
        return {k: _json_float(x, exact) for k, x in v.model_dump(mode="json").items()}
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, float) and not exact:
        return float(f"{v:.6g}")  # six significant digits: far below a pixel, a third of the bytes
    return v


def column_table(events: list[BaseModel], cols: tuple[str, ...], shared: tuple[str, ...] = ()) -> dict[str, Any]:
    """The column table of `events`; the `shared` columns (those whose cells are all hashable) moved to shared
    rows that each row indexes by its last cell."""
    # times stay exact: the dashboard compares them with the streamed events' and the tour's times
    columns: dict[str, Sequence[Any]] = {}
    dicts: dict[str, list[str]] = {}
    keyable: set[str] = set()
    for c, values in zip(cols, _columns(events, cols), strict=True):
        kinds = set(map(type, values))  # in C: a Python loop over a 40k-launch run's cells was ~0.1 s a column
        if kinds <= _HASHABLE:
            keyable.add(c)
        if kinds == {str}:  # indices into the column's strings, in their first-seen order (dict.fromkeys: in C)
            index = {v: i for i, v in enumerate(dict.fromkeys(values))}
            columns[c] = list(map(index.__getitem__, values))
            dicts[c] = list(index)
        else:
            columns[c] = _column(values, kinds, c.endswith("_us"))
    moved = [c for c in cols if c in shared and c in keyable]
    own = [columns[c] for c in cols if c not in moved]
    out: dict[str, Any] = {"cols": list(cols), "dict": dicts}
    if moved:
        keys = list(zip(*(columns[c] for c in moved), strict=True))
        row_of = {k: i for i, k in enumerate(dict.fromkeys(keys))}  # first-seen order; a loop over distinct keys
        own.append(list(map(row_of.__getitem__, keys)))
        out["shared"] = {"cols": moved, "rows": list(map(list, row_of))}
    out["rows"] = list(map(list, zip(*own, strict=True))) if own else []
    return out


def _columns(events: list[BaseModel], cols: tuple[str, ...]) -> list[Sequence[Any]]:
    """Each column's values (None where an event's class has no such field), read a row at a time by one
    attrgetter per event class: getattr cell by cell was the overview's largest cost (1.2 M calls for
    two-node-1p3d's 50k events)."""
    classes = set(map(type, events))
    if len(classes) == 1:  # a kind is one event class: the rows in one map() call
        rows = list(map(_row_getter(events[0], cols), events))
    else:
        getters = {cls: _row_getter(next(e for e in events if type(e) is cls), cols) for cls in classes}
        rows = [getters[type(e)](e) for e in events]
    return list(zip(*rows, strict=True))


def _row_getter(sample: BaseModel, cols: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function from an event of `sample`'s class to its `cols` values, None for a field the class lacks."""
    have = [c for c in cols if hasattr(sample, c)]
    if len(cols) == 1:
        return (lambda e: (getattr(e, cols[0]),)) if have else (lambda e: (None,))
    if len(have) == len(cols):
        return operator.attrgetter(*cols)
    return lambda e: tuple(getattr(e, c, None) for c in cols)


def _column(values: Sequence[Any], kinds: set[type], exact: bool) -> Sequence[Any]:
    """_json_float of every value of one column, by the column's types (`kinds`): a column of ints, strings or lists
    (most of a serving run's cells) is kept as it is, one of floats rounded in one pass (a 64-request run's overview
    took ~1.5 s cell by cell, most of its prepare step)."""
    if float not in kinds and not any(issubclass(k, BaseModel) for k in kinds):
        return values
    if kinds <= {float, type(None)}:
        if kinds == {float} and math.isfinite(sum(values)):  # no inf or nan (either makes the sum one; overflow
            return values if exact else _rounded(values)  # to inf only sends us the slow way, same values)
        if exact:
            return [v if v is None or math.isfinite(v) else _json_float(v) for v in values]
        return [None if v is None else float(f"{v:.6g}") if math.isfinite(v) else _json_float(v) for v in values]
    return [_json_float(v, exact) for v in values]


def _rounded(values: Sequence[float]) -> Sequence[float]:
    """float(f"{v:.6g}") of each finite float, each distinct value formatted once: a run's launches repeat the same
    shapes, so a 43 000-launch column holds a few hundred distinct flops, bytes and utilisations."""
    table = {v: float(f"{v:.6g}") for v in dict.fromkeys(values)}
    if 0.0 not in table:
        return list(map(table.__getitem__, values))
    # 0.0 and -0.0 are one key: each zero kept as it is (its own rounding), the rest looked up
    return [table[v] if v else v for v in values]


# kinds the serving views replay in the run's own order (ties in time matter: a request arrives before the step
# that schedules it): their tables carry each event's index in the run as a last column "seq"
ORDERED = ("request", "step", "banks", "deployment")


def run_overview(result: Any, role: str, label: str) -> dict[str, Any]:
    """One run's overview: a column table per kind in FIELDS, plus its summary figures and its clock."""
    by: dict[str, list[BaseModel]] = {k: [] for k in FIELDS}
    seq: dict[str, list[int]] = {k: [] for k in ORDERED}
    for i, e in enumerate(result.events):
        if e.kind in by:
            by[e.kind].append(e)
            if e.kind in seq:
                seq[e.kind].append(i)
    summary = {k: _json_float(v) for k, v in result.summary.items()}
    out: dict[str, Any] = {"role": role, "label": label, "summary": summary, "clock": clock(result)}
    out["tables"] = {k: column_table(v, FIELDS[k], SHARED.get(k, ())) for k, v in by.items() if v}
    for k, idx in seq.items():
        if k in out["tables"]:
            tab = out["tables"][k]
            assert "shared" not in tab, f"{k}: a row's last cell is its shared row's index, not its seq"
            tab["cols"].append("seq")
            for row, i in zip(tab["rows"], idx, strict=True):
                row.append(i)
    return out


def clock(result: Any) -> str:
    """What the run's event clock counts, as the engine states it (layerscope.result.SimResult.clock): "model" for
    a whole-model step apart (a serving run: a client's clock), "layer" for one decoder layer's simulated time."""
    return str(result.clock)


def overview(result: Any, num_layers: int) -> dict[str, Any]:
    """The run (and its compare run) as the dashboard's first screen draws them."""
    spec = result.spec
    runs = [run_overview(result, "main", main_label(spec))]
    if getattr(result, "compare", None) is not None:
        runs.append(run_overview(result.compare, "compare", spec.compare.label if spec.compare else "compare"))
    return {"num_layers": num_layers, "runs": runs}
