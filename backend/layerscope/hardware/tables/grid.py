"""Interpolation over a measured grid: multilinear in log(time) against log(each dimension).

    Grid.build(rows)                   rows: (key, (x1, .., xn), us); one rectilinear grid per categorical key
    grid(key, (x1, .., xn)) -> us | None

Per key, each dimension's axis is the sorted set of values measured along it; a query is bracketed on every axis by
the nearest measured values below and above (an exact hit uses the point itself), and log(us) is interpolated
linearly in log(x) between them, one dimension after another (the 2^n corners of the cell). Kernel times are close
to power laws in their sizes piecewise (a GEMM's time ~ M once bandwidth-bound gives way to compute; an all-reduce's
time ~ bytes past its latency floor), which log-log interpolation follows exactly and linear interpolation does not.
Measured sweeps carry glitches (a row several times slower, or faster, than both its neighbours) and a kernel given
more work is not faster, so with `monotone=d` each line along dimension d is cleaned first: a point more than
GLITCH x above or below both neighbours (and further than they are apart) takes the median of the three; then the
line is made non-decreasing (a running minimum from the largest value down, as hardware/collectives.py does for its
NCCL curves). No extrapolation: a query outside an axis's measured range, or a cell with a corner never measured,
returns None and the caller prices the kernel analytically. The error of the method on measured rows left out of the
grid: bench/bench_kernels.py (bench/README.md "Per-op validation against aiconfigurator-core").
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

Key = tuple
GLITCH = 1.5  # a point 1.5x off both its neighbours, in the same direction, is a measurement glitch
Point = tuple[float, ...]


@dataclass(frozen=True)
class _Cells:
    axes: tuple[tuple[float, ...], ...]  # measured values per dimension, ascending
    log_axes: tuple[tuple[float, ...], ...]
    log_us: dict[tuple[int, ...], float]  # grid index -> log(time); absent = never measured


class Grid:
    """Each key's cells are built the first time that key is read: a run reads a few keys of a table."""

    def __init__(self, points: Mapping[Key, dict[Point, list[float]]], monotone: int | None = None) -> None:
        """`points`: per key, the measured times at each point (a mapping may build a key's when it is read)."""
        self._points = points
        self._monotone = monotone
        self._cells: dict[Key, _Cells | None] = {}

    @classmethod
    def build(cls, rows: Iterable[tuple[Key, Point, float]], monotone: int | None = None) -> Grid:
        """Rows measured more than once at the same point keep their median."""
        by_key: dict[Key, list[tuple[Point, float]]] = {}
        for key, x, us in rows:
            by_key.setdefault(key, []).append((x, us))
        points = {key: p for key, xs in by_key.items() if (p := cls.points(xs))}
        return cls(points, monotone)

    @staticmethod
    def points(rows: Iterable[tuple[Point, float]]) -> dict[Point, list[float]]:
        """One key's rows (point, us) as its measured times per point; rows with a coordinate or time that is not
        positive are left out."""
        points: dict[Point, list[float]] = {}
        for x, us in rows:
            x = tuple(map(float, x))
            if us > 0 and all(map((0.0).__lt__, x)):  # every coordinate positive (NaN is not)
                points.setdefault(x, []).append(us)
        return points

    def _cell(self, key: Key) -> _Cells | None:
        try:
            return self._cells[key]
        except KeyError:
            pass
        by_point = self._points.get(key)
        cell = _build_cells(by_point, self._monotone) if by_point else None  # no row left: never measured
        self._cells[key] = cell
        return cell

    def keys(self) -> list[Key]:
        return list(self._points)

    def axes(self, key: Key) -> tuple[tuple[float, ...], ...] | None:
        c = self._cell(key)
        return None if c is None else c.axes

    def __call__(self, key: Key, x: Sequence[float]) -> float | None:
        c = self._cells.get(key, _UNBUILT)
        if c is _UNBUILT:
            c = self._cell(key)
        if c is None or len(x) != len(c.axes):
            return None
        brackets = _brackets(c, x)
        if brackets is None:
            return None
        # the 2^n corners in the order `_corners` gives them, each weight the product of its dimensions' weights
        # from the first (math.prod's order), summed in that order: the same floats as `interpolate`, without
        # building the corner tuples (a serving run's first prices make thousands of these lookups)
        get = c.log_us.get
        total = 0.0
        if len(brackets) == 1:
            for i, w in brackets[0]:
                y = get((i,))
                if y is None:
                    return None
                total += w * y
        elif len(brackets) == 2:
            b0, b1 = brackets
            for i0, w0 in b0:
                for i1, w1 in b1:
                    y = get((i0, i1))
                    if y is None:
                        return None
                    total += w0 * w1 * y
        elif len(brackets) == 3:
            b0, b1, b2 = brackets
            for i0, w0 in b0:
                for i1, w1 in b1:
                    for i2, w2 in b2:
                        y = get((i0, i1, i2))
                        if y is None:
                            return None
                        total += w0 * w1 * w2 * y
        else:
            return _interpolate(c, brackets)
        return math.exp(total)

    def interpolate(self, key: Key, x: Sequence[float]) -> float | None:
        """The same lookup as calling the grid, through the general corner walk (any number of dimensions): the
        reference the unrolled paths of `__call__` are tested against."""
        c = self._cell(key)
        if c is None or len(x) != len(c.axes):
            return None
        brackets = _brackets(c, x)
        return None if brackets is None else _interpolate(c, brackets)


