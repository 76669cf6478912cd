"""Published DP-attention + EP and replica serving measurements against the simulator (issue 20), one JSON line a row.

Only rows whose model, GPU and workload LayerScope has are simulated; the rest are listed in bench/README.md
"Validation rows (published DP-attention + EP measurements)" with why not. Nothing is fitted to any row.

    gpustack_tp4_fp8      GPUStack performance lab, Qwen3-235B-A22B-Instruct-2507-FP8 on 4 x H100, vLLM v0.11.0
                          `-tp 4 --max-num-batched-tokens 16384`, `vllm bench serve` random 4000/200, 500 prompts at
                          once (github.com/gpustack/gpustack docs/performance-lab/qwen3-235b-a22b/h100.md): the
                          replica shape, measured (bench_validation.py's [G] row, here its throughput)
    gpustack_2x_tp4_fp8   the same lab's "Total TPS: 16478.79x2" for 8 x H100: two such replicas, the published
                          figure the report's own doubling of the one-engine run (no two-replica run is published);
                          simulated as deployment.replicas 2 x tp 4 behind round robin, 1000 prompts at once

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_dp_validation.py
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec

# bench_validation.py's [G] assumptions, repeated for the same engine: vLLM v0.11 ran without async scheduling and
# kept the CUDA graph pool in the KV budget; max_num_seqs 1024 is V1's default on >= 70 GiB GPUs; the run did not
# pass --ignore-eos, so lengths are the report's totals over its requests (1,997,942 / 500 in, 90,966 / 500 out)
ENGINE = {"async_scheduling": False, "cuda_graph_memory_profiled": False, "tp": 4, "weight_dtype": "fp8"}
SCHEDULER = {"max_num_seqs": 1024, "max_num_batched_tokens": 16384, "prefix_caching": True}
ROWS: list[dict[str, Any]] = [
    {"bench": "gpustack_tp4_fp8", "deployment": ENGINE, "num_requests": 500,
     "measured": {"total_token_throughput": 16478.79, "median_tpot_ms": 94.78}},
    {"bench": "gpustack_2x_tp4_fp8", "deployment": ENGINE | {"replicas": 2, "router": "round_robin"},
     "num_requests": 1000, "measured": {"total_token_throughput": 2 * 16478.79, "median_tpot_ms": 94.78},
     "note": "published figure = 2 x the one-engine run (the report's extrapolation, not a measured pair)"},
]


def spec(row: dict[str, Any]) -> ScenarioSpec:
    return ScenarioSpec.model_validate({
        "name": "dp-validation", "model": "qwen3-235b-a22b", "runtime": "vllm", "gpu": "h100-sxm",
        "deployment": row["deployment"], "scheduler": SCHEDULER,
        "workload": {"num_requests": row["num_requests"], "input_len": 3996, "output_len": 182}})


def main() -> None:
    for row in ROWS:
        t0 = time.perf_counter()
        s = simulate(spec(row), summary_only=True).summary
        wall = time.perf_counter() - t0
        out = {"bench": row["bench"], "wall_s": round(wall, 2), "load_avg_1m": round(os.getloadavg()[0], 2)}
        for key, want in row["measured"].items():
            got = float(s[key])
            out[key] = {"measured": want, "simulated": round(got, 2), "rel_error": round(got / want - 1, 3)}
        if "note" in row:
            out["note"] = row["note"]
        print(json.dumps(out))


if __name__ == "__main__":
    main()
