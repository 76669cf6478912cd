"""`layerscope cost --json`: every kernel says whether a measured table or the analytic model priced it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_cost_json_names_each_kernel_source_and_table() -> None:
    out = subprocess.run([sys.executable, "-m", "layerscope", "cost", "--gpu", "h200", "--tokens", "2048", "--json"],
                         capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    kernels = data["kernels"]
    assert sum(k["us"] for k in kernels) == pytest.approx(sum(s["time_us"] for s in data["stages"]))
    measured = [k for k in kernels if k["source"] == "measured"]
    assert {k["stage"] for k in measured} >= {"qkv_proj", "o_proj", "experts", "attention"}
    for k in measured:
        assert set(k["table"]) == {"system", "backend", "version", "file", "kernel"}
        assert k["table"]["system"] == "h200_sxm"
    assert all(k["table"] is None for k in kernels if k["source"] == "analytic")
    assert {k["source"] for k in kernels} == {"measured", "analytic"}
