"""ModelConfig: presets' derived figures and from_hf for each supported model type."""

from __future__ import annotations

from pathlib import Path

import pytest

from layerscope.model import ModelConfig, from_hf, preset

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_qwen3_235b_counts() -> None:
    c = preset("qwen3-235b-a22b")
    assert c.params_total == pytest.approx(235e9, rel=0.02)
    assert c.params_active == pytest.approx(22e9, rel=0.03)
    assert c.kv_bytes_per_token_per_layer() == 2 * 4 * 128 * 2


def test_scaled_presets_keep_the_ratios() -> None:
    big = preset("qwen3-235b-a22b")
    for name in ("tiny", "small"):
        c = preset(name)
        assert c.gqa_group == big.gqa_group and c.q_dim == 2 * c.hidden_size and c.qk_norm
        assert c.num_experts_per_tok / c.num_experts == pytest.approx(big.num_experts_per_tok / big.num_experts)


def hf(model_type: str, **extra) -> dict:
    return {
        "model_type": model_type,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 100,
        "intermediate_size": 128,
        **extra,
    }


def test_from_hf_qwen3_moe_old_and_new_key_names() -> None:
    old = from_hf(
        hf(
            "qwen3_moe",
            num_experts=8,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            rope_theta=5e5,
            norm_topk_prob=True,
            head_dim=32,
        )
    )
    new = from_hf(
        hf(
            "qwen3_moe",
            num_local_experts=8,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            rope_parameters={"rope_theta": 5e5, "rope_type": "default"},
            norm_topk_prob=True,
            head_dim=32,
        )
    )
    for c in (old, new):
        assert c.is_moe and c.num_experts == 8 and c.rope_theta == 5e5 and c.qk_norm and c.head_dim == 32
        assert c.rope_type == "default"


def test_from_hf_dense_types() -> None:
    qwen3 = from_hf(hf("qwen3", head_dim=16))
    llama = from_hf(hf("llama", rope_scaling={"rope_type": "llama3", "factor": 8.0}))
    qwen2 = from_hf(hf("qwen2", torch_dtype="float32"))
    assert not qwen3.is_moe and qwen3.qk_norm and qwen3.head_dim == 16
    assert not llama.qk_norm and llama.head_dim == 16 and llama.rope_type == "llama3"
    assert qwen2.attention_bias and qwen2.weight_dtype == "fp32"


def test_from_hf_reads_a_transformers_config_file() -> None:
    c = from_hf(FIXTURES / "qwen3_moe_tiny")
    assert isinstance(c, ModelConfig) and c.num_experts == 8 and c.num_experts_per_tok == 2 and c.rope_theta == 1e6


def test_from_hf_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not supported"):
        from_hf(hf("gpt2"))
    with pytest.raises(ValueError, match="lacks 'vocab_size'"):
        from_hf({k: v for k, v in hf("qwen3").items() if k != "vocab_size"})
    with pytest.raises(ValueError, match="no config.json"):
        from_hf(tmp_path)
    with pytest.raises(ValueError, match="unknown model preset"):
        preset("nope")


def test_a_configs_cached_hash_is_the_dataclass_hash_and_stays_out_of_copies_pickles_and_dicts() -> None:
    import copy
    import dataclasses
    import pickle

    from layerscope.model.config import PRESETS, ModelConfig

    m = PRESETS["qwen3-235b-a22b"]
    plain = dataclasses.make_dataclass("ModelConfig", [(f.name, f.type, f) for f in dataclasses.fields(ModelConfig)],
                                       frozen=True)
    ref = plain(**{f.name: getattr(m, f.name) for f in dataclasses.fields(ModelConfig)})
    assert hash(m) == hash(ref) == hash(m)
    for other in (pickle.loads(pickle.dumps(m)), copy.copy(m), copy.deepcopy(m), m.scaled()):
        assert "_hash" not in other.__dict__ and other == m and hash(other) == hash(m)
    assert m.to_dict() == dataclasses.asdict(ref) and "_hash" not in m.to_dict()
    assert hash(m.scaled(hidden_size=8)) == hash(dataclasses.replace(ref, hidden_size=8))
