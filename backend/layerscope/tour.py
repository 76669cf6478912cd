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
from collections.abc import Callable
from typing import Any

from layerscope.result import SimResult
from layerscope.scenario import TourCheck, TourStep

Figure = float | int | bool | str | list[Any] | None

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


def _term(result: SimResult, term: str) -> Figure:
    source, key = result, term
    if term.startswith("compare."):
        if result.compare is None:
            raise KeyError(f"{term!r}: this run has no compare run")
        source, key = result.compare, term.removeprefix("compare.")
    if key not in source.summary:
        raise KeyError(f"{term!r} is not a summary figure of this run")
    return source.summary[key]


def metric_value(result: SimResult, metric: str) -> Figure:
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


def matching_events(result: SimResult, at_event: str) -> list[Any]:
    """The events 'kind' or 'kind:name' matches; 'compare.kind:name' looks in the compare run (on its own clock,
    which the dashboard draws on the same axis from 0)."""
    if at_event.startswith("compare."):
        if result.compare is None:
            return []
        result, at_event = result.compare, at_event.removeprefix("compare.")
    kind, _, name = at_event.partition(":")
    return [e for e in result.events if e.kind == kind and (not name or name in _event_name_fields(e))]


def event_time(result: SimResult, at_event: str) -> float | None:
    """Simulated time of the first event matching 'kind' or 'kind:name'; None when nothing matches."""
    found = matching_events(result, at_event)
    return float(found[0].t_us) if found else None


def _picked(result: SimResult, step: TourStep) -> Any:
    """The event a step pauses at: the first match, the at_nth-th, or the one with the largest at_max field."""
    assert step.at_event is not None
    found = matching_events(result, step.at_event)
    at_max = step.at_max
    if at_max is not None:
        valued = [e for e in found if isinstance(getattr(e, at_max, None), int | float)]
        return max(valued, key=lambda e: getattr(e, at_max)) if valued else None  # the first of equals
    i = 0 if step.at_nth is None else step.at_nth - 1 if step.at_nth > 0 else step.at_nth
    return found[i] if -len(found) <= i < len(found) else None


def step_time(result: SimResult, step: TourStep) -> float | None:
    """When the dashboard pauses for this step: at_us, else the picked event's time, else None (no moment)."""
    if step.at_us is not None:
        return step.at_us
    if step.at_event:
        e = _picked(result, step)
        return None if e is None else float(e.t_us)
    return None


def run_end_us(result: SimResult) -> float:
    """The end of the run on its own clock: its last event, or the end of its last kernel."""
    end = 0.0
    for e in result.events:
        end = max(end, float(e.t_us), float(getattr(e, "start_us", 0.0)) + float(getattr(e, "dur_us", 0.0) or 0.0))
    return end


def shown_panels(result: SimResult) -> set[str]:
    """The dashboard's panels this run shows (frontend/static/js/main.js collapsePanels and showServing): the
    decode-latency panel only where a run has decode steps, the serving panels for a workload of more than one
    request, the deployment card for a deployment, the sweep panel for those and where the scenario names a sweep
    (views/sweep.js)."""
    spec = result.spec
    runs = [result] + ([result.compare] if result.compare is not None else [])
    kinds = {e.kind for run in runs for e in run.events}
    shown = {"timeline", "memory", "banks", "topology", "stages", "claims", "tour", "log", "controls"}
    if "decode_step" in kinds:
        shown.add("latency")
    if spec.workload is not None and spec.workload.num_requests > 1:
        shown |= {"requests", "step-mix", "latency-dist", "sweep"}  # a serving sweep applies to any serving run
    if "numerics" in kinds:
        shown.add("numerics")
    if "experts" in kinds:
        shown.add("experts")
    if spec.deployment is not None:
        shown.add("deployment")
    if spec.deployment is not None and spec.deployment.dp > 1:  # views/dpranks.js: the main run's DP ranks
        shown.add("dp-ranks")
    if getattr(spec, "sweep", None) is not None:
        shown.add("sweep")
    return shown


def tour_problems(result: SimResult) -> list[list[str]]:
    """Per step, what keeps the dashboard from landing it: a highlight of a panel the run does not show, no
    moment, a moment earlier than the step before, two steps at one moment."""
    shown = shown_panels(result)
    out: list[list[str]] = []
    prev: tuple[int, float] | None = None
    for i, step in enumerate(result.spec.tour):
        problems = [f"highlights {p!r}, a panel this run does not show" for p in step.highlight if p not in shown]
        t = step_time(result, step)
        if t is None:
            problems.append(f"no event matches at_event {step.at_event!r}" if step.at_event
                            else "has no moment of its own (give at_us or at_event)")
        elif prev is not None and t < prev[1]:
            problems.append(f"its moment {t:.6g} us is earlier than step {prev[0] + 1}'s ({prev[1]:.6g} us)")
        elif prev is not None and t == prev[1]:
            problems.append(f"is at the same moment as step {prev[0] + 1} ({t:.6g} us)")
        if t is not None and (prev is None or t > prev[1]):
            prev = (i, t)  # the latest moment so far: a later step must come after it
        out.append(problems)
    return out


def zoom_window(result: SimResult, step: TourStep, t: float | None) -> list[float] | None:
    """[x0, x1] of the step's zoom around its moment, clamped to the run; None for the whole run."""
    if step.zoom is None or t is None:
        return None
    return [max(0.0, t - step.zoom.before_us), min(max(run_end_us(result), t), t + step.zoom.after_us)]


def tour_results(result: SimResult) -> list[dict[str, Any]]:
    """One row per tour step: {step, title, metric, op, expected, actual, passed, t_us, zoom, error}.

    A step passes when its check holds and the dashboard can land it (tour_problems finds nothing)."""
    rows = []
    problems = tour_problems(result)
    for i, step in enumerate(result.spec.tour):
        t = step_time(result, step)
        row: dict[str, Any] = {
            "step": i + 1,
            "title": step.title,
            "metric": None,
            "op": None,
            "expected": None,
            "actual": None,
            "passed": not problems[i],
            "t_us": t,
            "zoom": zoom_window(result, step, t),
            "error": "; ".join(problems[i]) or None,
        }
        if step.check is not None:
            c = step.check
            row.update(metric=c.metric, op=c.op, expected=c.value)
            try:
                actual = metric_value(result, c.metric)
            except KeyError as e:
                msg = str(e).strip("'\"")
                row.update(passed=False, error="; ".join(filter(None, [row["error"], msg])))
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
