"""Grid: log-log multilinear interpolation over a measured grid, no extrapolation, missing corners uncovered."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from layerscope.hardware.tables import grid
from layerscope.hardware.tables.grid import Grid


def power_law_rows(key: tuple = ("a",)) -> list[tuple[tuple, tuple[float, ...], float]]:
    return [(key, (m, n), 3.0 * m**0.5 * n**1.5) for m in (1, 4, 16, 64) for n in (2, 8, 32)]


def test_measured_points_come_back_exactly() -> None:
    g = Grid.build(power_law_rows())
    assert g(("a",), (16, 8)) == pytest.approx(3.0 * 4 * 8**1.5)


def test_a_power_law_is_interpolated_exactly_between_points() -> None:
    g = Grid.build(power_law_rows())
    for m, n in [(2.0, 3.0), (10.0, 20.0), (50.0, 2.5)]:
        assert g(("a",), (m, n)) == pytest.approx(3.0 * m**0.5 * n**1.5, rel=1e-9)


def test_linear_interpolation_would_be_wrong_where_log_log_is_right() -> None:
    g = Grid.build([(("k",), (x,), x**2) for x in (1.0, 4.0)])
    assert g(("k",), (2.0,)) == pytest.approx(4.0)  # linear would give 6


def test_no_extrapolation_and_unknown_keys_are_uncovered() -> None:
    g = Grid.build(power_law_rows())
    assert g(("a",), (0.5, 8)) is None
    assert g(("a",), (65, 8)) is None
    assert g(("b",), (4, 8)) is None
    assert g(("a",), (4,)) is None  # wrong number of dimensions


def test_a_cell_with_a_missing_corner_is_uncovered() -> None:
    rows = [r for r in power_law_rows() if r[1] != (64, 32)]
    g = Grid.build(rows)
    assert g(("a",), (32, 16)) is None
    assert g(("a",), (8, 4)) is not None


def test_repeated_measurements_keep_their_median() -> None:
    g = Grid.build([(("k",), (1.0,), t) for t in (1.0, 2.0, 9.0)] + [(("k",), (2.0,), 5.0)])
    assert g(("k",), (1.0,)) == pytest.approx(2.0)


def test_monotone_removes_a_spike_below_a_faster_larger_point() -> None:
    rows = [(("k",), (1.0,), 10.0), (("k",), (2.0,), 50.0), (("k",), (4.0,), 12.0), (("k",), (8.0,), 20.0)]
    raw, smooth = Grid.build(rows), Grid.build(rows, monotone=0)
    assert raw(("k",), (2.0,)) == pytest.approx(50.0)
    assert smooth(("k",), (2.0,)) == pytest.approx(12.0)
    assert smooth(("k",), (8.0,)) == pytest.approx(20.0)
    assert math.isclose(smooth(("k",), (1.0,)), 10.0)


def test_a_glitch_off_both_neighbours_takes_their_median_before_the_running_minimum() -> None:
    """A row far faster than both neighbours (B200's fp8 GEMM at M = 8192, K = 256: 13 us between 32 and 113) would
    otherwise pull every smaller point down to it."""
    xs, ts = (1.0, 2.0, 4.0, 8.0, 16.0), (10.0, 20.0, 2.0, 40.0, 80.0)
    g = Grid.build([(("k",), (x,), t) for x, t in zip(xs, ts, strict=True)], monotone=0)
    assert g(("k",), (4.0,)) == pytest.approx(20.0)
    assert g(("k",), (2.0,)) == pytest.approx(20.0) and g(("k",), (1.0,)) == pytest.approx(10.0)
    steps = [(("k",), (x,), t) for x, t in zip(xs, (10.0, 12.0, 13.0, 30.0, 31.0), strict=True)]  # a real step
    assert Grid.build(steps, monotone=0)(("k",), (8.0,)) == pytest.approx(30.0)


def test_a_keys_cells_are_built_when_it_is_first_read_and_match_a_grid_of_that_key_alone() -> None:
    rows = power_law_rows(("a",)) + [(("b",), x, us * 2) for _, x, us in power_law_rows()]
    g = Grid.build(rows, monotone=0)
    assert g._cells == {}  # nothing built until a key is read
    assert g.keys() == [("a",), ("b",)]
    assert g(("b",), (8, 4)) == Grid.build(rows[12:], monotone=0)(("b",), (8, 4))
    assert list(g._cells) == [("b",)]  # the other key is never built
    assert g(("c",), (8, 4)) is None and g.axes(("c",)) is None


def test_rows_with_a_non_positive_or_nan_coordinate_are_left_out() -> None:
    g = Grid.build([*power_law_rows(), (("a",), (0.0, 8.0), 1.0), (("a",), (4.0, math.nan), 1.0)])
    assert g.axes(("a",)) == ((1.0, 4.0, 16.0, 64.0), (2.0, 8.0, 32.0))


def test_the_unrolled_lookups_give_the_general_corner_walks_floats_on_every_measured_table() -> None:
    """Grid.__call__ unrolls 1-3 dimensions; Grid.interpolate walks the corners as first written. Bit-equal at
    measured points, between them, on cells with a missing corner and outside the axes, for every key of every
    shipped table."""
    import random

    from layerscope.hardware.tables import SWEPT, table

    rng = random.Random(7)
    checked = 0
    for system in ("h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm"):
        for op in SWEPT:
            t = table(system, op)
            for key in t.refs:
                axes = t.grid.axes(key)
                if axes is None:
                    continue
                for _ in range(40):
                    x = tuple(rng.choice(a) if rng.random() < 0.3 else
                              math.exp(rng.uniform(math.log(a[0]) - 0.1, math.log(a[-1]) + 0.1)) for a in axes)
                    assert t.grid(key, x) == t.grid.interpolate(key, x), (system, op, key, x)
                    checked += t.grid(key, x) is not None
    assert checked > 5000


def test_a_four_dimensional_grid_takes_the_general_walk() -> None:
    rows = [(("a",), (m, n, k, j), m * n * k * j) for m in (1, 2) for n in (1, 2) for k in (1, 2) for j in (1, 2)]
    g = Grid.build(rows)
    assert g(("a",), (1.5, 1.5, 1.5, 1.5)) == g.interpolate(("a",), (1.5, 1.5, 1.5, 1.5))
    assert g(("a",), (1.5, 1.5, 1.5, 1.5)) == pytest.approx(1.5**4)


def _cleaned_point_by_point(log_us: dict[tuple[int, ...], float], d: int) -> dict[tuple[int, ...], float]:
    """The cleaning as first written (each point's neighbours looked up one by one): the reference for the
    line-by-line walk of grid._despike and grid._running_min."""
    out, fixed = dict(log_us), {}
    for idx, y in out.items():
        lo = out.get((*idx[:d], idx[d] - 1, *idx[d + 1:]))
        hi = out.get((*idx[:d], idx[d] + 1, *idx[d + 1:]))
        if lo is not None and hi is not None:
            off = max(y - max(lo, hi), min(lo, hi) - y)
            if off > max(math.log(grid.GLITCH), abs(hi - lo)):
                fixed[idx] = sorted((lo, y, hi))[1]
    out.update(fixed)
    for idx in sorted(out, key=lambda i: (i[:d] + i[d + 1:], -i[d])):
        above = out.get((*idx[:d], idx[d] + 1, *idx[d + 1:]))
        if above is not None and out[idx] > above:
            out[idx] = above
    return out


@pytest.mark.parametrize("seed", range(20))
def test_cleaning_line_by_line_equals_point_by_point_on_grids_with_gaps_and_glitches(seed: int) -> None:
    rng = random.Random(seed)
    shape = [rng.randint(1, 7) for _ in range(rng.randint(1, 3))]
    points = {p: [math.exp(sum(p) * 0.3 + rng.choice((0.0, 0.0, 0.0, 1.2, -1.5)))] for p in
              itertools.product(*(range(1, n + 1) for n in shape)) if rng.random() > 0.2}  # gaps, glitches
    if not points:
        return
    for d in range(len(shape)):
        cells = grid._build_cells(points, d)
        assert cells.log_us == _cleaned_point_by_point(grid._build_cells(points, None).log_us, d)
