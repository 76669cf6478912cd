"""CLI subcommands, one module each (see layerscope.cli)."""
