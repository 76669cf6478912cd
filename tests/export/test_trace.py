import json

from layerscope.export.trace import to_json, to_perfetto
from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec


def _result():  # noqa: ANN202
    spec = ScenarioSpec(model="qwen3-235b-a22b", runtime="vllm", prompt_len=8192, decode_steps=40, fragmentation=0.3,
                        numerics=True, faults=[{"kind": "ecc_bitflips", "at_step": 3, "count": 8}])
    return simulate(spec)


def test_a_comparison_traces_both_runs_as_processes_a_and_b() -> None:
    spec = ScenarioSpec(model="article", runtime="article", prompt_len=1024, decode_steps=6, chunk_size=512,
                        compare={"label": "naive allocator", "set": {"allocator": "naive"}})
    r = simulate(spec)
    assert r.compare is not None
    events = json.loads(to_json(r))["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(names) == [1, 2]
    assert names[1].startswith("A: custom") and names[2].startswith("B: naive allocator")
    for pid, run in ((1, r), (2, r.compare)):  # each run's every kernel, on its own process
        kernels = [e for e in events if e["ph"] == "X" and e["pid"] == pid]
        assert len(kernels) == sum(1 for e in run.events if e.kind == "kernel") > 0
        assert {e["name"] for e in events if e["ph"] == "C" and e["pid"] == pid} >= {"HBM used (GiB)"}
    single = json.loads(to_json(simulate(spec.model_copy(update={"compare": None}))))["traceEvents"]
    assert {e["pid"] for e in single} == {1}


def test_trace_is_valid_chrome_json_with_tracks_counters_and_instants() -> None:
    r = _result()
    data = json.loads(to_json(r))  # strict JSON: no NaN/Infinity literals
    events = data["traceEvents"]
    by_ph: dict[str, list] = {}
    for e in events:
        assert {"ph", "name", "pid", "tid"} <= set(e)
        by_ph.setdefault(e["ph"], []).append(e)
    for e in by_ph["X"]:
        assert isinstance(e["ts"], float | int) and e["dur"] >= 0 and e["ts"] >= 0
    kernels = [e for e in r.events if e.kind == "kernel"]
    assert len(by_ph["X"]) == len(kernels)
    names = {e["tid"]: e["args"]["name"] for e in by_ph["M"] if e["name"] == "thread_name"}
    assert {"compute", "copy", "events"} <= set(names.values())  # one track per stream, plus instants
    streams = {e.stream for e in kernels}
    for s in streams:  # every kernel sits on its stream's track
        tid = next(t for t, n in names.items() if n == s)
        assert sum(1 for e in by_ph["X"] if e["tid"] == tid) == sum(1 for k in kernels if k.stream == s)
    counters = {e["name"] for e in by_ph["C"]}
    assert counters == {"HBM used (GiB)", "bank occupancy (pages)", "decode step latency (us)"}
    instants = {e["cat"] for e in by_ph["i"]}
    assert {"fault", "page_migrate", "phase", "chunk"} <= instants
    assert any(e["name"] == "process_name" for e in by_ph["M"])


def test_trace_dict_matches_the_json() -> None:
    r = simulate(ScenarioSpec(model="article", runtime="article", prompt_len=512, decode_steps=4))
    assert json.loads(to_json(r))["traceEvents"] == json.loads(json.dumps(to_perfetto(r)))["traceEvents"]


def test_trace_args_say_where_each_kernel_price_comes_from() -> None:
    r = simulate(ScenarioSpec(model="qwen3-235b-a22b", runtime="vllm", gpu="h200", prompt_len=1024, decode_steps=2))
    slices = [e for e in to_perfetto(r)["traceEvents"] if e["ph"] == "X"]
    assert {e["args"]["source"] for e in slices} == {"measured", "analytic"}
    measured = [e for e in slices if e["args"]["source"] == "measured"]
    assert all("h200_sxm" in e["args"]["table"] for e in measured)
    assert all("table" not in e["args"] for e in slices if e["args"]["source"] == "analytic")


def test_a_data_parallel_run_traces_each_gpu_as_its_own_lane_group() -> None:
    spec = ScenarioSpec.model_validate({"name": "dp", "model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h100-sxm",
                                        "deployment": {"dp": 2},
                                        "workload": {"num_requests": 2, "input_len": 64, "output_len": 4}})
    trace = to_perfetto(simulate(spec))
    names = [e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"]
    assert names[:2] == ["GPU 0 · compute", "GPU 0 · comm"] and "GPU 1 · comm" in names
    comm1 = next(e["tid"] for e in trace["traceEvents"] if e.get("name") == "thread_name"
                 and e["args"]["name"] == "GPU 1 · comm")
    a2a = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["tid"] == comm1]
    assert a2a and {e["args"]["stage"] for e in a2a} <= {"ep_dispatch", "ep_combine"}
