"""The scenario spec: unknown keys, wrong types and out-of-range values are refused, naming the field."""

from __future__ import annotations

import pytest

from layerscope import scenario
from layerscope.scenario import MAX_PAGES, ScenarioError, ScenarioSpec, apply_overrides, parse_set, parse_spec


def test_defaults_validate_and_page_size_follows_runtime() -> None:
    spec = ScenarioSpec()
    assert spec.effective_page_size == 16  # vllm
    assert spec.with_overrides({"runtime": "article"}).effective_page_size == 256


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"prompt_lenn": 5}, "prompt_lenn"),
        ({"prompt_len": "many"}, "prompt_len"),
        ({"prompt_len": 0}, "prompt_len"),
        ({"prompt_len": 10**9}, "prompt_len"),
        ({"decode_steps": -1}, "decode_steps"),
        ({"gpu": "tpu-v5"}, "gpu"),
        ({"model": "gpt-5"}, "model"),
        ({"name": "../../etc/passwd"}, "name"),
        ({"faults": [{"kind": "cosmic_rays"}]}, "faults.0.kind"),
        ({"faults": [{"kind": "ecc_bitflips", "rate": 2}]}, "faults.0.rate"),
        ({"tour": [{"title": "t", "text": "x", "check": {"metric": "m", "op": "~", "value": 1}}]}, "tour.0.check.op"),
    ],
)
def test_bad_fields_are_named(data: dict, field: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_spec(data, "x.yaml")
    assert str(err.value).startswith(f"x.yaml: field '{field}'")


def test_page_count_is_bounded() -> None:
    with pytest.raises(ScenarioError, match="KV pages"):
        parse_spec({"prompt_len": 262_144, "page_size": 2, "runtime": "vllm"})
    ok = parse_spec({"prompt_len": 262_144, "page_size": 16})
    assert -(-ok.prompt_len // ok.effective_page_size) <= MAX_PAGES


def test_set_parses_yaml_scalars_and_rejects_unknown_fields() -> None:
    assert parse_set(["prompt_len=1024", "decode_page_hint=true", "gpu=h200"]) == {
        "prompt_len": 1024, "decode_page_hint": True, "gpu": "h200"}
    with pytest.raises(ScenarioError, match="unknown field 'bogus'"):
        parse_set(["bogus=1"])
    with pytest.raises(ScenarioError, match="expected key=value"):
        parse_set(["prompt_len"])
    with pytest.raises(ScenarioError, match="field 'chunk_size'"):
        apply_overrides(ScenarioSpec(), {"chunk_size": 3})


@pytest.mark.parametrize("name", ["../scenarios/x", "/etc/passwd", "..", "a/b", "UPPER"])
def test_preset_names_cannot_reach_outside_scenarios(name: str) -> None:
    with pytest.raises(ScenarioError, match="unknown scenario"):
        scenario.load_preset(name)


def test_bad_yaml_file_names_the_file(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("prompt_len: [1, 2\n")
    with pytest.raises(ScenarioError, match=r"bad\.yaml: not valid YAML"):
        scenario.load_file(bad)
    bad.write_text("chunk_size: 1\n")
    with pytest.raises(ScenarioError, match=r"bad\.yaml: field 'chunk_size'.*greater than or equal to 16"):
        scenario.load_file(bad)
