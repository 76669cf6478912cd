"""`layerscope plan`'s KV cache size against "GPU KV cache size: N tokens" lines that real vLLM engines logged.

Each logged figure below is quoted with its source, the settings the engine ran with, and what is not known about
the run (sources in bench/validation_sources.md). Prints one JSON line: simulated vs logged tokens.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_kv_capacity.py
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from layerscope.deployment import DeploymentSpec, place
from layerscope.hardware.gpus import GiB, gpu
from layerscope.model.config import resolve


@dataclass(frozen=True)
class Logged:
    source: str
    label: str
    model: str
    gpu: str
    deployment: dict[str, Any]
    kv_tokens: int  # "GPU KV cache size: N tokens"
    max_concurrency: float  # "Maximum concurrency for L tokens per request: Cx"
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 1024  # vLLM V1's default for the OpenAI server on >= 70 GiB GPUs other than the A100
    notes: list[str] = field(default_factory=list)


LOGGED = [
    # vLLM issue #21524 (2025-07-24, "Qwen3-30B-A3B distributed Inference hang when set tp 2 pp 1 on two H100
    # node"), quoted by a mirror of the issue: `python3 -m vllm.entrypoints.openai.api_server
    # --model=/models/Qwen/Qwen3-30B-A3B --gpu-memory-utilization=0.9 -tp=2 ...` over Ray on two nodes, one H100
    # 80GB HBM3 each (the fused_moe config file it looks for names NVIDIA_H100_80GB_HBM3); max_model_len is the
    # model's 40,960 (the log's "Maximum concurrency for 40,960 tokens"), bf16 weights and KV cache.
    Logged("vllm#21524", "Qwen3-30B-A3B 2 x H100 tp2 (one GPU per node), gmu 0.9", "qwen3-30b-a3b", "h100-sxm",
           # mid-2025: graphs captured after the KV cache was sized (profiled into it only since v0.21.0)
           {"tp": 2, "gpu_memory_utilization": 0.9, "max_model_len": 40960, "cuda_graph_memory_profiled": False},
           878_416, 21.45,
           notes=["vLLM version not stated (mid-2025 V1: kv_cache_utils.py:634/637)",
                  "tp over two nodes: no NVLink custom all-reduce buffers on these GPUs"]),
]


def compare(m: Logged) -> dict[str, Any]:
    dep = DeploymentSpec(**m.deployment)
    p = place(resolve(m.model), gpu(m.gpu), dep, m.max_num_batched_tokens, m.max_num_seqs)
    logged_kv_gib = m.kv_tokens * p.kv_bytes_per_token / GiB  # what the logged token count occupies per GPU
    return {"source": m.source, "case": m.label, "logged_kv_tokens": m.kv_tokens, "simulated_kv_tokens": p.kv_tokens,
            "rel_error": round(p.kv_tokens / m.kv_tokens - 1, 3),
            "logged_max_concurrency": m.max_concurrency, "simulated_max_concurrency": round(p.max_concurrency, 2),
            "logged_kv_gib_implied": round(logged_kv_gib, 2), "simulated_kv_gib": round(p.kv_cache_bytes / GiB, 2),
            "simulated": {k: v for k, v in p.per_gpu().items() if k.endswith("_gib")}, "notes": m.notes}


def main() -> None:
    print(json.dumps({"bench": "kv_capacity", "rows": [compare(m) for m in LOGGED]}))


if __name__ == "__main__":
    main()
