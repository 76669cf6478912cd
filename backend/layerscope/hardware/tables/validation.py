"""The interpolation's error on measured rows it was not given: per table, every other measured value along the swept
dimension (m for a GEMM, tokens for the MoE, seq_len / kv_len for attention, bytes for a collective; the first and
last kept so that every held-out row lies inside the grid) is left out, the grid is rebuilt from the rest, and each
left-out row is predicted. bench/bench_kernels.py prints the figures; tests/hardware/tables hold them to the issue's
bounds (median <= 8%, p90 <= 20%).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerscope.hardware.tables import HOST_BOUND, SWEPT, manifest, read_rows
from layerscope.hardware.tables.grid import Grid


@dataclass(frozen=True)
class HeldOut:
    system: str
    op: str
    family: str  # the op and its dtype / impl, e.g. "gemm bf16", "all_reduce custom_graph"
    errors: np.ndarray  # |predicted / measured - 1| per held-out row that the rest of the grid covers
    uncovered: int  # held-out rows whose cell lost a corner too

    def summary(self) -> dict[str, float]:
        e = self.errors
        return {"rows": int(e.size), "median": float(np.median(e)) if e.size else float("nan"),
                "p90": float(np.quantile(e, 0.9)) if e.size else float("nan"), "uncovered": self.uncovered}


def rows(system: str, op: str) -> list[tuple[tuple, tuple[float, ...], float]]:
    return [(key, x, us) for key, x, us, _ in read_rows(system, op)]


def held_out_rows(system: str, op: str) -> list[tuple[str, tuple, tuple[float, ...], float, float | None]]:
    """(family, key, point, measured us, predicted us or None where the kept grid does not cover it) per row left
    out; family is the op and the first element of its key (dtype or impl), e.g. "gemm bf16"."""
    d = SWEPT[op]
    data = rows(system, op)
    axes: dict[tuple, list[float]] = {}
    for key, x, _ in data:
        axes.setdefault((key, x[:d] + x[d + 1:]), []).append(x[d])
    left_out: set[tuple[tuple, float]] = set()
    for line, values in axes.items():
        clusters = _clusters(sorted(set(values)))
        left_out.update((line, v) for c in clusters[1:-1:2] for v in c)
    keep: list[tuple[tuple, tuple[float, ...], float]] = []
    test: list[tuple[tuple, tuple[float, ...], float]] = []
    host_floor = _host_floors(data) if op == "gemm" else {}
    for r in data:
        key, x, us = r
        if op == "gemm" and key[0] == "fp8_block" and us < HOST_BOUND * host_floor[(key, x[1:])]:
            continue  # host-launch-bound eager rows: never priced as measured (tables._gemm)
        (test if ((key, x[:d] + x[d + 1:]), x[d]) in left_out else keep).append(r)
    grid = Grid.build(keep, monotone=d)
    return [(op if op == "all_to_all" else f"{op} {key[0]}", key, x, us, grid(key, x)) for key, x, us in test]


def held_out(system: str, op: str) -> list[HeldOut]:
    """One HeldOut per family of the table."""
    out: dict[str, tuple[list[float], int]] = {}
    for family, _, _, us, p in held_out_rows(system, op):
        errs, missing = out.setdefault(family, ([], 0))
        if p is None:
            out[family] = (errs, missing + 1)
        else:
            errs.append(abs(p / us - 1.0))
    return [HeldOut(system, op, fam, np.asarray(e), miss) for fam, (e, miss) in sorted(out.items())]


def fp8_proxy_ratios(system: str) -> np.ndarray:
    """Block-fp8 / per-tensor fp8 GEMM time at every shape both measured where the block-fp8 row is GPU-bound: how
    well the per-tensor rows stand in for host-bound block-fp8 ones (tables.FP8_PROXY_SYSTEMS)."""
    data = rows(system, "gemm")
    per_tensor = {x: us for key, x, us in data if key == ("fp8",)}
    floors = _host_floors(data)
    return np.asarray([us / per_tensor[x] for key, x, us in data if key == ("fp8_block",) and x in per_tensor
                       and us >= HOST_BOUND * floors[(key, x[1:])]])


def _clusters(values: list[float]) -> list[list[float]]:
    """Measured values in groups: a GEMM's M grid measures both sides of each tile boundary (32 and 33, 48 and
    49, ...); the two sides are one point of the sweep, left out or kept together."""
    out: list[list[float]] = []
    for v in values:
        if out and v >= 17 and v == out[-1][-1] + 1:
            out[-1].append(v)
        else:
            out.append([v])
    return out


def _host_floors(data: list[tuple[tuple, tuple[float, ...], float]]) -> dict[tuple, float]:
    floors: dict[tuple, float] = {}
    for key, x, us in data:
        floors[(key, x[1:])] = min(us, floors.get((key, x[1:]), us))
    return floors


def all_held_out() -> list[HeldOut]:
    out = []
    for info in manifest()["files"].values():
        out += held_out(info["system"], info["op"])
    return out
