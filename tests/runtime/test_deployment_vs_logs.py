"""The KV cache that placement leaves, against a "GPU KV cache size" line a real vLLM engine logged."""

from __future__ import annotations

from layerscope.deployment import DeploymentSpec, place
from layerscope.hardware.gpus import gpu
from layerscope.model.config import preset

# vLLM issue #21524 (2025-07-24): `--model=/models/Qwen/Qwen3-30B-A3B --gpu-memory-utilization=0.9 -tp=2` on two
# H100 80GB HBM3 (one per node), max_model_len 40,960 (the model's), bf16. Its log: "GPU KV cache size: 878,416
# tokens", "Maximum concurrency for 40,960 tokens per request: 21.45x". The vLLM version is not stated, and the
# non-torch reserve of a cross-node tp differs from one node's, hence a 10% tolerance rather than a tighter one.
LOGGED_KV_TOKENS = 878_416
LOGGED_MAX_CONCURRENCY = 21.45
TOLERANCE = 0.10


def test_qwen3_30b_tp2_h100_kv_tokens_within_ten_percent_of_the_logged_pool() -> None:
    # as that engine ran: graphs captured after the KV cache was sized (before v0.21.0), max_num_seqs 1024 (the
    # OpenAI server's default on an H100)
    dep = DeploymentSpec(tp=2, gpu_memory_utilization=0.9, max_model_len=40960, cuda_graph_memory_profiled=False)
    p = place(preset("qwen3-30b-a3b"), gpu("h100-sxm"), dep, max_num_batched_tokens=8192, max_num_seqs=1024)
    assert p.kv_bytes_per_token == 48 * 2 * 128 * 2 * 2  # 48 layers, 2 of the 4 KV heads, K and V, bf16
    assert abs(p.kv_tokens / LOGGED_KV_TOKENS - 1) <= TOLERANCE, p.kv_tokens
    assert abs(p.max_concurrency / LOGGED_MAX_CONCURRENCY - 1) <= TOLERANCE, p.max_concurrency
