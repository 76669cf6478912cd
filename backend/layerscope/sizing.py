"""Sizing a deployment for a request rate under SLOs: `layerscope plan --request-rate R --slo ttft:MS,tpot:MS`.

    candidates = colocated (one engine of tp GPUs)  +  replicas (n engines of tp GPUs behind the router)
               + data-parallel attention (one engine of dp ranks x tp GPUs, experts over all: ep = dp x tp)
               + xPyD splits (x prefill, y decode engines of tp each; or decode engines of dp ranks, wide EP)
    each candidate: the workload at rate R, simulated (summary only) -> request_goodput, SLO attainment
    meets the SLOs: attainment >= the target (90%: DistServe's, OSDI'24, "SLO attainment" of 90%)
    the answer: the fewest GPUs that meet them (ties: the higher goodput per GPU)

A candidate a deployment cannot run (weights that do not fit, nvlink across nodes) is kept with its refusal.
A candidate past one node's GPUS_PER_NODE asks for the nodes it fills.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from layerscope.deployment import GPUS_PER_NODE
from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec, format_validation_error

ATTAINMENT = 90.0  # % of requests meeting every SLO: DistServe's (OSDI'24) target
MAX_CANDIDATES = 64  # each is one simulation: the grid is bounded


@dataclass(frozen=True)
class Candidate:
    label: str
    deployment: dict[str, Any]  # the deployment field's overrides

    @property
    def num_gpus(self) -> int:
        dis = self.deployment.get("disaggregation")
        if dis is None:
            d = self.deployment
            return int(d["tp"]) * int(d.get("dp", 1)) * int(d.get("replicas", 1))
        return sum(int(dis[p]["instances"]) * int(dis[p]["tp"]) * int(dis[p].get("dp", 1))
                   for p in ("prefill", "decode"))


def _colocated(label: str, tp: int, replicas: int = 1, dp: int = 1) -> Candidate:
    """One shape on its own GPUs; dp > 1 spreads the experts over every GPU (DeploymentSpec derives ep = dp x tp)."""
    return Candidate(label, {"tp": tp, "ep": 1, "dp": dp, "replicas": replicas, "disaggregation": None})


def candidates(tps: list[int], splits: list[tuple[int, int]], max_gpus: int, link: str,
               dps: tuple[int, ...] = (2,)) -> list[Candidate]:
    """Colocated at each tp; replicas of each tp (2 up to what max_gpus holds, behind the router); dp ranks of each
    tp (each of dps); each xPyD split at each tp (both pools alike), and with a decode pool of dp ranks of tp 1
    (each of dps); all up to max_gpus."""
    out = [_colocated(f"colocated tp{tp}", tp) for tp in tps]
    out += [_colocated(f"{n} replicas tp{tp}", tp, replicas=n) for tp in tps for n in range(2, max_gpus // tp + 1)]
    out += [_colocated(f"dp{dp} tp{tp}", tp, dp=dp) for dp in dps if dp > 1 for tp in tps]
    for x, y in splits:
        for tp in tps:
            pools = {"prefill": {"instances": x, "tp": tp}, "decode": {"instances": y, "tp": tp}}
            out.append(Candidate(f"{x}P{y}D tp{tp}", {"tp": tp, "disaggregation": {**pools, "link": link}}))
            for dp in (d for d in dps if d > 1):  # SGLang's PD decode with DP attention: dp ranks of tp 1, wide EP
                wide = {**pools, "decode": {"instances": y, "tp": 1, "dp": dp}}
                out.append(Candidate(f"{x}P{y}D tp{tp} + decode dp{dp}",
                                     {"tp": tp, "disaggregation": {**wide, "link": link}}))
    out = [_on_nodes(c) for c in out if c.num_gpus <= max_gpus]
    if len(out) > MAX_CANDIDATES:
        raise ValueError(f"the grid has {len(out)} candidates; the limit is {MAX_CANDIDATES}")
    return out


def _on_nodes(c: Candidate) -> Candidate:
    """A candidate past one node asks for the nodes its GPUs fill."""
    if c.num_gpus <= GPUS_PER_NODE:
        return c
    return Candidate(c.label, {**c.deployment, "nodes": -(-c.num_gpus // GPUS_PER_NODE)})


def size(base: ScenarioSpec, rate: float, slos: dict[str, float], grid: list[Candidate],
         attainment: float = ATTAINMENT) -> dict[str, Any]:
    """Every candidate's goodput at `rate` under `slos`, and the fewest GPUs that meet them (None: none does)."""
    rows = []
    for c in grid:
        row: dict[str, Any] = {"candidate": c.label, "num_gpus": c.num_gpus, "deployment": c.deployment}
        dep = {**(base.deployment.model_dump() if base.deployment is not None else {}), **c.deployment}
        try:
            spec = base.with_overrides({"deployment": dep, "workload.request_rate": rate, "goodput": slos,
                                        "compare": None, "tour": []})
        except ValidationError as e:
            rows.append({**row, "error": format_validation_error(e, c.label), "meets_slo": False})
            continue
        s = simulate(spec, summary_only=True).summary
        row.update({k: s.get(k) for k in ("request_goodput", "slo_attainment_pct", "median_ttft_ms", "p99_ttft_ms",
                                          "median_tpot_ms", "p99_tpot_ms", "request_throughput")})
        row["goodput_per_gpu"] = round(float(s["request_goodput"]) / c.num_gpus, 4)
        row["meets_slo"] = float(s["slo_attainment_pct"]) >= attainment
        rows.append(row)
    ok = [r for r in rows if r["meets_slo"]]
    best = min(ok, key=lambda r: (r["num_gpus"], -r["goodput_per_gpu"])) if ok else None
    return {"request_rate": rate, "slo": slos, "attainment_target_pct": attainment,
            "best": best["candidate"] if best else None, "candidates": rows}


