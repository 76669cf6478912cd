"""Replicas behind a router: the replicas-prefix-router preset under each router, open loop (its 8 req/s) and
closed loop (all at once, 64 in flight), and the wall time of simulating it. Prints one JSON line per run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_replicas.py [--runs N]

The figures and the published rows they are set beside are in bench/README.md ("Replicas behind a router").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from layerscope.runtime.engine import simulate
from layerscope.scenario import load_preset

ROUTERS = ("prefix_cache_aware", "round_robin", "least_outstanding_requests")
FIGURES = ("output_throughput", "mean_ttft_ms", "p99_ttft_ms", "prefix_cache_hit_rate", "duration")
LOADS = {"open loop 8 req/s": {}, "closed loop 64 in flight": {"workload.request_rate": "inf",
                                                                 "workload.max_concurrency": 64,
                                                                 "workload.num_requests": 320}}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3, help="timed runs per point (the median is printed)")
    args = p.parse_args()
    base = load_preset("replicas-prefix-router").with_overrides({"compare": None, "tour": []})
    for load, over in LOADS.items():
        for router in ROUTERS:
            spec = base.with_overrides({**over, "deployment.router": router})
            walls, summary = [], {}
            for _ in range(args.runs):
                t = time.perf_counter()
                summary = simulate(spec, summary_only=True).summary
                walls.append(time.perf_counter() - t)
            print(json.dumps({"load": load, "router": router, **{k: summary[k] for k in FIGURES},
                              "wall_s_median": round(statistics.median(walls), 3),
                              "loadavg": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
