"""loaded.overview: the whole run and its compare run as column tables, for the dashboard's first screen."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakesim import rows

from layerscope import scenario as scn
from layerscope.runtime.engine import simulate
from layerscope.scenario import main_label
from layerscope.server.overview import FIELDS, SHARED, column_table, overview
from layerscope.server.runs import prepare


@pytest.fixture(scope="module")
def pair() -> Any:
    return simulate(scn.load_preset("chunk-size-sweep-numa"))


def test_overview_holds_both_runs_with_every_kernel(pair: Any) -> None:
    ov = overview(pair, 94)
    assert ov["num_layers"] == 94 and [r["role"] for r in ov["runs"]] == ["main", "compare"]
    main, cmp = ov["runs"]
    assert main["label"] == "chunk_size=2048" and cmp["label"] == "8192-token chunks"
    for run, result in ((main, pair), (cmp, pair.compare)):
        kernels = [e for e in result.events if e.kind == "kernel"]
        got = rows(run["tables"]["kernel"])
        assert [k["name"] for k in got] == [k.name for k in kernels]
        assert [k["start_us"] for k in got] == [k.start_us for k in kernels]  # times stay exact
        assert run["summary"]["num_chunks"] == result.summary["num_chunks"]
    assert len(rows(main["tables"]["chunk"])) == 8 and len(rows(cmp["tables"]["chunk"])) == 2


def test_repeated_strings_travel_once(pair: Any) -> None:
    table = overview(pair, 94)["runs"][0]["tables"]["kernel"]
    assert "name" in table["dict"] and len(table["dict"]["name"]) < len(table["rows"])
    shared = table["shared"]
    assert all(isinstance(r[shared["cols"].index("name")], int) for r in shared["rows"])


def test_a_priced_launch_travels_once_and_decodes_to_every_field(pair: Any) -> None:
    """The kernel table's shared rows: each distinct tuple of a launch's priced fields once, fewer of them than
    launches; decoded, the same rows as a table that shares nothing."""
    kernels = [e for e in pair.events if e.kind == "kernel"]
    table = column_table(kernels, FIELDS["kernel"], SHARED["kernel"])
    shared = table["shared"]
    assert shared["cols"] == list(SHARED["kernel"]) and "start_us" not in shared["cols"]
    assert len(shared["rows"]) < len(table["rows"])
    assert len({json.dumps(r) for r in shared["rows"]}) == len(shared["rows"])
    assert all(len(r) == len(FIELDS["kernel"]) - len(shared["cols"]) + 1 for r in table["rows"])
    assert rows(table) == rows(column_table(kernels, FIELDS["kernel"]))
    assert list(rows(table)[0]) == list(FIELDS["kernel"])  # the fields in their order


def test_a_column_of_lists_is_never_shared(pair: Any) -> None:
    pages = [e for e in pair.events if e.kind == "page_alloc"]
    table = column_table(pages, FIELDS["page_alloc"], ("owner", "phase", "banks"))
    assert table["shared"]["cols"] == ["owner", "phase"]  # banks are lists: each row keeps its own
    assert rows(table) == rows(column_table(pages, FIELDS["page_alloc"]))


def test_overview_is_json_and_deterministic(pair: Any) -> None:
    again = simulate(scn.load_preset("chunk-size-sweep-numa"))
    assert json.dumps(overview(pair, 94)) == json.dumps(overview(again, 94))


def test_prepared_run_carries_overview_and_compare_claims(pair: Any) -> None:
    run = prepare(pair)
    assert run.overview is not None and len(run.overview["runs"]) == 2
    assert run.compare is not None and {c["id"] for c in run.compare["claims"]} >= {"prefill_layer"}
    single = prepare(simulate(scn.load_preset("prefill-8k-chunked")))
    assert single.overview is not None and [r["role"] for r in single.overview["runs"]] == ["main"]
    assert main_label(single.spec) == "prefill-8k-chunked"


def test_fields_exist_on_the_event_models() -> None:
    from layerscope import events

    models = {
        m.model_fields["kind"].default: m
        for m in vars(events).values()
        if isinstance(m, type) and hasattr(m, "model_fields") and "kind" in m.model_fields
    }
    for kind, cols in FIELDS.items():
        missing = [c for c in cols if c not in models[kind].model_fields and c != "scope"]  # scope: newer engines
        assert missing == [], (kind, missing)


def test_loaded_message_is_strict_json_with_an_infinite_request_rate() -> None:
    from layerscope.server.session import encode_message, loaded_message

    run = prepare(simulate(scn.load_preset("serving-kv-preemption")))  # workload.request_rate: inf
    assert run.spec.workload is not None and run.spec.workload.request_rate == float("inf")
    msg = json.loads(encode_message(loaded_message(run)), parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    assert msg["scenario"]["workload"]["request_rate"] == "Infinity"


def test_a_compare_set_with_dotted_fields_labels_the_main_run() -> None:
    spec = scn.load_preset("serving-64-h200-tp8")
    assert spec.compare is not None and any("." in k for k in spec.compare.set)
    label = main_label(spec)
    assert all(f"{k}=" in label for k in spec.compare.set) and "None" not in label


def test_page_rows_carry_the_request_and_steps_are_kept() -> None:
    """The bank map colours pages by request and the timeline marks engine steps from the overview."""
    spec = scn.load_preset("serving-long-prompt-itl").model_copy(update={"compare": None})
    spec = scn.apply_overrides(spec, {"workload.num_requests": 3, "workload.input_len": 200, "workload.output_len": 4})
    ov = overview(simulate(spec), 94)
    tables = ov["runs"][0]["tables"]
    assert {r["request_id"] for r in rows(tables["page_alloc"])} == {0, 1, 2}
    steps = rows(tables["step"])
    assert steps and all(s["num_seqs"] >= 1 and s["model_dur_us"] > s["dur_us"] for s in steps)


def small_serving() -> Any:
    spec = scn.load_preset("serving-long-prompt-itl").model_copy(update={"compare": None})
    small = {"workload.num_requests": 3, "workload.input_len": 200, "workload.output_len": 4}
    return simulate(scn.apply_overrides(spec, small))


def test_a_serving_run_says_its_clock_is_the_whole_model_and_carries_its_requests_in_order(pair: Any) -> None:
    """The shared axis reads the clock's scope; the serving views replay requests and steps in the run's order."""
    result = small_serving()
    (run,) = overview(result, 94)["runs"]
    assert run["clock"] == "model" and {r["clock"] for r in overview(pair, 94)["runs"]} == {"layer"}
    reqs = rows(run["tables"]["request"])
    assert [(r["request_id"], r["what"]) for r in reqs] == [
        (e.request_id, e.what) for e in result.events if e.kind == "request"
    ]
    steps = rows(run["tables"]["step"])
    events = [e for e in result.events if e.kind == "step"]
    assert [s["request_ids"] for s in steps] == [e.request_ids for e in events]
    assert [s["num_tokens"] for s in steps] == [e.num_tokens for e in events]
    # "seq" is each event's index in the run: the request and step tables interleave back to the run's order
    merged = sorted([(r["seq"], "request") for r in reqs] + [(s["seq"], "step") for s in steps])
    assert [k for _, k in merged] == [e.kind for e in result.events if e.kind in ("request", "step")]


def test_page_request_and_step_events_travel_in_the_overview_only() -> None:
    """The bank map reads page events, and the serving views request and step events, from the overview, so
    frames do not carry them again."""
    result = small_serving()
    run = prepare(result)
    kinds = {e["kind"] for e in run.events}
    assert not kinds & {"page_alloc", "page_free", "page_migrate", "page_evict", "request", "step"}
    assert run.num_events == len(result.events) > len(run.events)
    assert {"kernel", "banks"} <= kinds
    tables = run.overview["runs"][0]["tables"]
    for kind in ("page_alloc", "request", "step"):
        n = sum(1 for e in result.events if e.kind == kind)
        assert n > 0 and len(rows(tables[kind])) == n, kind
    assert run.duration_us == max(e.t_us + (e.dur_us if e.kind == "kernel" else 0.0) for e in result.events)


def test_the_deployment_travels_with_its_per_gpu_figures() -> None:
    """The deployment card draws the plan before play, from the overview."""
    ov = overview(simulate(scn.load_preset("real-qwen3-235b-h200")), 94)
    json.dumps(ov)  # plain JSON all the way down
    (dep,) = rows(ov["runs"][0]["tables"]["deployment"])
    assert dep["tp"] == 8 and dep["gpu"] == "h200" and dep["per_gpu"]["kv_tokens"] > 0
    assert dep["per_gpu"]["weights_gib"] < dep["per_gpu"]["capacity_gib"]
