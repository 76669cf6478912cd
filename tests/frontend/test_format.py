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


def test_a_tour_checks_figure_has_four_significant_digits_and_integers_stay_whole() -> None:
    assert figures([10.212078139806106, 0.2922540255828383, 1728.3197, 1664, True, "x"]) == [
        "10.21", "0.2923", "1728", "1664", "true", "x"]
