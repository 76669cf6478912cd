"""The README's Python example runs as written (from the repository top)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_readme_python_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    (block,) = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    monkeypatch.chdir(REPO)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - our own documentation
    assert namespace["step"].shape == (1, namespace["layer"].config.hidden_size)
