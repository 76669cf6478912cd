"""Disaggregated serving speed (issue 21): wall and CPU time of `simulate` for bench_serving.py's 500 requests on
1P1D (one prefill and one decode engine of tp 4 on 8 x H200, the KV over NVLink), with its events and summary
only, paired with the same workload colocated at tp 8 (median of N, alternating). Target: the 1P1D run under 3 s.
Prints one JSON line.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_disagg.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from layerscope.runtime.engine import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serving import SERVING  # noqa: E402

PD = SERVING.with_overrides({"name": "bench-disagg-1p1d",
                             "deployment.disaggregation": {"prefill": {"tp": 4}, "decode": {"tp": 4}}})


def once(spec: object, summary_only: bool) -> tuple[float, float, dict]:
    t, c = time.perf_counter(), time.process_time()
    r = simulate(spec, summary_only=summary_only)  # type: ignore[arg-type]
    return time.perf_counter() - t, time.process_time() - c, r.summary


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    simulate(PD.with_overrides({"workload.num_requests": 20}))  # imports, caches warm-up
    rows: dict[str, list[tuple[float, float]]] = {"pd": [], "pd_summary": [], "colocated": []}
    summary: dict = {}
    for _ in range(args.runs):  # alternating, so load changes fall on both
        w, c, summary = once(PD, False)
        rows["pd"].append((w, c))
        w, c, _ = once(PD, True)
        rows["pd_summary"].append((w, c))
        w, c, _ = once(SERVING, False)
        rows["colocated"].append((w, c))
    med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in rows.items()}
    print(json.dumps({
        "bench": "disagg",
        "scenario": "500 requests ~500 in / ~500 out, max_concurrency 100, qwen3-235b-a22b h200: 1P1D tp4/tp4 nvlink",
        "pd_wall_s_median": round(med["pd"][0], 3), "pd_cpu_s_median": round(med["pd"][1], 3),
        "pd_summary_only_wall_s_median": round(med["pd_summary"][0], 3),
        "colocated_tp8_wall_s_median": round(med["colocated"][0], 3),
        "pd_over_colocated_cpu": round(med["pd"][1] / med["colocated"][1], 3),
        "runs": args.runs, "completed": summary["completed"], "kv_transfers": summary["kv_transfers"],
        "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2),
    }))


if __name__ == "__main__":
    main()
