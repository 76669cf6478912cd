"""Model configurations: presets, Hugging Face config.json loading, derived sizes.

One typed dataclass, like nanoGPT's GPTConfig. Field names follow Hugging Face where they exist
(hidden_size, num_attention_heads, ...), so `from_hf` is a near one-to-one copy.
"""

from __future__ import annotations

import json
import operator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

Dtype = Literal["fp32", "bf16", "fp16", "fp8", "int4", "int2"]

# Bytes per element; int4/int2 are packed.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int4": 0.5,
    "int2": 0.25,
}

SUPPORTED_HF_TYPES = ("qwen3_moe", "qwen3", "llama", "qwen2")


@dataclass(frozen=True)
class ModelConfig:
    name: str
    model_type: str  # qwen3_moe | qwen3 | llama | qwen2 | article
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int = 0  # dense MLP width (0 for MoE layers)
    num_experts: int = 0  # 0 = dense SwiGLU MLP
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = True
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    qk_norm: bool = True  # per-head RMSNorm on q and k before RoPE (Qwen3)
    attention_bias: bool = False
    tie_word_embeddings: bool = False
    weight_dtype: Dtype = "bf16"  # linear weights as stored
    kv_dtype: Dtype = "bf16"
    embedding_dtype: Dtype = "bf16"
    quant_group_size: int = 0  # >0 for group-quantized weights (article: int2)
    rope_type: str = "default"  # from rope_scaling / rope_parameters; the numpy layer runs only "default"
    max_position_embeddings: int = 40960  # vLLM's default max_model_len (Qwen3-235B-A22B and 30B-A3B: 40960)

    # -- shapes ---------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def gqa_group(self) -> int:
        return self.num_attention_heads // self.num_key_value_heads

    # -- parameter counts -------------------------------------------------------------------
    @property
    def attention_params(self) -> int:
        h = self.hidden_size
        n = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        if self.attention_bias:
            n += self.q_dim + 2 * self.kv_dim
        if self.qk_norm:
            n += 2 * self.head_dim
        return n

    @property
    def expert_params(self) -> int:
        """One SwiGLU expert: gate, up [moe_inter, hidden] and down [hidden, moe_inter]."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    @property
    def mlp_params_total(self) -> int:
        if self.is_moe:
            return self.num_experts * self.expert_params + self.hidden_size * self.num_experts
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def mlp_params_active(self) -> int:
        if self.is_moe:
            return self.num_experts_per_tok * self.expert_params + self.hidden_size * self.num_experts
        return self.mlp_params_total

    @property
    def params_per_layer(self) -> int:
        return self.attention_params + self.mlp_params_total + 2 * self.hidden_size

    @property
    def active_params_per_layer(self) -> int:
        return self.attention_params + self.mlp_params_active + 2 * self.hidden_size

    @property
    def embedding_params(self) -> int:
        n = self.vocab_size * self.hidden_size
        return n if self.tie_word_embeddings else 2 * n

    @property
    def params_total(self) -> int:
        return self.num_hidden_layers * self.params_per_layer + self.embedding_params + self.hidden_size

    @property
    def params_active(self) -> int:
        return self.num_hidden_layers * self.active_params_per_layer + self.embedding_params + self.hidden_size

    # -- bytes ------------------------------------------------------------------------------
    def kv_bytes_per_token_per_layer(self, dtype: str | None = None) -> float:
        """K and V of one token in one layer."""
        return 2 * self.kv_dim * DTYPE_BYTES[dtype or self.kv_dtype]

    def kv_bytes_per_token(self, dtype: str | None = None) -> float:
        return self.num_hidden_layers * self.kv_bytes_per_token_per_layer(dtype)

    def weight_bytes_per_layer(self, dtype: str | None = None, active_only: bool = False) -> float:
        """Weights of one layer in `dtype` (default: weight_dtype), plus group scales/zeros if quantized."""
        d = dtype or self.weight_dtype
        n = self.active_params_per_layer if active_only else self.params_per_layer
        b = n * DTYPE_BYTES[d]
        if d in ("int2", "int4") and self.quant_group_size:
            b += (n / self.quant_group_size) * 2 * DTYPE_BYTES["fp16"]  # one scale + one zero per group
        return b

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def scaled(self, **changes: Any) -> ModelConfig:
        return replace(self, **changes)

    def __hash__(self) -> int:
        """The hash dataclass would give (of the tuple of every field), computed once: the plans' memos key on the
        model every engine step (~14k hashes a 500-request run, ~1 us each)."""
        try:
            return self.__dict__[_HASH]
        except KeyError:
            h = self.__dict__[_HASH] = hash(_config_fields(self))
            return h

    def __getstate__(self) -> dict[str, object]:
        """Pickled and copied without the cached hash: a string's hash differs from one process to the next."""
        state = self.__dict__.copy()
        state.pop(_HASH, None)
        return state


