"""Serving speed: wall time of `simulate` for 500 requests (input and output about 500 tokens, range_ratio 1) at
max_concurrency 100, timing only, on qwen3-235b-a22b, vllm runtime, h200; and the 131072-token single-request
run (+ 1000 decode steps, as bench_simulator.py) stays under 1 s. Prints one JSON line.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_serving.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec

SERVING = ScenarioSpec.model_validate({
    # one GPU of 8 x H200 at tp 8 (the weights of a whole-model serving run must fit); 15 GiB of KV cache per GPU
    # hold the 320k tokens that 60 GiB held at tp 1 (a quarter of the KV heads per GPU)
    "name": "bench-serving-500", "model": "qwen3-235b-a22b", "runtime": "vllm", "gpu": "h200", "free_hbm_gib": 15,
    "deployment": {"tp": 8},
    "workload": {"num_requests": 500, "input_len": 500, "output_len": 500, "range_ratio": 1.0,
                 "max_concurrency": 100, "seed": 0},
})
SINGLE = ScenarioSpec(name="bench-131k", model="qwen3-235b-a22b", runtime="vllm", gpu="h200", prompt_len=131072,
                      decode_steps=1000, free_hbm_gib=60)


def timed(spec: ScenarioSpec, runs: int) -> tuple[float, float, int, dict]:
    walls, cpus, n, summary = [], [], 0, {}
    r = None
    for _ in range(runs):
        r = None  # free the previous run's events before the clock starts, not inside the next measurement
        t, c = time.perf_counter(), time.process_time()
        r = simulate(spec)
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
        n, summary = len(r.events), r.summary
    return statistics.median(walls), statistics.median(cpus), n, summary


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    simulate(SERVING.with_overrides({"workload.num_requests": 20}))  # imports, caches warm-up
    wall, cpu, events, summary = timed(SERVING, args.runs)
    single_wall, single_cpu, single_events, _ = timed(SINGLE, args.runs)
    print(json.dumps({
        "bench": "serving",
        "scenario": "qwen3-235b-a22b vllm h200, 500 requests ~500 in / ~500 out (range_ratio 1), max_concurrency 100",
        "serving_wall_s_median": round(wall, 3),
        "serving_cpu_s_median": round(cpu, 3),
        "serving_runs": args.runs,
        "serving_events": events,
        "serving_steps": summary["num_steps"],
        "serving_completed": summary["completed"],
        "single_131k_wall_s_median": round(single_wall, 3),
        "single_131k_cpu_s_median": round(single_cpu, 3),
        "single_131k_events": single_events,
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }))


if __name__ == "__main__":
    main()
