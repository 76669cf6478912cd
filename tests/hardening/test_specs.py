"""Bad scenario specs from files, REST and websocket inline specs: refused, naming the field; no path traversal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from hardening_util import answer_then_probe

from layerscope import scenario as scn
from layerscope.cli import main
from layerscope.commands.serve import build_app
from layerscope.server.settings import Settings

# (spec fragment, the field the refusal must name, words the message must contain)
BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"bogus": 1}, "bogus", "not permitted"),
    ({"prompt_len": "long"}, "prompt_len", "valid integer"),
    ({"prompt_len": 0}, "prompt_len", "greater than or equal"),
    ({"prompt_len": scn.MAX_PROMPT_LEN + 1}, "prompt_len", "less than or equal"),
    ({"decode_steps": scn.MAX_DECODE_STEPS + 1}, "decode_steps", "less than or equal"),
    ({"decode_steps": -1}, "decode_steps", "greater than or equal"),
    ({"chunk_size": 1}, "chunk_size", "greater than or equal"),
    ({"banks": scn.MAX_BANKS + 1}, "banks", "less than or equal"),
    ({"fragmentation": 1.5}, "fragmentation", "less than or equal"),
    ({"free_hbm_gib": -3}, "free_hbm_gib", "greater than"),
    ({"gpu": "tpu-v9"}, "gpu", "Input should be"),
    ({"model": "gpt-9"}, "model", "unknown model"),
    ({"name": "../../etc"}, "name", "lower-case"),
    ({"description": "x" * 4001}, "description", "at most 4000"),
    ({"faults": [{"kind": "ecc_bitflips"}] * 17}, "faults", "at most 16"),
    ({"faults": [{"kind": "meteor"}]}, "faults.0.kind", "Input should be"),
    ({"faults": [{"kind": "ecc_bitflips", "count": 10**9}]}, "faults.0.count", "less than or equal"),
    ({"actions": [{"do": "compact", "amount_gib": 1e9}]}, "actions.0.amount_gib", "less than or equal"),
    ({"tour": [{"title": "t", "text": "x"}] * 33}, "tour", "at most 32"),
    ({"tour": [{"title": "t", "text": "x" * 2001}]}, "tour.0.text", "at most 2000"),
    ({"compare": {"label": "x", "set": {"bogus": 1}}}, "compare.set", "bogus"),
    ({"compare": {"label": "x", "set": {"prompt_len": -5}}}, "compare.set", "prompt_len"),
    ({"compare": {"label": "x", "set": {"tour": []}}}, "compare.set", "tour"),
    ({"page_size": 1, "prompt_len": scn.MAX_PROMPT_LEN}, "(top level)", "KV pages"),
    ({"gpu": "h100-sxm", "deployment": {"tp": 4}}, "deployment.tp", "weights need 109.5 GiB per GPU at tp=4"),
    ({"deployment": {"tp": 8, "ep": 3}}, "deployment", "must divide tp"),
]
IDS = [f"{next(iter(b[0]))}-{b[1]}" for b in BAD]


@pytest.mark.parametrize(("fragment", "field", "words"), BAD, ids=IDS)
def test_files_refuse_naming_the_field(tmp_path: Path, fragment: dict[str, Any], field: str, words: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "bad", **fragment}))
    with pytest.raises(scn.ScenarioError) as e:
        scn.load(str(path))
    assert f"field '{field}'" in str(e.value) and words in str(e.value) and str(path) in str(e.value)


def test_cli_refuses_a_bad_file_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"prompt_len": -1}))
    assert main(["scenarios", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "prompt_len" in err


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(build_app(Settings(max_sim_work=2000))) as c:
        yield c


@pytest.mark.parametrize(("fragment", "field", "words"), BAD, ids=IDS)
def test_websocket_inline_specs_refuse_naming_the_field(
    client: TestClient, fragment: dict[str, Any], field: str, words: str
) -> None:
    err = answer_then_probe(client, {"type": "load", "spec": fragment})
    assert err["type"] == "error" and words in err["message"]
    assert err["field"] == f"spec.{field}"


@pytest.mark.parametrize(("fragment", "field", "words"), [b for b in BAD if "." not in b[1] and b[1] != "(top level)"])
def test_websocket_overrides_refuse_naming_the_field(
    client: TestClient, fragment: dict[str, Any], field: str, words: str
) -> None:
    err = answer_then_probe(client, {"type": "load", "scenario": "decode-pulses", "set": fragment})
    assert err["type"] == "error" and field in err["message"]
    assert err["field"] == f"set.{field}"


@pytest.mark.parametrize(
    ("cmd", "field"),
    [
        ({"spec": {"prompt_len": 262144, "chunk_size": 16, "low_mem_chunk_size": 16}}, "spec.prompt_len"),
        ({"scenario": "decode-pulses", "set": {"decode_steps": 8000}}, "set.decode_steps"),
        ({"spec": {"decode_steps": 1500, "compare": {"label": "x", "set": {}}}}, "spec.decode_steps"),
    ],
)
def test_runs_beyond_the_servers_work_limit_are_refused_before_simulating(
    client: TestClient, cmd: dict[str, Any], field: str
) -> None:
    before = client.get("/api/debug/sessions").json()["simulations"]
    err = answer_then_probe(client, {"type": "load", **cmd})
    assert err["type"] == "error" and err["field"] == field and "at most 2000" in err["message"]
    assert client.get("/api/debug/sessions").json()["simulations"] <= before + 1  # only the probe's decode-pulses


TRAVERSAL = [
    "../scenarios/decode-pulses",
    "../../pyproject",
    "/etc/passwd",
    "decode-pulses.yaml",
    "..",
    "scenarios/../decode-pulses",
    "DECODE-PULSES",
    "decode-pulses\x00",
    "%2e%2e%2fpyproject",
    "",
]


@pytest.mark.parametrize("name", TRAVERSAL)
def test_preset_names_cannot_leave_the_scenarios_folder(client: TestClient, name: str) -> None:
    with pytest.raises(scn.ScenarioError):
        scn.load_preset(name)
    err = answer_then_probe(client, {"type": "load", "scenario": name})
    assert err["type"] == "error" and err["field"] == "scenario"


@pytest.mark.parametrize(
    "path",
    [
        "/api/scenarios/..%2F..%2Fpyproject",
        "/api/scenarios/%2e%2e",
        "/api/scenarios/decode-pulses.yaml",
        "/api/scenarios/..",
        "/api/trace?scenario=..%2F..%2Fetc%2Fpasswd",
        "/api/trace?scenario=%2Fetc%2Fpasswd",
        "/static/../pyproject.toml",
        "/static/..%2F..%2Fpyproject.toml",
        "/static/%2e%2e/%2e%2e/pyproject.toml",
    ],
)
def test_rest_paths_cannot_leave_their_folders(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.status_code in (404, 422)
    assert "[project]" not in r.text and "root:" not in r.text


def test_websocket_dotted_set_runs_a_workload(client: TestClient) -> None:
    with client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": "decode-pulses",
                      "set": {"workload.num_requests": 3, "workload.input_len": 64, "workload.output_len": 4}})
        msg = ws.receive_json()
    assert msg["type"] == "loaded" and msg["num_events"] > 0
    assert msg["scenario"]["workload"]["num_requests"] == 3
    assert msg["scenario"]["workload"]["request_rate"] == "Infinity"  # inf as JSON carries it (and parses back)


@pytest.mark.parametrize(
    ("over", "field", "words"),
    [
        ({"workload.num_requests": 3000, "workload.output_len": 1000, "workload.max_concurrency": 10},
         "set.workload.num_requests", "engine steps"),
        ({"workload.num_requests": 1, "workload.output_len": 5000}, "set.workload.output_len", "engine steps"),
        ({"workload.trace": "/etc/passwd"}, "set.workload.trace", "opens no file a client names"),
        ({"workload.max_concurency": 3}, "set.workload.max_concurency", "unknown field"),
        ({"scheduler.max_num_seqs": 0}, "set.scheduler.max_num_seqs", "greater than or equal to 1"),
    ],
)
def test_websocket_workloads_are_bounded_naming_the_field(
    client: TestClient, over: dict[str, Any], field: str, words: str
) -> None:
    err = answer_then_probe(client, {"type": "load", "scenario": "decode-pulses", "set": over})
    assert err["type"] == "error" and words in err["message"], err
    assert err["field"] == field
