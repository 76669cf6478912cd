"""Simulated vs published serving measurements of Qwen3 MoE models (sources in bench/README.md).

Nothing here was fitted: the cost model's constants come from `layerscope calibrate` on Vidur's Llama-2-7B kernel
profiles and from published fused_moe kernel microbenchmarks (hardware/fused_moe_fit.py), so every row below is held
out. Prints one JSON line (the error table and the simulator's wall time).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_validation.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec


@dataclass(frozen=True)
class Measured:
    source: str  # key of the source table in bench/README.md
    label: str
    model: str
    gpu: str
    deployment: dict[str, Any]
    workload: dict[str, Any]
    metrics: dict[str, float]  # vLLM result keys -> measured value
    scheduler: dict[str, Any] = field(default_factory=dict)


# Engines of 2025 up to v0.11 ran without async scheduling unless --async-scheduling was passed (neither report
# passes it): the host's step work is exposed (runtime/sharded.py host_step_us).
SYNC = {"async_scheduling": False}
# [T] tenstorrent/tt-inference-server#340: vLLM on one A100 80GB, Qwen3-30B-A3B, one request at a time.
T = [
    Measured("T", f"Qwen3-30B-A3B 1xA100 conc 1, {isl}/{osl}", "qwen3-30b-a3b", "a100-80g-sxm", SYNC | {"tp": 1},
             {"num_requests": n, "input_len": isl, "output_len": osl, "max_concurrency": 1},
             {"mean_ttft_ms": ttft, "mean_tpot_ms": tpot})
    for isl, osl, n, ttft, tpot in [
        (128, 128, 8, 35.7, 9.6), (128, 1024, 4, 27.0, 9.7), (1024, 128, 4, 70.3, 9.8), (2048, 128, 4, 81.0, 9.9),
        (3072, 128, 4, 90.2, 10.1), (4096, 128, 2, 75.2, 10.3), (8192, 128, 2, 227.0, 10.6),
    ]
]
# [G] GPUStack performance lab, Qwen3-235B-A22B-Instruct-2507 on H100, vLLM v0.11.0, all prompts at once.
# max_num_seqs 1024: vLLM V1's default for the OpenAI server on >= 70 GiB GPUs (an assumption about that run).
G_SCHED = {"max_num_seqs": 1024}
G = [
    Measured("G", "Qwen3-235B 8xH100 bf16 tp8, 500 x 2000/100", "qwen3-235b-a22b", "h100-sxm", SYNC | {"tp": 8},
             {"num_requests": 500, "input_len": 2000, "output_len": 100},
             {"duration": 43.91, "median_ttft_ms": 20242.32, "median_tpot_ms": 108.64, "mean_tpot_ms": 101.08,
              "total_token_throughput": 23858.69}, G_SCHED),
    Measured("G", "Qwen3-235B 8xH100 bf16 tp8, 500 x 4000/200", "qwen3-235b-a22b", "h100-sxm", SYNC | {"tp": 8},
             {"num_requests": 500, "input_len": 4000, "output_len": 200},
             {"median_ttft_ms": 48562.54, "median_tpot_ms": 72.58, "mean_tpot_ms": 68.94,
              "total_token_throughput": 21113.53}, G_SCHED),
    Measured("G", "Qwen3-235B 8xH100 bf16 tp8, 100 x 32000/100", "qwen3-235b-a22b", "h100-sxm", SYNC | {"tp": 8},
             {"num_requests": 100, "input_len": 32000, "output_len": 100},
             {"duration": 141.60, "median_ttft_ms": 70737.29, "median_tpot_ms": 134.49,
              "total_token_throughput": 22657.51}, G_SCHED),
    Measured("G", "Qwen3-235B-FP8 4xH100 tp4, 500 x 2000/100, mnbt 16384", "qwen3-235b-a22b", "h100-sxm",
             SYNC | {"tp": 4, "weight_dtype": "fp8"}, {"num_requests": 500, "input_len": 2000, "output_len": 100},
             {"duration": 55.28, "median_ttft_ms": 26155.54, "median_tpot_ms": 140.65},
             {**G_SCHED, "max_num_batched_tokens": 16384}),
    Measured("G", "Qwen3-235B-FP8 4xH100 tp4, 500 x 4000/200, mnbt 16384", "qwen3-235b-a22b", "h100-sxm",
             SYNC | {"tp": 4, "weight_dtype": "fp8"}, {"num_requests": 500, "input_len": 4000, "output_len": 200},
             {"duration": 126.76, "median_ttft_ms": 61048.35, "median_tpot_ms": 94.78},
             {**G_SCHED, "max_num_batched_tokens": 16384}),
]


# [V] vLLM PR #23151 (2025-08-19), "WO tuned configs": `vllm serve Qwen/Qwen3-30B-A3B` on one H100, TP 1, bf16,
# `benchmark_serving.py --dataset-name random --random-input 2048 --random-output 1024 --max-concurrency 10
# --num-prompt 100` (no --ignore-eos: 101,576 of 102,400 output tokens were generated).
V = [
    Measured("V", "Qwen3-30B-A3B 1xH100 conc 10, 100 x 2048/1024", "qwen3-30b-a3b", "h100-sxm", SYNC | {"tp": 1},
             {"num_requests": 100, "input_len": 2048, "output_len": 1024, "max_concurrency": 10},
             {"duration": 137.30, "mean_ttft_ms": 267.22, "median_ttft_ms": 300.05, "mean_tpot_ms": 13.18,
              "median_tpot_ms": 13.17, "total_token_throughput": 2226.78}),
]
# [GA] GPUStack performance lab, Qwen3-235B-A22B-Instruct-2507 on 8 x A100 SXM 80GB, vLLM v0.11.0, `vllm serve
# Qwen/Qwen3-235B-A22B-Instruct-2507 -tp 8` (bf16; the A100's fp8 runs are Marlin w8a16, not modelled), `vllm bench
# serve --dataset-name random`, every prompt at once, no --ignore-eos (82-99% of the requested output tokens).
# Its 1000 x 128/4 case is left out, as [G] leaves it out: a TPOT over 3 tokens says which steps they fell in
# (simulated 445 ms median against 158 measured; bench/validation_sources.md).
GA = [
    Measured("GA", f"Qwen3-235B 8xA100 bf16 tp8, {n} x {isl}/{osl}", "qwen3-235b-a22b", "a100-80g-sxm",
             SYNC | {"tp": 8}, {"num_requests": n, "input_len": isl, "output_len": osl},
             {"duration": dur, "median_ttft_ms": ttft, "median_tpot_ms": tpot, "mean_tpot_ms": mtpot,
              "total_token_throughput": tput}, G_SCHED)
    for n, isl, osl, dur, ttft, tpot, mtpot, tput in [
        (500, 2000, 100, 112.15, 54532.60, 208.61, 190.79, 9342.67),
        (500, 4000, 200, 255.70, 121615.01, 220.33, 205.64, 8170.72),
        (100, 32000, 100, 481.89, 240137.10, 307.94, 298.86, 6657.49),
    ]
]
# [S] SGLang cookbook, docs/Qwen/Qwen3.md "5.1 Speed Benchmark" (sgl-project/sgl-cookbook): SGLang 0.5.6 on 8 x B200,
# `python -m sglang.launch_server --model Qwen/Qwen3-235B-A22B --tp 8` (bf16), `python3 -m sglang.bench_serving
# --backend sglang --dataset-name random --random-input-len I --random-output-len O --num-prompts N
# --max-concurrency C`. SGLang's random dataset draws each length uniform in [1, L] (its --random-range-ratio
# defaults to 0) and ignores EOS by default (retokenized counts match): here mean L/2 and range ratio 1. SGLang's
# defaults on a >= 160 GB GPU: chunked prefill 16384 tokens, overlap scheduling on, radix (prefix) cache on.
# Duration is left out at concurrency 1: 10 requests' drawn lengths decide it (the measured run generated 4,210
# tokens where uniform [1, 1000] averages 5,005), not the engine.
S_DEPLOY = {"tp": 8, "async_scheduling": True}
S_SCHED = {"max_num_seqs": 1024, "max_num_batched_tokens": 16384}
S = [
    Measured("S", f"Qwen3-235B 8xB200 bf16 tp8 SGLang, {name} {isl}/{osl}, conc {c}", "qwen3-235b-a22b", "b200",
             S_DEPLOY, {"num_requests": n, "input_len": isl // 2, "output_len": osl // 2, "range_ratio": 1.0,
                        "max_concurrency": c},
             {"median_ttft_ms": ttft, "mean_tpot_ms": mtpot, "median_tpot_ms": tpot}
             | ({"duration": dur} if c > 1 else {}), S_SCHED)
    for name, isl, osl, c, n, dur, ttft, mtpot, tpot in [
        ("chat", 1000, 1000, 1, 10, 44.16, 65.22, 10.27, 10.28),
        ("chat", 1000, 1000, 16, 80, 48.01, 76.69, 15.88, 15.72),
        ("chat", 1000, 1000, 100, 500, 86.32, 98.25, 30.52, 31.62),
        ("reasoning", 1000, 8000, 1, 10, 461.12, 64.99, 10.33, 10.34),
        ("reasoning", 1000, 8000, 16, 80, 340.59, 72.43, 14.83, 14.90),
        ("reasoning", 1000, 8000, 64, 320, 534.33, 86.55, 23.22, 23.49),
        ("summarization", 8000, 1000, 1, 10, 45.24, 147.35, 10.38, 10.39),
        ("summarization", 8000, 1000, 16, 80, 53.01, 182.46, 17.46, 17.41),
        ("summarization", 8000, 1000, 64, 320, 103.23, 215.93, 35.36, 36.07),
    ]
]
# vLLM V1 serves with automatic prefix caching on unless --no-enable-prefix-caching (no report passes it): a
# preempted request finds its computed blocks again in the cache instead of recomputing its whole prompt.
V1_SCHEDULER = {"prefix_caching": True}


def spec_of(m: Measured) -> ScenarioSpec:
    return ScenarioSpec(name="validation", model=m.model, gpu=m.gpu, runtime="vllm", deployment=m.deployment,
                        workload=m.workload, scheduler=V1_SCHEDULER | (m.scheduler or {}))


def run(rows: list[Measured]) -> list[dict[str, Any]]:
    out = []
    for m in rows:
        t0 = time.perf_counter()
        s = simulate(spec_of(m)).summary
        wall = time.perf_counter() - t0
        for key, want in m.metrics.items():
            got = float(s[key])
            out.append({"source": m.source, "case": m.label, "metric": key, "measured": want,
                        "simulated": round(got, 2), "rel_error": round(got / want - 1, 3),
                        "sim_wall_s": round(wall, 2)})
    return out


def sweep_point_speed(runs: int = 3) -> float:
    """Wall time of one 64-request sweep point: the serving-64-h200-tp8 workload without its compare run."""
    spec = ScenarioSpec(name="speed", gpu="h200", deployment={"tp": 8},
                        workload={"num_requests": 64, "input_len": 1024, "output_len": 256, "max_concurrency": 64})
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        simulate(spec)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


SOURCES = {"T": T, "V": V, "G": G, "GA": GA, "S": S}


def tpot_growth(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median TPOT at each concurrency over the same workload at concurrency 1, measured and simulated ([S] sweeps)."""
    tpot = {r["case"]: r for r in rows if r["metric"] == "median_tpot_ms" and ", conc " in r["case"]}
    out = []
    for case, r in tpot.items():
        base = tpot.get(case.rsplit(", conc ", 1)[0] + ", conc 1")
        if base is None or base is r:
            continue
        measured, simulated = r["measured"] / base["measured"], r["simulated"] / base["simulated"]
        out.append({"case": case, "measured_growth": round(measured, 2), "simulated_growth": round(simulated, 2),
                    "rel_error": round(simulated / measured - 1, 3)})
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="the one-GPU rows only")
    p.add_argument("--sources", default=",".join(SOURCES), help=f"comma-separated keys of {sorted(SOURCES)}")
    args = p.parse_args()
    keys = ["T"] if args.quick else [k.strip() for k in args.sources.split(",") if k.strip()]
    unknown = sorted(set(keys) - set(SOURCES))
    if unknown:
        p.error(f"unknown source {', '.join(unknown)}; known: {', '.join(SOURCES)}")
    rows = run([m for k in keys for m in SOURCES[k]])
    tpot = [abs(r["rel_error"]) for r in rows if r["metric"] in ("median_tpot_ms", "mean_tpot_ms")]
    print(json.dumps({"bench": "validation", "rows": rows, "tpot_growth": tpot_growth(rows),
                      "tpot_abs_error_median": round(statistics.median(tpot), 3),
                      "sweep_point_64_requests_wall_s": round(sweep_point_speed(), 3)}))


if __name__ == "__main__":
    main()
