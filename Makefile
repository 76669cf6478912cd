# Two commands on a fresh machine: `make run` and `make test`.
PY ?= python3
# `make run PORT=8765` serves on another port; `make run HOST=0.0.0.0` on every interface (default: this machine only)
HOST ?= 127.0.0.1
PORT ?= 8000
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast lint typecheck digests bench browser-deps clean

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

# The whole suite, as CI runs it (.ci/run): lint, types, the event digests, then every test, browser ones included.
test: $(STAMP) browser-deps
	$(BIN)/ruff check backend tests bench
	$(BIN)/python -m mypy
	$(BIN)/python bench/event_digests.py --check bench/event_digests.json
	$(BIN)/python -m pytest -q

# The inner loop: lint and every test but the browser ones (about a third of `make test`'s time).
test-fast: $(STAMP)
	$(BIN)/ruff check backend tests bench
	$(BIN)/python -m pytest -q -m "not browser"

typecheck: $(STAMP)
	$(BIN)/python -m mypy

# Every preset's events against the committed digests (bench/event_digests.json); --save rewrites the file.
digests: $(STAMP)
	$(BIN)/python bench/event_digests.py --check bench/event_digests.json

lint: $(STAMP)
	$(BIN)/ruff check backend tests bench

bench: $(STAMP)
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) build dist .pytest_cache
