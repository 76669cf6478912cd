"""frontend/static/js/format.js under Node: figures print as a reader quotes them."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parents[2] / "frontend" / "static" / "js" / "format.js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (the browser tests cover the same code)")


def figures(values: list[object]) -> list[str]:
    script = f'import {{ figure }} from "{JS.as_uri()}"; console.log(JSON.stringify({json.dumps(values)}.map(figure)));'
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def figures_of_expr(expr: str) -> list[str]:
    script = f'import {{ figure }} from "{JS.as_uri()}"; console.log(JSON.stringify({expr}.map(figure)));'
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_a_tour_checks_figure_has_four_significant_digits_and_integers_stay_whole() -> None:
    assert figures([10.212078139806106, 0.2922540255828383, 1728.3197, 1664, True, "x"]) == [
        "10.21", "0.2923", "1728", "1664", "true", "x"]


def test_a_ratio_over_zero_reads_as_infinity_sign() -> None:
    # page-hint-jitter's compare.migrations/migrations: the run with the hint migrates nothing
    assert figures(["Infinity", "-Infinity"]) == ["∞", "−∞"]  # how the server's JSON carries it
    assert figures_of_expr("[Infinity, -Infinity]") == ["∞", "−∞"]
