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


# -- workload and scheduler: nested fields, dotted overrides ----------------------------------------------------
def test_dotted_set_reaches_nested_fields() -> None:
    over = parse_set(["workload.max_concurrency=16", "scheduler.max_num_batched_tokens=2048",
                      "workload.num_requests=5"])
    assert over == {"workload.max_concurrency": 16, "scheduler.max_num_batched_tokens": 2048,
                    "workload.num_requests": 5}
    spec = apply_overrides(ScenarioSpec(), over)
    assert spec.workload is not None and spec.workload.max_concurrency == 16 and spec.workload.num_requests == 5
    assert spec.workload.input_len == 1024  # the rest of a workload created by a dotted key keeps its defaults
    assert spec.scheduler.max_num_batched_tokens == 2048 and spec.scheduler.max_num_seqs is None
    assert spec.scheduler_limits.max_num_seqs == 1024  # the rest of the scheduler: vLLM's default on an H100


@pytest.mark.parametrize(
    ("assignment", "needle"),
    [
        ("workload.max_concurency=4", "unknown field 'workload.max_concurency'"),
        ("workloads.num_requests=4", "unknown field 'workloads.num_requests'"),
        ("chunk_size.x=4", "unknown field 'chunk_size.x'"),
    ],
)
def test_dotted_set_refuses_unknown_nested_fields(assignment: str, needle: str) -> None:
    with pytest.raises(ScenarioError, match=needle):
        parse_set([assignment])


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"workload.num_requests": 10_001}, "workload.num_requests"),
        ({"workload.max_concurrency": 0}, "workload.max_concurrency"),
        ({"workload.request_rate": -1}, "workload.request_rate"),
        ({"scheduler.max_num_seqs": 0}, "scheduler.max_num_seqs"),
    ],
)
def test_bad_nested_values_are_named(over: dict, field: str) -> None:
    with pytest.raises(ScenarioError) as err:
        apply_overrides(ScenarioSpec(), over)
    assert f"field '{field}'" in str(err.value)


def test_workload_tokens_are_bounded() -> None:
    with pytest.raises(ScenarioError, match="field .workload.: .*1000100000 tokens; the limit is 20000000"):
        parse_spec({"workload": {"num_requests": 10_000, "input_len": 100_000, "output_len": 10}}, "")


def test_compare_accepts_dotted_keys_and_names_bad_ones() -> None:
    spec = parse_spec({"compare": {"label": "small budget", "set": {"scheduler.max_num_batched_tokens": 512}}})
    assert spec.compare is not None
    with pytest.raises(ScenarioError, match="scheduler.max_num_batched_tokens"):
        parse_spec({"compare": {"label": "x", "set": {"scheduler.max_num_batched_tokens": 1}}})


def test_request_rate_inf_survives_json() -> None:
    spec = ScenarioSpec.model_validate({"workload": {"num_requests": 3}})
    again = ScenarioSpec.model_validate_json(spec.model_dump_json())
    assert again == spec and again.workload is not None and again.workload.request_rate == float("inf")