_UNBUILT = _Cells((), (), {})  # Grid._cells' marker for a key whose cells are not built yet


def _brackets(c: _Cells, x: Sequence[float]) -> list[tuple[tuple[int, float], ...]] | None:
    """Per dimension, the measured indices around x and their weights: ((i, 1.0),) on a measured value, else
    ((i - 1, 1 - f), (i, f)) with f linear in log(x); None outside an axis."""
    brackets: list[tuple[tuple[int, float], ...]] = []
    for v, axis, log_axis in zip(x, c.axes, c.log_axes, strict=True):
        if v <= 0 or v < axis[0] or v > axis[-1]:
            return None
        i = bisect.bisect_left(axis, v)
        if axis[i] == v:
            brackets.append(((i, 1.0),))
            continue
        f = (math.log(v) - log_axis[i - 1]) / (log_axis[i] - log_axis[i - 1])
        brackets.append(((i - 1, 1.0 - f), (i, f)))
    return brackets


def _interpolate(c: _Cells, brackets: list[tuple[tuple[int, float], ...]]) -> float | None:
    total = 0.0
    for corner in _corners(brackets):
        idx = tuple(i for i, _ in corner)
        y = c.log_us.get(idx)
        if y is None:
            return None
        w = math.prod(wt for _, wt in corner)
        total += w * y
    return math.exp(total)


def _build_cells(by_point: dict[Point, list[float]], monotone: int | None) -> _Cells:
    dims = len(next(iter(by_point)))
    axes = tuple(tuple(sorted({p[d] for p in by_point})) for d in range(dims))
    index = [{v: i for i, v in enumerate(a)} for a in axes]
    log_us = {}
    at = dict.__getitem__
    for p, ts in by_point.items():  # a point's grid index: each coordinate's place on its axis
        log_us[tuple(map(at, index, p))] = math.log(ts[0] if len(ts) == 1 else sorted(ts)[len(ts) // 2])
    if monotone is not None:
        lines = _lines(log_us, monotone)
        _despike(log_us, lines)
        _running_min(log_us, lines)
    return _Cells(axes, tuple(tuple(math.log(v) for v in a) for a in axes), log_us)


def _lines(log_us: dict[tuple[int, ...], float], d: int) -> list[list[tuple[int, ...] | None]]:
    """The grid's lines along dimension d: per line (the other coordinates), its measured indices in ascending d,
    with None where an index between two measured ones was not measured (a gap breaks the neighbourhood)."""
    by_line: dict[tuple[int, ...], dict[int, tuple[int, ...]]] = {}
    for idx in log_us:
        by_line.setdefault(idx[:d] + idx[d + 1:], {})[idx[d]] = idx
    out = []
    for line in by_line.values():
        lo, hi = min(line), max(line)
        out.append([line.get(i) for i in range(lo, hi + 1)])
    return out


def _despike(log_us: dict[tuple[int, ...], float], lines: list[list[tuple[int, ...] | None]]) -> None:
    """Along the monotone dimension, a point GLITCH x above or below both measured neighbours, and further outside
    them than they are apart, takes the median of the three (each judged against the measured values, not the
    fixed ones)."""
    limit = math.log(GLITCH)
    fixed = {}
    for line in lines:
        for a, idx, b in zip(line, line[1:], line[2:], strict=False):  # each point between two others
            if a is None or idx is None or b is None:
                continue
            lo, y, hi = log_us[a], log_us[idx], log_us[b]
            off = max(y - max(lo, hi), min(lo, hi) - y)  # how far outside its neighbours' range
            if off > max(limit, abs(hi - lo)):  # and further than the neighbours are from each other
                fixed[idx] = sorted((lo, y, hi))[1]
    log_us.update(fixed)


def _running_min(log_us: dict[tuple[int, ...], float], lines: list[list[tuple[int, ...] | None]]) -> None:
    """Along the monotone dimension, each point no slower than the next measured one above it (from the top down)."""
    for line in lines:
        for idx, above in zip(line[-2::-1], line[:0:-1], strict=True):
            if idx is not None and above is not None and log_us[idx] > log_us[above]:
                log_us[idx] = log_us[above]


def _corners(brackets: list[tuple[tuple[int, float], ...]]) -> list[tuple[tuple[int, float], ...]]:
    out: list[tuple[tuple[int, float], ...]] = [()]
    for b in brackets:
        out = [(*c, choice) for c in out for choice in b]
    return out
