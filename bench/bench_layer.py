"""Tokens/s of the numpy decoder layer for the `small` preset: a 512-token prefill and one-token decode steps
on a 512-token paged cache. Prints one JSON line.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_layer.py
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np

from layerscope.model import Layer, preset


def blas_info() -> str:
    try:
        from threadpoolctl import threadpool_info

        return ", ".join(
            f"{i.get('internal_api')} {i.get('architecture')} x{i.get('num_threads')}" for i in threadpool_info()
        )
    except ImportError:  # threadpoolctl is not a dependency: fall back to numpy's build information
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')} (threads not reported)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--prefill-reps", type=int, default=7)
    ap.add_argument("--decode-steps", type=int, default=50)
    args = ap.parse_args()

    layer = Layer.random(preset(args.preset), seed=0)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((args.tokens, layer.config.hidden_size)).astype(np.float32)  # (T, H)
    pos = np.arange(args.tokens)
    layer.forward(x, pos)  # warm-up
    prefill = []
    for _ in range(args.prefill_reps):
        t0 = time.perf_counter()
        layer.forward(x, pos)
        prefill.append(time.perf_counter() - t0)

    cache = layer.new_cache()
    layer.forward(x, pos, cache)
    step = rng.standard_normal((args.decode_steps, 1, layer.config.hidden_size)).astype(np.float32)
    decode = []
    for i in range(args.decode_steps):  # cache grows 512 -> 512 + steps, as real decode does
        t0 = time.perf_counter()
        layer.forward(step[i], np.array([args.tokens + i]), cache)
        decode.append(time.perf_counter() - t0)

    p_ms, d_ms = statistics.median(prefill) * 1e3, statistics.median(decode) * 1e3
    print(
        json.dumps(
            {
                "bench": "numpy_layer",
                "preset": args.preset,
                "prefill_tokens": args.tokens,
                "prefill_ms_median": round(p_ms, 3),
                "prefill_tokens_per_s": round(args.tokens / p_ms * 1e3, 1),
                "decode_cache_tokens": args.tokens,
                "decode_ms_median": round(d_ms, 3),
                "decode_tokens_per_s": round(1e3 / d_ms, 1),
                "numpy": np.__version__,
                "blas": blas_info(),
                "python": platform.python_version(),
            }
        )
    )


if __name__ == "__main__":
    main()