_config_fields = operator.attrgetter(*ModelConfig.__dataclass_fields__)  # every field's value, in declaration order
_HASH = "_hash"  # ModelConfig.__hash__'s cache: an instance attribute, not a field (eq, repr, asdict ignore it)


def _qwen3_235b() -> ModelConfig:
    """Qwen/Qwen3-235B-A22B as its config.json gives it: MoE, 22B active of 235B."""
    return ModelConfig(
        name="qwen3-235b-a22b",
        model_type="qwen3_moe",
        hidden_size=4096,
        num_hidden_layers=94,
        num_attention_heads=64,
        num_key_value_heads=4,
        head_dim=128,
        vocab_size=151936,
        intermediate_size=12288,  # unused by MoE layers (decoder_sparse_step=1, no mlp_only_layers)
        num_experts=128,
        num_experts_per_tok=8,
        moe_intermediate_size=1536,
        norm_topk_prob=True,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
    )


def _qwen3_30b() -> ModelConfig:
    """Qwen/Qwen3-30B-A3B."""
    return ModelConfig(
        name="qwen3-30b-a3b",
        model_type="qwen3_moe",
        hidden_size=2048,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        vocab_size=151936,
        intermediate_size=6144,
        num_experts=128,
        num_experts_per_tok=8,
        moe_intermediate_size=768,
        norm_topk_prob=True,
    )


def _article() -> ModelConfig:
    """The layer as the design article describes it.

    The article reads "a22b" as asymmetric 2-bit weight quantization with bias compensation.
    Stated by the article: hidden 2048, 32 heads, Q/K/V weights [2048, 2048] (so no GQA: 32 KV
    heads of 64), a dense SwiGLU FFN, a 4-bit packed embedding table.
    Chosen here because the article gives no number (say so wherever shown):
      - intermediate_size 5632 (the 2.75x SwiGLU ratio of Llama-style 2048-wide models);
      - quant_group_size 64 (one fp16 scale and zero point per 64 weights);
      - 94 layers and vocab 151936, taken from the real model the article names;
      - no q/k norm (the article never mentions it), rope_theta 1e6, KV cache in bf16.
    """
    return ModelConfig(
        name="article",
        model_type="article",
        hidden_size=2048,
        num_hidden_layers=94,
        num_attention_heads=32,
        num_key_value_heads=32,
        head_dim=64,
        vocab_size=151936,
        intermediate_size=5632,
        qk_norm=False,
        weight_dtype="int2",
        embedding_dtype="int4",
        quant_group_size=64,
    )


def _tiny() -> ModelConfig:
    """qwen3-235b-a22b scaled for tests: GQA group 16, top-2 of 32 experts (1/16 like 8/128),
    q_dim = 2 x hidden, q/k norm, moe_intermediate = 0.375 x hidden. Runs in microseconds."""
    return ModelConfig(
        name="tiny",
        model_type="qwen3_moe",
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=16,
        num_key_value_heads=1,
        head_dim=8,
        vocab_size=512,
        num_experts=32,
        num_experts_per_tok=2,
        moe_intermediate_size=24,
        weight_dtype="fp32",
        kv_dtype="fp32",
        embedding_dtype="fp32",
    )


