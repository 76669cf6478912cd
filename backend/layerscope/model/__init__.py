"""The numeric model: configs and presets, the numpy decoder layer, checkpoint loading, the paged KV cache."""

from layerscope.model.checkpoint import load_layer
from layerscope.model.config import ModelConfig, from_hf, preset
from layerscope.model.kv_cache import PagedKVCache
from layerscope.model.layer import Layer, LayerTrace

__all__ = ["Layer", "LayerTrace", "ModelConfig", "PagedKVCache", "from_hf", "load_layer", "preset"]