def parse_splits(text: str) -> list[tuple[int, int]]:
    """"1P1D,1P2D" -> [(1, 1), (1, 2)]."""
    out = []
    for item in (s.strip().upper() for s in text.split(",") if s.strip()):
        p, sep, d = item.rstrip("D").partition("P")
        if not sep or not p.isdigit() or not d.isdigit() or not item.endswith("D") or int(p) < 1 or int(d) < 1:
            raise ValueError(f"--splits {item!r}: expected xPyD, e.g. 1P1D,1P2D")
        out.append((int(p), int(d)))
    return out


MAX_BREAK_EVEN_CELLS = MAX_CANDIDATES // 2  # two runs a cell


def deployment_gpus(spec: ScenarioSpec) -> int:
    """Every GPU a scenario's deployment holds: its pools, or replicas x dp x tp (1 without a deployment)."""
    dep = spec.deployment
    if dep is None:
        return 1
    if dep.disaggregation is not None:
        return dep.disaggregation.num_gpus
    return dep.tp * dep.dp * dep.replicas


def deployment_label(spec: ScenarioSpec) -> str:
    """A deployment in the plan grid's words: 'colocated tp8', '2 replicas tp4', 'dp2 tp4', '1P1D tp4/tp4 over
    nvlink'."""
    dep = spec.deployment
    if dep is None:
        return "one GPU"
    if dep.disaggregation is not None:
        return dep.disaggregation.describe()
    if dep.replicas > 1:
        return f"{dep.replicas} replicas tp{dep.tp}"
    return f"dp{dep.dp} tp{dep.tp}" if dep.dp > 1 else f"colocated tp{dep.tp}"


def check_break_even_grid(input_lens: list[int], rates: list[float]) -> None:
    cells = len(input_lens) * len(rates)
    if not cells or cells > MAX_BREAK_EVEN_CELLS:
        raise ValueError(f"{len(input_lens)} input lengths x {len(rates)} rates x 2 deployments: "
                         f"{2 * cells} runs; give 1 to {MAX_BREAK_EVEN_CELLS} cells ({MAX_CANDIDATES} runs)")


Summarize = Callable[[ScenarioSpec], dict[str, Any]]  # a spec -> its run's summary (summary only)


def _summary(spec: ScenarioSpec) -> dict[str, Any]:
    return dict(simulate(spec, summary_only=True).summary)


def break_even_cells(pair: tuple[tuple[str, ScenarioSpec], tuple[str, ScenarioSpec]], input_lens: list[int],
                     rates: list[float], summarize: Summarize = _summary) -> dict[str, Any]:
    """Over input length x request rate: each of two labelled scenarios' goodput per GPU (request_goodput at its own
    SLOs / every GPU of its deployment), the winner and its margin (winner's / the other's - 1; None when the
    other's is 0). The sweep panel's break-even view; `summarize` runs one (the server's stops when its client
    leaves)."""
    check_break_even_grid(input_lens, rates)
    labels = [label for label, _ in pair]
    cells = []
    for n in input_lens:
        for rate in rates:
            per_gpu = []
            for _, spec in pair:
                one = spec.with_overrides({"workload.input_len": n, "workload.request_rate": rate, "compare": None,
                                           "tour": []})
                per_gpu.append(round(float(summarize(one)["request_goodput"]) / deployment_gpus(one), 4))
            win = 0 if per_gpu[0] >= per_gpu[1] else 1
            lose = per_gpu[1 - win]
            cells.append({"input_len": n, "request_rate": rate, "goodput_per_gpu": dict(zip(labels, per_gpu,
                          strict=True)), "winner": labels[win],
                          "margin": round(per_gpu[win] / lose - 1.0, 4) if lose > 0 else None})
    return {"slo": pair[0][1].goodput, "deployments": labels, "cells": cells}


def break_even(base: ScenarioSpec, slos: dict[str, float], pair: tuple[Candidate, Candidate],
               input_lens: list[int], rates: list[float]) -> dict[str, Any]:
    """`plan --break-even 'A;B'`: two grid candidates on the plan's workload at its SLOs."""
    check_break_even_grid(input_lens, rates)
    specs = []
    for c in pair:
        dep = {**(base.deployment.model_dump() if base.deployment is not None else {}), **c.deployment}
        try:
            specs.append((c.label, base.with_overrides({"deployment": dep, "goodput": slos})))
        except ValidationError as e:
            raise ValueError(format_validation_error(e, c.label)) from None
    return break_even_cells((specs[0], specs[1]), input_lens, rates)
