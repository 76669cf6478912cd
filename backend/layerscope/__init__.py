"""LayerScope: the runtime topology of one Qwen3-235B-A22B decoder layer, simulated and visualised."""

__version__ = "0.1.0"
