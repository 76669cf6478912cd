"""Speed of a data-parallel run (issue 20): 500 requests on DP 8 x EP 8, against the same on TP 8, one JSON line each.

    dp8_ep8_500     simulate() of 500 requests (~500 in / ~500 out, range_ratio 1, concurrency 100: bench_scale.py's
                    serving_500 workload) on 8 x H200, Qwen3-235B-A22B fp8, DP 8 x EP 8, summary only
    tp8_500         the same workload on TP 8 x EP 8 (one engine): the paired ratio's denominator
    dp8_ep8_500_events   the DP run with every event kept (what the dashboard replays)

Medians over --runs runs after one warm-up; each line carries the load average (2 cores shared on this machine).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_dp.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec

WORKLOAD = {"num_requests": 500, "input_len": 500, "output_len": 500, "range_ratio": 1.0, "max_concurrency": 100,
            "seed": 0}
DEPLOYMENTS = {"dp8_ep8_500": {"dp": 8, "weight_dtype": "fp8"}, "tp8_500": {"tp": 8, "ep": 8, "weight_dtype": "fp8"}}


def spec(deployment: dict) -> ScenarioSpec:
    return ScenarioSpec.model_validate({"name": "bench-dp", "model": "qwen3-235b-a22b", "runtime": "vllm",
                                        "gpu": "h200", "deployment": deployment, "workload": WORKLOAD})


def timed(s: ScenarioSpec, runs: int, summary_only: bool) -> dict:
    simulate(s.with_overrides({"workload.num_requests": 20}), summary_only=summary_only)  # warm-up: tables, memos
    wall, cpu = [], []
    for _ in range(runs):
        w0, c0 = time.perf_counter(), time.process_time()
        r = simulate(s, summary_only=summary_only)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return {"wall_s_median": round(statistics.median(wall), 3), "cpu_s_median": round(statistics.median(cpu), 3),
            "runs": runs, "completed": r.summary["completed"], "steps": r.summary.get("dp_steps",
                                                                                     r.summary["num_steps"]),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    out = {name: timed(spec(dep), args.runs, True) for name, dep in DEPLOYMENTS.items()}
    out["dp8_ep8_500_events"] = timed(spec(DEPLOYMENTS["dp8_ep8_500"]), 1, False)
    for name, fig in out.items():
        print(json.dumps({"bench": name, **fig}))
    ratio = out["dp8_ep8_500"]["cpu_s_median"] / out["tp8_500"]["cpu_s_median"]
    print(json.dumps({"bench": "dp8_over_tp8_cpu", "ratio": round(ratio, 2)}))


if __name__ == "__main__":
    main()
