"""load_layer against transformers' own decoder layer (fixtures made by tests/fixtures/make_fixtures.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from layerscope.model import Layer, load_layer
from layerscope.model.checkpoint import bf16_bits_to_fp32, fp32_to_bf16_bits

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REF = np.load(FIXTURES / "reference.npz")
LAYER = int(REF["meta/layer"])


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize(
    "folder, key",
    [
        ("qwen3_moe_tiny", "qwen3_moe_tiny"),  # two shards + index
        ("qwen3_moe_tiny_bf16", "qwen3_moe_tiny_bf16"),  # bf16, one shard, no index
        ("llama_tiny", "llama_tiny"),  # dense, no q/k norm
        ("qwen2_tiny", "qwen2_tiny"),  # dense with q/k/v bias
    ],
)
def test_layer_matches_transformers(folder: str, key: str) -> None:
    base = key.removesuffix("_bf16")
    layer = load_layer(FIXTURES / folder, LAYER)
    y = layer.forward(REF[f"{base}/x"], REF[f"{base}/positions"])
    assert rel_err(y, REF[f"{key}/y"]) <= 1e-4


def test_loaded_config_and_dtype() -> None:
    layer = load_layer(FIXTURES / "qwen3_moe_tiny_bf16", LAYER)
    assert layer.config.is_moe and layer.config.num_experts == 8 and layer.config.rope_theta == 1e6
    w = layer.weights["self_attn.q_proj.weight"]
    assert w.dtype == np.float32
    # bf16 values have zero low mantissa bits once widened
    assert not np.any(w.view(np.uint32) & 0xFFFF)


def test_bf16_and_fp32_checkpoints_agree_to_bf16_precision() -> None:
    a = load_layer(FIXTURES / "qwen3_moe_tiny", LAYER).weights["mlp.experts.3.down_proj.weight"]
    b = load_layer(FIXTURES / "qwen3_moe_tiny_bf16", LAYER).weights["mlp.experts.3.down_proj.weight"]
    assert not np.array_equal(a, b)
    np.testing.assert_allclose(b, a, rtol=2**-8, atol=0)


def test_bf16_bit_conversion_rounds_to_nearest() -> None:
    x = np.array([1.0, -2.5, 1.0 + 2**-9, 1.0 + 3 * 2**-9, np.inf, 3.3e38], dtype=np.float32)
    back = bf16_bits_to_fp32(fp32_to_bf16_bits(x))
    assert back[0] == 1.0 and back[1] == -2.5 and back[2] == 1.0 and back[3] == 1.0 + 2**-7
    assert np.isinf(back[4]) and np.isnan(bf16_bits_to_fp32(fp32_to_bf16_bits(np.array([np.nan], np.float32))))[0]


def copy_without(tmp_path: Path, drop: str | None = None, reshape: str | None = None) -> Path:
    """A one-shard copy of the dense llama fixture with one tensor dropped or given a wrong shape."""
    src = load_layer(FIXTURES / "llama_tiny", LAYER)
    out = tmp_path / "ckpt"
    out.mkdir()
    shutil.copy(FIXTURES / "llama_tiny" / "config.json", out / "config.json")
    tensors = {f"model.layers.{LAYER}.{n}": w for n, w in src.weights.items() if n != drop}
    if reshape:
        tensors[f"model.layers.{LAYER}.{reshape}"] = np.zeros((3, 3), np.float32)
    save_file(tensors, str(out / "model.safetensors"))
    return out


def test_missing_tensor_is_named(tmp_path: Path) -> None:
    folder = copy_without(tmp_path, drop="self_attn.k_proj.weight")
    with pytest.raises(ValueError, match=rf"model\.layers\.{LAYER}\.self_attn\.k_proj\.weight"):
        load_layer(folder, LAYER)


def test_bad_shape_is_named(tmp_path: Path) -> None:
    folder = copy_without(tmp_path, reshape="mlp.up_proj.weight")
    with pytest.raises(ValueError, match=r"mlp\.up_proj\.weight has shape \(3, 3\)"):
        load_layer(folder, LAYER)


def test_bad_layer_index_and_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="layer 7 is outside"):
        load_layer(FIXTURES / "qwen3_moe_tiny", 7)
    with pytest.raises(ValueError, match="does not exist"):
        load_layer(tmp_path / "nope", 0)


def test_index_naming_a_missing_shard(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "qwen3_moe_tiny", folder)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    (folder / index["weight_map"][f"model.layers.{LAYER}.self_attn.q_proj.weight"]).unlink()
    with pytest.raises(ValueError, match="missing"):
        load_layer(folder, LAYER)


def test_only_the_requested_layer_is_read() -> None:
    layer = load_layer(FIXTURES / "qwen3_moe_tiny", 0)
    other = load_layer(FIXTURES / "qwen3_moe_tiny", 1)
    assert isinstance(layer, Layer)
    assert set(layer.weights) == set(other.weights)
    assert not np.array_equal(layer.weights["mlp.gate.weight"], other.weights["mlp.gate.weight"])
