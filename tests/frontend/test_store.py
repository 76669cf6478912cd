"""frontend/static/js/store.js decodeTable under Node: the overview's column tables back to the events' fields."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from layerscope import scenario as scn
from layerscope.runtime.engine import simulate
from layerscope.server.overview import FIELDS, SHARED, column_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from fakesim import rows  # noqa: E402

JS = Path(__file__).resolve().parents[2] / "frontend" / "static" / "js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (the browser tests cover the same code)")


def decoded(table: dict, tmp_path: Path) -> list[dict]:
    src = tmp_path / "table.json"
    src.write_text(json.dumps(table))
    script = (f'import {{ readFileSync }} from "node:fs";'
              f'const {{ decodeTable }} = await import("{(JS / "store.js").as_uri()}");'
              f'const tab = JSON.parse(readFileSync({json.dumps(str(src))}, "utf8"));'
              "console.log(JSON.stringify(decodeTable(tab).map((o) => Object.entries(o))));")
    assert NODE is not None
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, check=True)
    return [dict(pairs) for pairs in json.loads(out.stdout)]


def test_a_kernel_table_with_shared_rows_decodes_to_every_launch_field_in_order(tmp_path: Path) -> None:
    result = simulate(scn.load_preset("serving-kv-preemption"))
    kernels = [e for e in result.events if e.kind == "kernel"]
    table = column_table(kernels, FIELDS["kernel"], SHARED["kernel"])
    assert len(table["shared"]["rows"]) < len(table["rows"])
    got = decoded(table, tmp_path)
    assert got == rows(column_table(kernels, FIELDS["kernel"]))  # what a table sharing nothing holds
    assert [list(o) for o in got[:3]] == [list(FIELDS["kernel"])] * 3  # every field, in FIELDS' order


def test_a_table_without_shared_rows_decodes_as_before(tmp_path: Path) -> None:
    result = simulate(scn.load_preset("chunk-size-sweep-numa"))
    chunks = [e for e in result.events if e.kind == "chunk"]
    table = column_table(chunks, FIELDS["chunk"])
    assert "shared" not in table
    assert decoded(table, tmp_path) == rows(table)
