"""Size limits for the engine's code: no file over 400 lines, no class over 200, no function over 60.

The engine is every module under backend/layerscope/runtime/ (the loop, instances, schedulers, the runtime plans and
the KV cache package) and layerscope/result.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "backend" / "layerscope"
ENGINE = sorted([*(PACKAGE / "runtime").rglob("*.py"), PACKAGE / "result.py"])
MAX_FILE, MAX_CLASS, MAX_FUNCTION = 400, 200, 60


def oversized(source: str) -> list[str]:
    """What in `source` is past its limit, as 'what name: N lines'."""
    out = []
    lines = len(source.splitlines())
    if lines > MAX_FILE:
        out.append(f"file: {lines} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            n = (node.end_lineno or node.lineno) - node.lineno + 1
            limit = MAX_CLASS if isinstance(node, ast.ClassDef) else MAX_FUNCTION
            if n > limit:
                out.append(f"{type(node).__name__} {node.name}: {n} lines")
    return out


def test_the_check_finds_what_is_too_long() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    assert oversized(f"def f() -> None:\n{body}\n") == ["FunctionDef f: 62 lines"]
    methods = "\n".join(f"    def m{i}(self) -> None:\n        pass\n" for i in range(67))
    assert oversized(f"class C:\n{methods}") == ["ClassDef C: 201 lines"]
    assert oversized("x = 1\n" * 401) == ["file: 401 lines"]
    assert oversized("def f() -> None:\n    pass\n") == []


@pytest.mark.parametrize("path", ENGINE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_engine_modules_stay_within_the_size_limits(path: Path) -> None:
    assert oversized(path.read_text()) == [], path.name