def _small() -> ModelConfig:
    """qwen3-235b-a22b scaled to what numpy runs in milliseconds: GQA group 16, top-8 of 128
    experts, q_dim = 2 x hidden, q/k norm, moe_intermediate = 0.375 x hidden."""
    return ModelConfig(
        name="small",
        model_type="qwen3_moe",
        hidden_size=512,
        num_hidden_layers=4,
        num_attention_heads=32,
        num_key_value_heads=2,
        head_dim=32,
        vocab_size=4096,
        num_experts=128,
        num_experts_per_tok=8,
        moe_intermediate_size=192,
        weight_dtype="fp32",
        kv_dtype="fp32",
        embedding_dtype="fp32",
    )


PRESETS: dict[str, ModelConfig] = {
    c.name: c for c in (_qwen3_235b(), _qwen3_30b(), _article(), _tiny(), _small())
}

# Which full-size preset each scaled numeric preset stands in for.
NUMERIC_PRESETS = ("tiny", "small")


def preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def from_hf(source: dict[str, Any] | str | Path, name: str | None = None) -> ModelConfig:
    """Build a ModelConfig from a Hugging Face config.json (a dict or a path to the file or its folder)."""
    config: dict[str, Any]
    if isinstance(source, dict):
        config = source
    else:
        path = Path(source)
        if path.is_dir():
            path = path / "config.json"
        try:
            config = json.loads(path.read_text())
        except FileNotFoundError:
            raise ValueError(f"no config.json at {path}") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from None
        name = name or path.parent.name
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_HF_TYPES:
        raise ValueError(f"model_type {model_type!r} is not supported; supported: {', '.join(SUPPORTED_HF_TYPES)}")
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
        if key not in config:
            raise ValueError(f"config.json lacks {key!r}")
    heads = int(config["num_attention_heads"])
    hidden = int(config["hidden_size"])
    torch_dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    dtype: Dtype = {"float32": "fp32", "float16": "fp16"}.get(torch_dtype, "bf16")  # type: ignore[assignment]
    moe = model_type == "qwen3_moe"
    # transformers >= 5 writes rope_theta inside rope_parameters and num_experts as num_local_experts.
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    rope_theta = float(rope.get("rope_theta") or config.get("rope_theta") or 10000.0)
    rope_type = str(rope.get("rope_type") or rope.get("type") or "default")
    num_experts = int(config.get("num_experts") or config.get("num_local_experts") or 0)
    return ModelConfig(
        name=name or str(config.get("_name_or_path") or model_type),
        model_type=model_type,
        hidden_size=hidden,
        num_hidden_layers=int(config["num_hidden_layers"]),
        num_attention_heads=heads,
        num_key_value_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(config.get("head_dim") or hidden // heads),
        vocab_size=int(config["vocab_size"]),
        intermediate_size=int(config.get("intermediate_size") or 0),
        num_experts=num_experts if moe else 0,
        num_experts_per_tok=int(config.get("num_experts_per_tok") or 0) if moe else 0,
        moe_intermediate_size=int(config.get("moe_intermediate_size") or 0) if moe else 0,
        norm_topk_prob=bool(config.get("norm_topk_prob", False)),
        rope_theta=rope_theta,
        rope_type=rope_type,
        max_position_embeddings=int(config.get("max_position_embeddings") or 40960),
        rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
        qk_norm=model_type in ("qwen3", "qwen3_moe"),
        attention_bias=bool(config.get("attention_bias", model_type == "qwen2")),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        weight_dtype=dtype,
        kv_dtype=dtype,
        embedding_dtype=dtype,
    )


def resolve(model: str) -> ModelConfig:
    """A preset name, or a path to a Hugging Face config.json (or its folder)."""
    if model in PRESETS:
        return PRESETS[model]
    p = Path(model)
    if p.exists():
        return from_hf(p)
    raise ValueError(f"model {model!r} is neither a preset ({', '.join(PRESETS)}) nor a config.json path")
