"""The import gate: the package's layering, read from its own source with `ast`.

Every import counts, function-level and `if TYPE_CHECKING:` ones included, since a cycle hidden behind a lazy import
is still a cycle. Three rules: no import cycle between modules; no arrow the wrong way (the low layers never import
the ones above them); and no function-level import of a layerscope module without a reason comment on its line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "backend" / "layerscope"

# the engine proper: what export must never reach into (it reads the result types, not the loop that built them)
ENGINE = ("runtime.engine", "runtime.serving", "runtime.loop", "runtime.instance", "runtime.recorder",
          "runtime.request_run", "runtime.request_hooks", "runtime.request_pages", "runtime.request_state")
SCHEMAS = ("schemas", "events", "protocol", "result")
SPEC = ("scenario", "deployment", "strict", "budget")  # the spec and the types engine and server share

# (importer prefix, forbidden target prefixes): a prefix matches the module itself and everything under it
FORBIDDEN: list[tuple[str, tuple[str, ...]]] = [
    ("hardware", ("runtime",)),
    ("model", ("runtime",)),
    *[(s, ("runtime",)) for s in SCHEMAS],
    *[(s, ("runtime", "server", "export", "calibration")) for s in SPEC],
    ("hardware", ("calibration", "server", "export")),
    ("server", ("runtime", "hardware")),
    ("export", (*ENGINE, "server")),
]


@dataclass(frozen=True)
class Import:
    source: str  # importing module, dotted, relative to layerscope ("runtime.plan")
    target: str  # imported module, dotted, relative to layerscope
    line: int
    lazy: bool  # inside a function body
    reason: str  # the comment on the import's line, "" if none


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def resolve(source: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The layerscope modules an `from X import a, b` names (a may itself be a submodule)."""
    if node.level:
        base = source.split(".") if is_package else source.split(".")[:-1]
        base = base[: len(base) - node.level + 1] if node.level > 1 else base
        mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
    elif node.module and (node.module == "layerscope" or node.module.startswith("layerscope.")):
        mod = node.module.removeprefix("layerscope").lstrip(".")
    else:
        return []
    out = []
    for alias in node.names:
        sub = f"{mod}.{alias.name}" if mod else alias.name
        out.append(sub if sub in MODULES else mod)
    return out


def imports_of(name: str, path: Path) -> list[Import]:
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            lazy = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [a.name.removeprefix("layerscope").lstrip(".") for a in child.names
                           if a.name == "layerscope" or a.name.startswith("layerscope.")]
            elif isinstance(child, ast.ImportFrom):
                targets = resolve(name, path.name == "__init__.py", child)
            line = lines[child.lineno - 1] if targets else ""
            reason = line.split("#", 1)[1].strip() if "#" in line else ""
            found.extend(Import(name, t, child.lineno, in_function, reason) for t in targets if t and t != name)
            visit(child, lazy)

    visit(tree, False)
    return found


IMPORTS = [imp for name, path in MODULES.items() for imp in imports_of(name, path)]


def graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {name: set() for name in MODULES}
    for imp in IMPORTS:
        g[imp.source].add(imp.target)
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            connect(v)
    return sorted(out)


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_the_reader_sees_every_kind_of_import(tmp_path):
    """The gate is only as good as its reader: absolute, relative, lazy and TYPE_CHECKING imports all count."""
    src = tmp_path / "probe.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "import layerscope.events\n"
        "from . import scenario\n"
        "from .hardware import gpus\n"
        "if TYPE_CHECKING:\n"
        "    from layerscope.model.config import ModelConfig\n"
        "def f():\n"
        "    from layerscope.runtime import engine\n"
        "    from layerscope.tour import tour_results  # a reason\n"
    )
    got = [(i.target, i.lazy, i.reason) for i in imports_of("probe", src)]
    assert got == [("events", False, ""), ("scenario", False, ""), ("hardware.gpus", False, ""),
                   ("model.config", False, ""), ("runtime.engine", True, ""), ("tour", True, "a reason")]
    assert len(MODULES) > 50 and len(IMPORTS) > 100


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    found = cycles(graph())
    assert not found, "import cycles (lazy and TYPE_CHECKING imports count):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def wrong_way(imports: list[Import], source: str, targets: tuple[str, ...]) -> list[str]:
    return sorted({f"{i.source}:{i.line} -> {i.target}" for i in imports
                   if under(i.source, source) and any(under(i.target, t) for t in targets)})


def test_an_arrow_the_wrong_way_is_found():
    up = [Import("hardware.cost", "runtime.kernels", 3, False, ""), Import("hardwarex", "runtime", 1, False, "")]
    assert wrong_way(up, "hardware", ("runtime",)) == ["hardware.cost:3 -> runtime.kernels"]
    assert wrong_way(up, "hardware", ("runtime.engine",)) == []


@pytest.mark.parametrize(("source", "targets"), FORBIDDEN, ids=[s for s, _ in FORBIDDEN])
def test_no_arrow_the_wrong_way(source, targets):
    bad = wrong_way(IMPORTS, source, targets)
    assert not bad, f"{source} must not import {', '.join(targets)}:\n" + "\n".join(bad)


def test_function_level_imports_say_why():
    bad = [f"{i.source}:{i.line} -> {i.target}" for i in IMPORTS if i.lazy and not i.reason]
    assert not bad, "a function-level import of a layerscope module needs a one-line reason comment:\n" + "\n".join(
        bad)
