# Two commands on a fresh machine: `make run` and `make test`.
PY ?= python3
# `make run PORT=8765` serves on another port; `make run HOST=0.0.0.0` on every interface (default: this machine only)
HOST ?= 127.0.0.1
PORT ?= 8000
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench browser-deps clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/layerscope serve --prewarm --host $(HOST) --port $(PORT)

# Debian's Chromium drives the browser tests (Playwright's own download does not work here).
browser-deps:
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "installing Debian chromium for the browser tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

test: $(STAMP) browser-deps
	$(BIN)/ruff check backend tests bench
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check backend tests bench

bench: $(STAMP)
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) build dist .pytest_cache
