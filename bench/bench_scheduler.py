"""Scheduler fidelity (issue 19 part C): what vLLM V1's rules change in a run, prefix caching off and on.

    preempt   serving-kv-preemption (32 requests, a 1.2 GiB KV pool per GPU) and the digest's bench-serving-preempt
              (120 requests of the 500-request bench, 1.25 GiB): preemptions, median TPOT, mean TTFT, hit rate
    burst     10 prompts of a 1500-token shared prefix + 900 own tokens at t = 0 (qwen3-30b-a3b, h200, 8192-token
              budget): sequences and tokens of step 0, mean TTFT

The limits are set explicitly (max_num_batched_tokens 8192, max_num_seqs 256), so the same script runs on code
from before this work (its defaults) and after, like for like. Prints one JSON line.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_scheduler.py
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec, load_file

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_serving import SERVING  # noqa: E402

LIMITS = {"scheduler.max_num_batched_tokens": 8192, "scheduler.max_num_seqs": 256}
BURST = ScenarioSpec.model_validate({
    "model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h200", "free_hbm_gib": 20.0,
    "workload": {"num_requests": 10, "input_len": 900, "output_len": 4, "shared_prefix_len": 1500, "seed": 1},
})


def _run(spec: ScenarioSpec, caching: bool) -> tuple[Any, float]:
    spec = spec.with_overrides({**LIMITS, "scheduler.prefix_caching": caching, "compare": None})
    c = time.process_time()
    r = simulate(spec)
    return r, round(time.process_time() - c, 3)


def preempt(name: str, spec: ScenarioSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for caching in (False, True):
        r, cpu = _run(spec, caching)
        s = r.summary
        out[f"{name}_{'on' if caching else 'off'}"] = {
            "num_preemptions": s["num_preemptions"], "median_tpot_ms": s["median_tpot_ms"],
            "mean_ttft_ms": s["mean_ttft_ms"], "prefix_cache_hit_rate": s["prefix_cache_hit_rate"],
            "completed": s["completed"], "cpu_s": cpu}
    return out


def burst() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for caching in (False, True):
        r, _ = _run(BURST, caching)
        step0 = next(e for e in r.events if e.kind == "step")
        out[f"burst_{'on' if caching else 'off'}"] = {
            "step0_seqs": step0.num_seqs, "step0_tokens": step0.num_tokens,
            "mean_ttft_ms": r.summary["mean_ttft_ms"]}
    return out


def main() -> None:
    row: dict[str, Any] = {"bench": "scheduler"}
    row.update(preempt("kv_preemption", load_file(ROOT / "scenarios" / "serving-kv-preemption.yaml")))
    row.update(preempt("bench_preempt", SERVING.with_overrides({"workload.num_requests": 120, "free_hbm_gib": 1.25})))
    row.update(burst())
    row.update({"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)})
    print(json.dumps(row))


if __name__ == "__main__":
    main()
