"""Load one decoder layer from a Hugging Face checkpoint folder (config.json + safetensors shards).

Tensor names are the hub's, exactly as the Qwen3-235B-A22B shards spell them:
`model.layers.N.self_attn.q_proj.weight`, `model.layers.N.mlp.gate.weight`,
`model.layers.N.mlp.experts.E.gate_proj.weight`, ... (dense models: `model.layers.N.mlp.gate_proj.weight`).
Only layer N's tensors are read. bf16, fp16 and fp32 tensors load; everything becomes float32.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from layerscope.model.config import ModelConfig, from_hf
from layerscope.model.layer import Layer, weight_shapes

INDEX_NAME = "model.safetensors.index.json"


def bf16_bits_to_fp32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 stored as uint16 -> float32 (bf16 is the top half of an fp32)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def fp32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (uint16), rounding to nearest even (NaN stays NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return np.where(np.isnan(x), (u >> 16) | 0x40, rounded).astype(np.uint16)


def _read_header(path: Path) -> tuple[dict, int]:
    with path.open("rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n)), 8 + n


def _read_bf16(path: Path, name: str) -> np.ndarray:
    """numpy has no bfloat16, so safetensors' numpy loader refuses it: read the raw bytes instead."""
    header, start = _read_header(path)
    meta = header[name]
    begin, end = meta["data_offsets"]
    with path.open("rb") as f:
        f.seek(start + begin)
        bits = np.frombuffer(f.read(end - begin), dtype="<u2")
    return bf16_bits_to_fp32(bits).reshape(meta["shape"])


def _shard_map(folder: Path, prefix: str) -> dict[str, Path]:
    """Tensor name -> shard file for every tensor whose name starts with `prefix`."""
    index = folder / INDEX_NAME
    if index.exists():
        weight_map: dict[str, str] = json.loads(index.read_text())["weight_map"]
        return {n: folder / f for n, f in weight_map.items() if n.startswith(prefix)}
    shards = sorted(folder.glob("*.safetensors"))
    if not shards:
        raise ValueError(f"no *.safetensors files in {folder}")
    found: dict[str, Path] = {}
    for shard in shards:
        from safetensors import safe_open  # only where a checkpoint is read (~9 ms a process)

        with safe_open(shard, framework="numpy") as f:
            found |= {n: shard for n in f.keys() if n.startswith(prefix)}
    return found


def _load_tensors(names: dict[str, Path]) -> dict[str, np.ndarray]:
    by_shard: dict[Path, list[str]] = {}
    for name, shard in names.items():
        by_shard.setdefault(shard, []).append(name)
    out: dict[str, np.ndarray] = {}
    for shard, shard_names in by_shard.items():
        if not shard.exists():
            raise ValueError(f"shard {shard.name} named by {INDEX_NAME} is missing")
        from safetensors import safe_open  # only where a checkpoint is read (~9 ms a process)

        with safe_open(shard, framework="numpy") as f:
            for name in shard_names:
                dtype = f.get_slice(name).get_dtype()
                if dtype == "BF16":
                    out[name] = _read_bf16(shard, name)
                elif dtype in ("F32", "F16", "F64"):
                    out[name] = f.get_tensor(name).astype(np.float32)
                else:
                    raise ValueError(f"tensor {name} has dtype {dtype}; only BF16, F16, F32, F64 load")
    return out


def load_layer(checkpoint_dir: str | Path, layer_idx: int, config: ModelConfig | None = None) -> Layer:
    """Layer `layer_idx` of the checkpoint in `checkpoint_dir`, weights in float32.

    `config` defaults to the folder's config.json. Raises ValueError naming a missing tensor or a bad shape."""
    folder = Path(checkpoint_dir)
    if not folder.is_dir():
        raise ValueError(f"checkpoint folder {folder} does not exist")
    config = config or from_hf(folder)
    if not 0 <= layer_idx < config.num_hidden_layers:
        raise ValueError(f"layer {layer_idx} is outside 0..{config.num_hidden_layers - 1}")
    prefix = f"model.layers.{layer_idx}."
    available = _shard_map(folder, prefix)
    shapes = weight_shapes(config)
    missing = [prefix + n for n in shapes if prefix + n not in available]
    if missing:
        raise ValueError(
            f"checkpoint lacks tensor {missing[0]}" + (f" (and {len(missing) - 1} more)" if missing[1:] else "")
        )
    tensors = _load_tensors({prefix + n: available[prefix + n] for n in shapes})
    weights: dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        t = tensors[prefix + name]
        if t.shape != shape:
            raise ValueError(f"tensor {prefix + name} has shape {tuple(t.shape)}, expected {shape}")
        weights[name] = t
    return Layer(config, weights)
