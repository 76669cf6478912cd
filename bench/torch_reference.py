"""PyTorch CPU reference for bench_layer.py: transformers' Qwen3MoeDecoderLayer on the same `small` weights
(Layer.random(preset("small"), seed=0)). Runs only where torch and transformers are installed (a scratch venv,
never the project's); prints one JSON line per experts implementation.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /tmp/torchenv/bin/python bench/torch_reference.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, DynamicCache, Qwen3MoeConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backend"))
from layerscope.model import Layer, preset  # noqa: E402


def hf_layer(layer: Layer, experts: str) -> tuple[torch.nn.Module, torch.nn.Module, Qwen3MoeConfig]:
    c = layer.config
    cfg = Qwen3MoeConfig(
        vocab_size=16,
        hidden_size=c.hidden_size,
        intermediate_size=4 * c.hidden_size,
        num_hidden_layers=1,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads,
        head_dim=c.head_dim,
        num_experts=c.num_experts,
        num_experts_per_tok=c.num_experts_per_tok,
        moe_intermediate_size=c.moe_intermediate_size,
        norm_topk_prob=c.norm_topk_prob,
        rms_norm_eps=c.rms_norm_eps,
        rope_theta=c.rope_theta,
        max_position_embeddings=4096,
    )
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, experts_implementation=experts).eval()
    w = {n: torch.from_numpy(np.asarray(a)) for n, a in layer.weights.items()}
    dec = model.model.layers[0]
    with torch.no_grad():
        for name, p in dec.named_parameters():
            if name == "mlp.experts.gate_up_proj":
                p.copy_(
                    torch.stack(
                        [
                            torch.cat([w[f"mlp.experts.{e}.gate_proj.weight"], w[f"mlp.experts.{e}.up_proj.weight"]])
                            for e in range(c.num_experts)
                        ]
                    )
                )
            elif name == "mlp.experts.down_proj":
                p.copy_(torch.stack([w[f"mlp.experts.{e}.down_proj.weight"] for e in range(c.num_experts)]))
            else:
                p.copy_(w[name])
    return dec, model.model.rotary_emb, cfg


def main() -> None:
    tokens, reps, steps = 512, 7, 50
    layer = Layer.random(preset("small"), seed=0)
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((tokens, layer.config.hidden_size)).astype(np.float32)
    step_np = rng.standard_normal((steps, 1, layer.config.hidden_size)).astype(np.float32)
    ref = layer.forward(x_np, np.arange(tokens))
    for experts in ("eager", "grouped_mm", "batched_mm"):
        try:
            dec, rotary, cfg = hf_layer(layer, experts)
        except (ValueError, ImportError) as e:
            print(json.dumps({"bench": "torch_layer", "experts_implementation": experts, "error": str(e)[:200]}))
            continue
        x = torch.from_numpy(x_np)[None]
        pos = torch.arange(tokens)[None]
        with torch.inference_mode():
            cos_sin = rotary(x, pos)
            y = dec(x, attention_mask=None, position_ids=pos, position_embeddings=cos_sin)
            y = y[0] if isinstance(y, tuple) else y
            err = float(np.linalg.norm(y[0].numpy() - ref) / np.linalg.norm(ref))
            prefill = []
            for _ in range(reps):
                t0 = time.perf_counter()
                dec(x, attention_mask=None, position_ids=pos, position_embeddings=cos_sin)
                prefill.append(time.perf_counter() - t0)
            cache = DynamicCache(config=cfg)
            dec(x, attention_mask=None, position_ids=pos, position_embeddings=cos_sin, cache=cache, use_cache=True)
            decode = []
            for i in range(steps):
                xi, pi = torch.from_numpy(step_np[i])[None], torch.tensor([[tokens + i]])
                t0 = time.perf_counter()
                cs = rotary(xi, pi)
                dec(xi, attention_mask=None, position_ids=pi, position_embeddings=cs, cache=cache, use_cache=True)
                decode.append(time.perf_counter() - t0)
        p_ms, d_ms = statistics.median(prefill) * 1e3, statistics.median(decode) * 1e3
        print(
            json.dumps(
                {
                    "bench": "torch_layer",
                    "preset": "small",
                    "experts_implementation": experts,
                    "attn_implementation": cfg._attn_implementation,
                    "prefill_tokens": tokens,
                    "prefill_ms_median": round(p_ms, 3),
                    "prefill_tokens_per_s": round(tokens / p_ms * 1e3, 1),
                    "decode_cache_tokens": tokens,
                    "decode_ms_median": round(d_ms, 3),
                    "decode_tokens_per_s": round(1e3 / d_ms, 1),
                    "rel_diff_vs_numpy": err,
                    "torch": torch.__version__,
                    "transformers": transformers.__version__,
                    "threads": torch.get_num_threads(),
                }
            )
        )


if __name__ == "__main__":
    main()
