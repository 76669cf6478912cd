from layerscope.cli import entry

entry()
