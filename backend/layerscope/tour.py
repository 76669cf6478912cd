"""Guided tours: check each tour step's claim against what the run produced.

A tour is data (ScenarioSpec.tour: a list of TourStep). Each step may carry a TourCheck
{metric, op, value} evaluated against the run's summary figures. The metric grammar is tiny:

    metric := term | term "/" term        (a ratio of two figures)
    term   := KEY | "compare." KEY        (KEY of the run's summary, or of the compare run's)

so a pair can say "naive decode is 1.5x slower": compare.decode_step_mean_us/decode_step_mean_us > 1.5.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from layerscope.scenario import ScenarioSpec, TourCheck, TourStep

Figure = float | int | bool | str | list[Any] | None

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


class SimResultLike(Protocol):
    """What tours, claims and the report read from a run (runtime.engine.SimResult satisfies it)."""

    spec: ScenarioSpec
    events: Sequence[Any]
    topology: Any
    summary: dict[str, Any]
    compare: Any


def _term(result: SimResultLike, term: str) -> Figure:
    source, key = result, term
    if term.startswith("compare."):
        source, key = result.compare, term.removeprefix("compare.")
        if source is None:
            raise KeyError(f"{term!r}: this run has no compare run")
    if key not in source.summary:
        raise KeyError(f"{term!r} is not a summary figure of this run")
    return source.summary[key]


def metric_value(result: SimResultLike, metric: str) -> Figure:
    """The value a tour metric names; raises KeyError naming the metric when the run lacks it."""
    num, sep, den = metric.partition("/")
    top = _term(result, num.strip())
    if not sep:
        return top
    bottom = _term(result, den.strip())
    if not isinstance(top, int | float) or not isinstance(bottom, int | float):
        raise KeyError(f"{metric!r}: a ratio needs two numeric figures")
    if bottom == 0:
        return math.inf if top > 0 else (0.0 if top == 0 else -math.inf)
    return float(top) / float(bottom)


def _coerce(actual: Figure, expected: Any) -> tuple[Any, Any]:
    """Compare like with like: numbers as floats, bools as bools, everything else as text."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return bool(actual), bool(expected)
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return float(actual), float(expected)
    if isinstance(actual, list):
        actual = ",".join(str(a) for a in actual)
    return str(actual), str(expected)


def check_passes(check: TourCheck, actual: Figure) -> bool:
    a, e = _coerce(actual, check.value)
    if check.op not in ("==", "!=") and not (isinstance(a, float) and isinstance(e, float)):
        return False  # ordering of text is not a physical claim
    return bool(_OPS[check.op](a, e))


def _event_name_fields(event: Any) -> list[str]:
    """The fields an at_event 'kind:name' may name: a kernel/stage name, a phase, a fault, an owner, a reason,
    what happened to a request ('request:preempted')."""
    out = []
    for attr in ("name", "stage", "phase", "fault", "action", "owner", "reason", "what"):
        v = getattr(event, attr, None)
        if isinstance(v, str):
            out.append(v)
    return out


def event_time(result: SimResultLike, at_event: str) -> float | None:
    """Simulated time of the first event matching 'kind' or 'kind:name'; None when nothing matches."""
    kind, _, name = at_event.partition(":")
    for e in result.events:
        if e.kind == kind and (not name or name in _event_name_fields(e)):
            return float(e.t_us)
    return None


def step_time(result: SimResultLike, step: TourStep) -> float | None:
    """When the dashboard pauses for this step: at_us, else the first matching event, else None (no pause)."""
    if step.at_us is not None:
        return step.at_us
    if step.at_event:
        return event_time(result, step.at_event)
    return None


def tour_results(result: SimResultLike) -> list[dict[str, Any]]:
    """One row per tour step: {step, title, metric, op, expected, actual, passed, t_us, error}.

    A step without a check passes when its pause point exists in the run; a step whose
    at_event matches nothing fails (the dashboard could never stop there).
    """
    rows = []
    for i, step in enumerate(result.spec.tour):
        t = step_time(result, step)
        row: dict[str, Any] = {
            "step": i + 1,
            "title": step.title,
            "metric": None,
            "op": None,
            "expected": None,
            "actual": None,
            "passed": True,
            "t_us": t,
            "error": None,
        }
        if step.at_event and t is None:
            row.update(passed=False, error=f"no event matches at_event {step.at_event!r}")
        if step.check is not None:
            c = step.check
            row.update(metric=c.metric, op=c.op, expected=c.value)
            try:
                actual = metric_value(result, c.metric)
            except KeyError as e:
                row.update(passed=False, error=str(e).strip("'\""))
            else:
                row["actual"] = actual
                row["passed"] = bool(row["passed"]) and check_passes(c, actual)
        rows.append(row)
    return rows


def format_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return "-" if v is None else str(v)


def format_results(rows: list[dict[str, Any]]) -> str:
    """A plain-text table for the terminal."""
    lines = []
    for r in rows:
        mark = "PASS" if r["passed"] else "FAIL"
        claim = f"{r['metric']} {r['op']} {format_value(r['expected'])}" if r["metric"] else "(no check)"
        actual = f"  actual {format_value(r['actual'])}" if r["metric"] else ""
        err = f"  [{r['error']}]" if r["error"] else ""
        lines.append(f"{mark}  {r['step']:>2}. {r['title'][:48]:48s} {claim}{actual}{err}")
    return "\n".join(lines)
