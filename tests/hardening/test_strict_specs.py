"""Finding 12: strict types for specs from files and sockets (`prompt_len: true` and `"8192"` refused), whole-spec
errors located at the field they are about (`set.deployment.tp`), duplicate YAML keys refused, and
`deployment.max_model_len` below the run's requests refused with the reason (as vLLM refuses such requests)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hardening_util import ws_answer

from layerscope import scenario as scn
from layerscope.cli import main
from layerscope.commands.serve import build_app
from layerscope.runtime.engine import simulate
from layerscope.server.settings import Settings

LAX = [
    ({"prompt_len": True}, "prompt_len"),
    ({"prompt_len": "8192"}, "prompt_len"),
    ({"decode_steps": 3.0}, "decode_steps"),
    ({"numerics": 1}, "numerics"),
    ({"numerics": "yes"}, "numerics"),
    ({"sla_ms": "10"}, "sla_ms"),
    ({"workload": {"num_requests": "3"}}, "workload.num_requests"),
]


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(build_app(Settings())) as c:
        yield c


@pytest.mark.parametrize(("fragment", "field"), LAX)
def test_lax_types_are_refused_from_files(tmp_path: Path, fragment: dict[str, Any], field: str) -> None:
    path = tmp_path / "lax.yaml"
    path.write_text("\n".join(f"{k}: {v!r}" if not isinstance(v, dict) else f"{k}: {v}" for k, v in fragment.items())
                    .replace("True", "true"))
    with pytest.raises(scn.ScenarioError, match=f"field '{field}'"):
        scn.load(str(path))


@pytest.mark.parametrize(("fragment", "field"), LAX)
def test_lax_types_are_refused_from_the_websocket(client: TestClient, fragment: dict[str, Any], field: str) -> None:
    err = ws_answer(client, {"type": "load", "spec": fragment})
    assert err["type"] == "error" and err["field"] == f"spec.{field}", err


def test_numbers_and_infinity_still_load(client: TestClient) -> None:
    spec = scn.parse_spec({"sla_ms": 10, "workload": {"request_rate": "Infinity", "num_requests": 2}})
    assert spec.sla_ms == 10.0 and spec.workload is not None and spec.workload.request_rate == float("inf")
    assert scn.apply_overrides(spec, scn.parse_set(["workload.request_rate=inf"])).workload.request_rate == float("inf")
    for name in scn.preset_names():
        scn.load_preset(name)


def test_a_whole_spec_error_names_the_override_it_is_about(client: TestClient) -> None:
    err = ws_answer(client, {"type": "load", "scenario": "serving-64-h200-tp8", "set": {"deployment.tp": 3}})
    assert err["type"] == "error" and err["field"] == "set.deployment.tp", err
    assert "field 'deployment.tp'" in err["message"] and "(top level)" not in err["message"]


def test_duplicate_yaml_keys_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("name: dup\nprompt_len: 1024\ndecode_steps: 4\nprompt_len: 2048\n")
    with pytest.raises(scn.ScenarioError, match="duplicate key 'prompt_len'"):
        scn.load(str(path))
    nested = tmp_path / "nested.yaml"
    nested.write_text("name: dup\nworkload:\n  num_requests: 2\n  num_requests: 3\n")
    assert main(["scenarios", str(nested)]) == 2
    assert "duplicate key 'num_requests'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "spec",
    [
        {"gpu": "h200", "deployment": {"tp": 8, "max_model_len": 16}},
        {"gpu": "h200", "prompt_len": 4096, "decode_steps": 32, "deployment": {"tp": 8, "max_model_len": 4096}},
    ],
)
def test_max_model_len_below_the_requests_is_refused_with_the_reason(client: TestClient, spec: dict) -> None:
    with pytest.raises(scn.ScenarioError, match="field 'deployment.max_model_len': .* below .* vLLM refuses"):
        scn.parse_spec(spec)
    err = ws_answer(client, {"type": "load", "spec": spec})
    assert err["type"] == "error" and err["field"] == "spec.deployment.max_model_len", err


def test_a_workloads_requests_over_max_model_len_are_rejected_one_by_one() -> None:
    # as vLLM's server answers each with a 400 and serves the rest: the spec is accepted, the requests rejected
    spec = scn.parse_spec({"gpu": "h200", "workload": {"num_requests": 2, "input_len": 1024, "output_len": 64},
                           "deployment": {"tp": 8, "max_model_len": 512}})
    r = simulate(spec, summary_only=True)
    assert r.summary["failed"] == 2 and r.summary["completed"] == 0


def test_max_model_len_that_fits_still_runs() -> None:
    spec = scn.parse_spec({"gpu": "h200", "prompt_len": 4000, "decode_steps": 96,
                           "deployment": {"tp": 8, "max_model_len": 4096}})
    assert spec.deployment is not None and spec.deployment.max_model_len == 4096
