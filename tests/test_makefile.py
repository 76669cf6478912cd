"""`make test` is the gate CI runs (ruff, mypy, the committed event digests, the whole suite); `make test-fast`
leaves the browser tests out. Read from `make -n`, so nothing here runs the suite."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def dry_run(target: str) -> list[str]:
    out = subprocess.run(["make", "-n", "-C", str(REPO), target], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if ".venv/bin/" in line]


def test_make_test_runs_lint_types_digests_then_every_test():
    lines = dry_run("test")
    steps = ["ruff check", "-m mypy", "event_digests.py --check bench/event_digests.json", "-m pytest -q"]
    at = [next(i for i, line in enumerate(lines) if s in line) for s in steps]
    assert at == sorted(at), lines
    (pytest_line,) = [line for line in lines if "-m pytest" in line]
    assert "-m " not in pytest_line.split("pytest", 1)[1]  # no marker filter: browser tests included


def test_make_test_fast_leaves_only_the_browser_tests_out():
    (pytest_line,) = [line for line in dry_run("test-fast") if "-m pytest" in line]
    assert pytest_line.endswith('-m "not browser"')
    assert "test-fast" in (REPO / "README.md").read_text()


def test_ci_runs_make_test():
    assert (REPO / ".ci" / "run").read_text().strip().endswith("make test")


def load_digests_module():
    spec = importlib.util.spec_from_file_location("event_digests", REPO / "bench" / "event_digests.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO / "bench"))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(REPO / "bench"))
    return mod


def test_the_digest_check_names_the_changed_runs_and_how_to_update():
    mod = load_digests_module()
    assert mod.changed({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == ["b", "c"]
    assert mod.changed({"a": "1"}, {"a": "1"}) == []
    msg = mod.failure_message(["b"], Path("bench/event_digests.json"))
    assert "b" in msg and "--save bench/event_digests.json" in msg and "events change:" in msg


def test_the_committed_digests_cover_every_preset():
    import json

    want = json.loads((REPO / "bench" / "event_digests.json").read_text())
    presets = {p.stem for p in (REPO / "scenarios").glob("*.yaml")}
    assert presets <= set(want)
