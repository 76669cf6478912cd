import json

import pytest

from layerscope.cli import main

VERDICTS = {"consistent", "off", "not-exercised", "not-stated", "input", "setting"}


def test_claims_json_is_a_list_of_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["claims", "chunk-adapt-low-memory", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list) and rows
    for r in rows:
        assert {"id", "claim", "stated", "simulated", "unit", "verdict", "setting", "explanation"} <= set(r)
        assert r["verdict"] in VERDICTS and r["setting"]
    by = {r["id"]: r for r in rows}
    assert by["attention_launches"]["verdict"] == "consistent"  # 4096 then 2048: 7 launches, as the rule says
    assert by["first_step_overhead"]["verdict"] == "input"
    assert "a100-80g-sxm" in by["prefill_layer"]["setting"]  # the 42 ms claim is judged in the article's setting


def test_claims_set_overrides_the_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["claims", "decode-pulses", "--json", "--set", "page_size=64"]) == 0
    page = next(r for r in json.loads(capsys.readouterr().out) if r["id"] == "page_size")
    assert page["verdict"] == "setting" and page["setting"] == "this scenario uses 64-token pages"


def test_claims_table_names_the_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["claims", "decode-pulses"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("decode-pulses: ")
    assert "stated" in out and "simulated" in out and "this run" in out
    assert "the article's setting (probe run)" in out and "this scenario uses 32-token pages" in out


@pytest.mark.parametrize("argv", [["claims", "no-such-preset"], ["claims", "decode-pulses", "--set", "bogus=1"]])
def test_claims_bad_input_is_one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err
