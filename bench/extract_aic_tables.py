"""Regenerate LayerScope's compact extract of aiconfigurator-core's measured kernel tables.

    pip install -e '.[aic]'            # aiconfigurator-core==0.12.0 (brings pandas and pyarrow)
    python bench/extract_aic_tables.py [--source DIR]

DIR is the installed `aiconfigurator_core` package (found with importlib when omitted; an unpacked wheel works too).
Writes backend/layerscope/hardware/data/aic/<system>/<op>.csv.gz and manifest.json (provenance and row counts), the
files hardware/tables/ reads; NOTICE stays as committed. Only what LayerScope's models and deployments need is kept:

- systems h100_sxm, h200_sxm, b200_sxm, a100_sxm; backend vllm, the newest version each system has; NCCL the newest.
- units converted once, here: latency ms -> us; NCCL and vLLM custom all-reduce message sizes are element counts
  (bf16/half, 2 bytes) -> bytes (the loader's convention: aiconfigurator_core sdk/perf_database.py
  _factor_message_size factors an element count).
- GEMM: bf16 (torch.nn.functional.linear), fp8 per-tensor (CutlassFP8ScaledMMLinearKernel), fp8_block
  (DeepGemmFp8BlockScaledMMKernel, else CutlassFp8BlockScaledMMKernel); every M; N and K only at the grid points that
  bracket a shape the two Qwen3-MoE models use at tp 1-16 (qkv, o_proj, router, lm_head).
- MoE: the two models' (hidden, inter, experts, top-k), every moe_tp x ep, token count and routing distribution;
  bf16 and fp8_block (on Hopper the Triton kernel where measured, else FlashInfer CUTLASS; Blackwell FlashInfer
  TRT-LLM, the only one measured). The rows time the experts without the router.
- attention: head_dim 128, no sliding window, the (q heads, kv heads) pairs of the two models per GPU at tp 1-16;
  context (prefill from an empty cache, `isl` >= 16 tokens a sequence) and generation (`isl + step` keys a sequence).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import io
import json
import math
import os
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "backend" / "layerscope" / "hardware" / "data" / "aic"
PACKAGE = "aiconfigurator-core==0.12.0"
SYSTEMS = ("h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm")
TPS = (1, 2, 4, 8, 16)
# (hidden, moe_inter, experts, top-k, q heads, kv heads, head_dim, vocab): Qwen3-235B-A22B and Qwen3-30B-A3B config.json
MODELS = {
    "qwen3-235b-a22b": (4096, 1536, 128, 8, 64, 4, 128, 151936),
    "qwen3-30b-a3b": (2048, 768, 128, 8, 32, 4, 128, 151936),
}
GEMM_KERNELS = {
    "bf16": ("torch.nn.functional.linear", "vllm_default"),
    "fp8": ("CutlassFP8ScaledMMLinearKernel",),
    "fp8_block": ("DeepGemmFp8BlockScaledMMKernel", "CutlassFp8BlockScaledMMKernel"),
}
MOE_DTYPES = {"bfloat16": "bf16", "fp8_block": "fp8_block"}
MOE_PREFERENCE = ("triton", "flashinfer_cutlass", "flashinfer_trtllm", "fused_moe")  # first measured wins per shape
ELEMENT_BYTES = 2  # bf16 / half messages
MIN_PREFILL = 16  # context-attention rows kept from 16 tokens a sequence (1 -> 16 is flat, not a power law)


def newest(path: Path) -> Path:
    def key(p: Path) -> tuple:
        parts = []
        for x in p.name.replace("rc", ".").replace("post", ".").split("."):
            parts.append(int(x) if x.isdigit() else -1)
        return tuple(parts)

    return max((p for p in path.iterdir() if p.is_dir()), key=key)


def per_gpu_shapes() -> tuple[set[int], set[int], set[tuple[int, int]]]:
    """GEMM N and K values, and (q heads, kv heads) pairs, one GPU sees at tp 1-16."""
    ns, ks, heads = set(), set(), set()
    for h, _, e, _, q, kv, d, vocab in MODELS.values():
        for tp in TPS:
            if q % tp:
                continue
            qh, kvh = q // tp, max(1, kv // tp)
            heads.add((qh, kvh))
            ns.update({(qh + 2 * kvh) * d, h, e, math.ceil(vocab / tp)})
            ks.update({h, qh * d})
    return ns, ks, heads


def bracket(grid: list[int], wanted: set[int]) -> set[int]:
    keep = set()
    for v in wanted:
        below = [g for g in grid if g <= v]
        above = [g for g in grid if g >= v]
        keep.update(x for x in (max(below, default=None), min(above, default=None)) if x is not None)
    return keep


def gemm(df: pd.DataFrame) -> pd.DataFrame:
    ns, ks, _ = per_gpu_shapes()
    rows = []
    for dtype, kernels in GEMM_KERNELS.items():
        src = next((k for k in kernels if (df.kernel_source == k).any()), None)
        if src is None:
            continue
        d = df[df.kernel_source == src]
        d = d[d.n.isin(bracket(sorted(d.n.unique()), ns)) & d.k.isin(bracket(sorted(d.k.unique()), ks))]
        rows.append(pd.DataFrame({"dtype": dtype, "kernel": src, "m": d.m, "n": d.n, "k": d.k,
                                  "us": d.latency * 1e3}))
    return pd.concat(rows)


def moe(df: pd.DataFrame) -> pd.DataFrame:
    want = {(h, i, e, k) for h, i, e, k, *_ in MODELS.values()}
    d = df[df.moe_dtype.isin(MOE_DTYPES)]
    d = d[[(a, b, c, x) in want for a, b, c, x in zip(d.hidden_size, d.inter_size, d.num_experts, d.topk,
                                                      strict=True)]]
    d = d.assign(rank=[next((i for i, p in enumerate(MOE_PREFERENCE) if p in s), 99) for s in d.kernel_source])
    keys = ["moe_dtype", "hidden_size", "inter_size", "num_experts", "topk", "moe_tp_size", "moe_ep_size"]
    best = d.groupby(keys)["rank"].transform("min")
    d = d[d["rank"] == best]
    return pd.DataFrame({"dtype": d.moe_dtype.map(MOE_DTYPES), "kernel": d.kernel_source,
                         "distribution": d.distribution, "tokens": d.num_tokens, "hidden": d.hidden_size,
                         "inter": d.inter_size, "experts": d.num_experts, "topk": d.topk, "moe_tp": d.moe_tp_size,
                         "ep": d.moe_ep_size, "us": d.latency * 1e3})


def attention(df: pd.DataFrame, generation: bool) -> pd.DataFrame:
    _, _, heads = per_gpu_shapes()
    d = df[(df.head_dim == 128) & (df.get("window_size", 0) == 0)]
    d = d[[(q, kv) in heads for q, kv in zip(d.num_heads, d.num_key_value_heads, strict=True)]]
    if not generation:  # B200's context table also holds decode-kernel rows: keep the prefill kernel
        d = d[~d.kernel_source.str.contains("decode")]
        if "vllm_flash_attn_fa3" in set(d.kernel_source):  # Hopper: FA3 is what vLLM runs (FA4 is Blackwell's)
            d = d[d.kernel_source == "vllm_flash_attn_fa3"]
    elif "vllm_flash_attn_fa3" in set(d.kernel_source):
        d = d[d.kernel_source == "vllm_flash_attn_fa3"]
    if not generation:  # under 16 tokens a prefill is a launch-bound floor: priced analytically (cost.py floor)
        d = d[d.isl >= MIN_PREFILL]
    length = d.isl + d.step if generation else d.isl
    kv_dtype = d.kv_cache_dtype.map({"bfloat16": "bf16", "fp8": "fp8"})
    return pd.DataFrame({"kernel": d.kernel_source, "kv_dtype": kv_dtype, "batch": d.batch_size,
                         "kv_len" if generation else "seq_len": length, "q_heads": d.num_heads,
                         "kv_heads": d.num_key_value_heads, "head_dim": d.head_dim, "us": d.latency * 1e3})


def all_reduce(custom: pd.DataFrame, nccl: pd.DataFrame) -> pd.DataFrame:
    c = custom[custom.allreduce_dtype == "bfloat16"]
    n = nccl[(nccl.op_name == "all_reduce") & (nccl.nccl_dtype == "half")]
    impl = c.backend.map({"vllm_graph": "custom_graph", "vllm_eager": "custom_eager"})
    return pd.concat([
        pd.DataFrame({"impl": impl, "gpus": c.num_gpus, "bytes": c.message_size * ELEMENT_BYTES,
                      "us": c.latency * 1e3}),
        pd.DataFrame({"impl": "nccl", "gpus": n.num_gpus, "bytes": n.message_size * ELEMENT_BYTES,
                      "us": n.latency * 1e3}),
    ])


def all_to_all(nccl: pd.DataFrame) -> pd.DataFrame:
    n = nccl[(nccl.op_name == "alltoall") & (nccl.nccl_dtype == "half")]
    return pd.DataFrame({"gpus": n.num_gpus, "bytes": n.message_size * ELEMENT_BYTES, "us": n.latency * 1e3})


def write_csv_gz(df: pd.DataFrame, path: Path) -> None:
    df = df.sort_values(list(df.columns[:-1])).reset_index(drop=True)
    buf = io.StringIO()
    df.to_csv(buf, index=False, float_format="%.4f")
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(buf.getvalue().encode())
    os.replace(tmp, path)


def extract(pkg: Path) -> dict:
    data = pkg / "systems" / "data"
    manifest: dict = {"package": PACKAGE, "licence": "Apache-2.0", "units": "us, bytes", "files": {}}
    for system in SYSTEMS:
        root = data / system
        vllm = {op: newest(root / op / "vllm") for op in ("gemm", "moe", "attention")}
        comm = newest(root / "comm" / "vllm")
        nccl_dir = newest(root / "comm" / "nccl")
        nccl = pd.read_parquet(nccl_dir / "nccl_perf.parquet")
        tables = {
            "gemm": ([vllm["gemm"] / "gemm_perf.parquet"], gemm),
            "moe": ([vllm["moe"] / "moe_perf.parquet"], moe),
            "context_attention": ([vllm["attention"] / "context_attention_perf.parquet"],
                                  lambda d: attention(d, generation=False)),
            "decode_attention": ([vllm["attention"] / "generation_attention_perf.parquet"],
                                 lambda d: attention(d, generation=True)),
        }
        (OUT / system).mkdir(parents=True, exist_ok=True)
        for op, (paths, fn) in tables.items():
            out = fn(pd.read_parquet(paths[0]))
            _record(manifest, system, op, out, {"vllm": paths[0]})
        ar = all_reduce(pd.read_parquet(comm / "custom_allreduce_perf.parquet"), nccl)
        nccl_file = nccl_dir / "nccl_perf.parquet"
        _record(manifest, system, "all_reduce", ar, {"vllm": comm / "custom_allreduce_perf.parquet", "nccl": nccl_file})
        _record(manifest, system, "all_to_all", all_to_all(nccl), {"nccl": nccl_file})
    return manifest


def _record(manifest: dict, system: str, op: str, df: pd.DataFrame, sources: dict[str, Path]) -> None:
    """One extract file: its rows and, per backend it draws from (vllm, nccl), the version and the parquet file."""
    rel = f"{system}/{op}.csv.gz"
    write_csv_gz(df, OUT / rel)
    manifest["files"][rel] = {
        "system": system, "op": op, "rows": int(len(df)),
        "backend": "+".join(sources),
        "versions": {b: p.parent.name for b, p in sources.items()},
        "sources": [str(p.relative_to(p.parents[6])) for p in sources.values()],  # aiconfigurator_core/systems/...
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, help="the aiconfigurator_core package directory (default: installed)")
    args = ap.parse_args(argv)
    pkg = args.source
    if pkg is None:
        spec = importlib.util.find_spec("aiconfigurator_core")
        if spec is None or not spec.submodule_search_locations:
            print(f"aiconfigurator_core is not installed: pip install -e '.[aic]' ({PACKAGE})", file=sys.stderr)
            return 2
        pkg = Path(next(iter(spec.submodule_search_locations)))
    manifest = extract(pkg)
    tmp = OUT / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, OUT / "manifest.json")
    total = sum(f["rows"] for f in manifest["files"].values())
    print(f"{len(manifest['files'])} files, {total} rows -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
