"""Sweep a scenario over a grid of fields (dotted names for nested ones), on local cores or a Ray cluster.

    run_grid(spec, {"deployment.tp": [4, 8], "workload.max_concurrency": [1, 16, 64]}, jobs=4) -> dict

Points run in grid order (the last field varies fastest) and come back in that order whatever ran them, so the
result is the same, byte for byte, with --jobs 1, --jobs N or --ray: each point is one deterministic simulation.
A point a deployment cannot run (weights that do not fit) is kept, with its error, off the Pareto front.
The Pareto front: output throughput per GPU (higher is better) against median TPOT (lower is better), the
trade-off a deployment is chosen on.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import yaml
from pydantic import ValidationError

from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioError, ScenarioSpec, format_validation_error, known_field

MAX_POINTS = 256  # a sweep is a handful of deployments x loads; bounded so no request can run without end
MAX_JOBS = 64
THROUGHPUT = "output_throughput_per_gpu"
TPOT = "median_tpot_ms"
GOODPUT = "request_goodput_per_gpu"  # with --goodput: good requests/s per GPU


def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    """`field=v1,v2,...` strings (values read as YAML scalars) -> {field: [values]}."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        values = [_scalar(v.strip()) for v in raw.split(",") if v.strip()]
        if not sep or not key or not values:
            raise ScenarioError(f"--grid {item!r}: expected field=value[,value...]")
        if key in grid:
            raise ScenarioError(f"--grid {key!r} given twice")
        grid[key] = values
    return grid


def _scalar(raw: str) -> Any:
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def with_fields(spec: ScenarioSpec, changes: dict[str, Any]) -> ScenarioSpec:
    """A new validated spec with (dotted) fields replaced; the error names the point and the field."""
    for key in changes:
        if not known_field(key) or key in ("compare", "tour", "sweep"):
            raise ScenarioError(f"unknown or not sweepable field {key!r}")
    try:
        return spec.with_overrides(changes)
    except ValidationError as e:
        raise ScenarioError(format_validation_error(e, ", ".join(f"{k}={v}" for k, v in changes.items()))) from None


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    if not grid:
        raise ScenarioError("give at least one --grid field=values")
    n = 1
    for values in grid.values():
        n *= len(values)
    if n > MAX_POINTS:
        raise ScenarioError(f"the grid has {n} points; the limit is {MAX_POINTS}")
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*grid.values())]


class SweepCancelled(Exception):
    """Nobody waits for the sweep any more (the server's client left)."""


def run_point(spec_json: str, check: Callable[[int], None] | None = None) -> dict[str, Any]:
    """One point: a spec (as JSON, so it travels to other processes and Ray workers unchanged) -> its summary.
    `check`: called every few engine steps; raises to stop the run."""
    spec = ScenarioSpec.model_validate_json(spec_json)
    # a point keeps its summary only: build no events
    return dict(simulate(spec, check=check, summary_only=True).summary)


def run_points_until(stop: threading.Event) -> Callable[[list[str]], list[dict[str, Any]]]:
    """A run_grid runner for the server: the points one after another in this thread, stopped at the next engine
    check once `stop` is set (its client disconnected), as vLLM aborts a request whose client left."""

    def check(_events: int) -> None:
        if stop.is_set():
            raise SweepCancelled("the sweep's client left")

    def run(specs: list[str]) -> list[dict[str, Any]]:
        out = []
        for s in specs:
            check(0)
            out.append(run_point(s, check))
        return out

    return run


def _point_specs(spec: ScenarioSpec, points: list[dict[str, Any]]) -> list[str]:
    """Per point: the spec's JSON, or "!error" when the point is not a valid scenario."""
    base = spec.model_copy(update={"compare": None, "tour": []})
    out = []
    for p in points:
        try:
            out.append(with_fields(base, p).model_dump_json())
        except ScenarioError as e:
            out.append("!" + str(e))
    return out


def run_grid(spec: ScenarioSpec, grid: dict[str, list[Any]], jobs: int = 1, ray_address: str | None = None,
             runner: Callable[[list[str]], list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """The sweep's result (the --json shape): scenario, grid, points with summary, per-GPU throughput, median
    TPOT and Pareto marks."""
    if not 1 <= jobs <= MAX_JOBS:
        raise ScenarioError(f"--jobs {jobs}: must be 1..{MAX_JOBS}")
    points = grid_points(grid)
    specs = _point_specs(spec, points)
    todo = [s for s in specs if not s.startswith("!")]
    run = runner or (lambda xs: _run_ray(xs, ray_address) if ray_address else _run_local(xs, jobs))
    done = iter(run(todo))
    rows: list[dict[str, Any]] = []
    for p, s in zip(points, specs, strict=True):
        if s.startswith("!"):
            rows.append({"set": p, "summary": {}, THROUGHPUT: None, TPOT: None, "pareto": False, "error": s[1:]})
            continue
        summary = next(done)
        row = {"set": p, "summary": summary, THROUGHPUT: _per_gpu(summary), TPOT: summary.get(TPOT),
               "pareto": False}
        if "request_goodput" in summary:  # with --goodput SLOs
            row[GOODPUT] = _per_gpu(summary, "request_goodput")
        rows.append(row)
    mark_pareto(rows)
    return {"scenario": spec.name, "grid": grid, "points": rows}


def _per_gpu(summary: dict[str, Any], key: str = "output_throughput") -> float | None:
    """A figure per GPU: over the summary's num_gpus, every GPU of the run (a disaggregated run's pools, or its
    replicas x dp x tp)."""
    tput = summary.get(key)
    if tput is None:
        return None
    return round(float(tput) / int(summary.get("num_gpus") or 1), 4 if key == "request_goodput" else 3)


def mark_pareto(rows: list[dict[str, Any]]) -> None:
    """A point is on the front when no other point has at least its throughput per GPU and at most its median
    TPOT, and is better in one."""
    ok = [(r, r[THROUGHPUT], r[TPOT]) for r in rows if r[THROUGHPUT] is not None and r[TPOT] is not None]
    for r, tput, tpot in ok:
        r["pareto"] = not any(t >= tput and lat <= tpot and (t > tput or lat < tpot) for _, t, lat in ok)


def _run_local(specs: list[str], jobs: int) -> list[dict[str, Any]]:
    if jobs == 1 or len(specs) <= 1:
        return [run_point(s) for s in specs]
    with ProcessPoolExecutor(max_workers=min(jobs, len(specs))) as pool:
        return list(pool.map(run_point, specs))  # map keeps the order of the grid


def _run_ray(specs: list[str], address: str) -> list[dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise ScenarioError("--ray needs Ray: pip install 'layerscope[ray]'") from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=None if address == "local" else address, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(run_point)
        return ray.get([remote.remote(s) for s in specs])
    finally:
        if started:
            ray.shutdown()
