"""Simulator speed: wall time of the 131072-token prefill + 1000 decode steps on qwen3-235b-a22b (timing only)
and of the same run with numerics on at the `small` size. Prints one JSON line.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_simulator.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec

SPEC = ScenarioSpec(name="bench-131k", model="qwen3-235b-a22b", runtime="vllm", gpu="h200", prompt_len=131072,
                    decode_steps=1000, free_hbm_gib=60)


def timed(spec: ScenarioSpec, runs: int) -> tuple[float, int]:
    walls, n = [], 0
    for _ in range(runs):
        t = time.perf_counter()
        n = len(simulate(spec).events)
        walls.append(time.perf_counter() - t)
    return statistics.median(walls), n


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--numerics-runs", type=int, default=1)
    args = p.parse_args()
    simulate(SPEC.with_overrides({"prompt_len": 4096, "decode_steps": 10}))  # imports, caches, BLAS warm-up
    wall, events = timed(SPEC, args.runs)
    num_wall, num_events = timed(SPEC.with_overrides({"numerics": True, "numerics_model": "small"}), args.numerics_runs)
    print(json.dumps({
        "bench": "simulator",
        "scenario": "qwen3-235b-a22b vllm h200, 131072 prompt + 1000 decode steps",
        "timing_only_wall_s_median": round(wall, 3),
        "timing_only_runs": args.runs,
        "timing_only_events": events,
        "timing_only_events_per_s": round(events / wall),
        "numerics_small_wall_s_median": round(num_wall, 3),
        "numerics_small_runs": args.numerics_runs,
        "numerics_small_events": num_events,
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }))


if __name__ == "__main__":
    main()
