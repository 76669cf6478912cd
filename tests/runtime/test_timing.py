"""Timing: kernels laid on streams, and the kernel events it makes equal validated ones byte for byte."""

from __future__ import annotations

from typing import Any

from layerscope.events import KernelEvent, event_json, parse_event
from layerscope.hardware import cost as cost_mod
from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import gpu
from layerscope.hardware.kernel import CostEnv, Kernel
from layerscope.model.config import PRESETS
from layerscope.runtime import shared_plans, timing
from layerscope.runtime.engine import simulate
from layerscope.runtime.timing import COPY, Timing
from layerscope.runtime.vllm import VllmRuntime
from layerscope.scenario import ScenarioSpec


def test_kernel_events_are_the_validated_events() -> None:
    events: list[Any] = []
    timing = Timing(CostModel(gpu("h200")), events.append)
    kernels = VllmRuntime().step_kernels(PRESETS["qwen3-235b-a22b"], [(300, 0), (1, 900), (1, 40)])
    end = timing.launch(kernels, 10.0, "prefill", step=3)
    assert len(events) == len(kernels) and events[0].t_us == 10.0
    for e in events:
        again = KernelEvent.model_validate(e.model_dump())
        assert again == e and event_json(again) == event_json(e) == event_json(parse_event(e.model_dump()))
    assert end == events[-1].start_us + events[-1].dur_us  # compute kernels follow each other


def test_copy_kernels_run_beside_compute() -> None:
    events: list[Any] = []
    timing = Timing(CostModel(gpu("h200")), events.append)
    copy = Kernel("kv_page_migrate", "kv_migrate", "memory", 0.0, 1e9, stream=COPY)
    work = Kernel("rms_norm_kernel", "input_norm", "norm", 1e6, 1e6)
    end = timing.launch([copy, work], 0.0, "decode")
    assert events[1].start_us == 0.0  # the norm did not wait for the copy
    assert end == events[0].dur_us > events[1].dur_us
    start = timing.copy(timing.cost(copy), 0.0, "decode")
    assert start == events[0].dur_us  # the copy engine was busy until then
    assert timing.cost(work) is timing.cost(work)  # memoised


def test_kernel_events_say_where_their_price_comes_from() -> None:
    events: list[Any] = []
    timing = Timing(CostModel(gpu("h200")), events.append)
    timing.launch(VllmRuntime().prefill_chunk(PRESETS["qwen3-235b-a22b"], 1024, 0), 0.0, "prefill")
    by_stage = {e.stage: e for e in events}
    assert by_stage["qkv_proj"].source == "measured"
    assert by_stage["qkv_proj"].table.startswith(
        "h200_sxm · vllm 0.24.0 · aiconfigurator_core/systems/data/h200_sxm/gemm/")
    assert by_stage["input_norm"].source == "analytic" and by_stage["input_norm"].table == ""
    events.clear()
    Timing(CostModel(gpu("h200"), measured=False), events.append).launch(
        VllmRuntime().prefill_chunk(PRESETS["qwen3-235b-a22b"], 1024, 0), 0.0, "prefill")
    assert {e.source for e in events} == {"analytic"}


def test_serving_runs_on_a_gpu_share_its_prices_and_give_the_same_summary(monkeypatch: Any) -> None:
    spec = ScenarioSpec.model_validate({
        "name": "shared-prices", "model": "qwen3-235b-a22b", "runtime": "vllm", "gpu": "h200",
        "deployment": {"tp": 8},
        "workload": {"num_requests": 8, "input_len": 64, "output_len": 8, "range_ratio": 1.0, "seed": 0}})
    monkeypatch.setattr(timing, "_shared_costs", {})
    monkeypatch.setattr(shared_plans, "_key", lambda spec: None)  # a fresh plan each run: the prices alone shared
    first = simulate(spec, summary_only=True).summary
    priced = len(timing._shared_costs[gpu("h200")])
    assert priced > 0
    calls = []
    real = cost_mod.CostModel.cost
    monkeypatch.setattr(cost_mod.CostModel, "cost", lambda self, k, env=cost_mod.DEFAULT_ENV: calls.append(k)
                        or real(self, k, env))
    assert simulate(spec, summary_only=True).summary == first
    shared = len(calls)  # the plan's own set-up prices (not the engine's Timing) are all that is priced again
    assert len(timing._shared_costs[gpu("h200")]) == priced
    calls.clear()
    monkeypatch.setattr(timing, "_shared_costs", {})
    assert simulate(spec, summary_only=True).summary == first
    assert len(calls) == shared + priced  # a run without the memo prices every one of them again


def test_the_shared_price_memo_starts_afresh_past_its_bound(monkeypatch: Any) -> None:
    g = gpu("h200")
    monkeypatch.setattr(timing, "_shared_costs", {})
    monkeypatch.setattr(timing, "SHARED_COSTS_MAX", 2)
    model, costs = timing.default_costs(g)
    k = Kernel("k", "stage", "elementwise", 1.0, 1.0)
    for i in range(3):
        costs[(Kernel(f"k{i}", "stage", "elementwise", 1.0, 1.0), timing.PLAIN_ENV)] = model.cost(k)
    assert isinstance(model, CostModel) and timing.default_costs(g)[1] == {}
    assert timing.default_costs(g)[1] is costs  # the same memo, emptied


def test_the_default_envs_prices_are_keyed_by_the_kernel_and_others_by_kernel_and_env() -> None:
    """Timing's memo holds a default-env price under the kernel alone and any other env's under (kernel, env): each
    priced once, each the cost model's own price, an env equal to the default but another object as well."""
    model = CostModel(gpu("h200"))
    ks = VllmRuntime().prefill_chunk(PRESETS["qwen3-235b-a22b"], 64, 128)
    t = Timing(model, None)
    envs = (timing.PLAIN_ENV, CostEnv(), CostEnv(hbm_bw_scale=0.5), CostEnv(l2_warm=False, extra_us=2.0))
    for env in envs:
        for k in ks:
            fresh = k.evolve()  # an equal kernel, another object: the memo's hit
            assert t._cost(k, env) == model.cost(k, env) and t._cost(fresh, env) is t._cost(k, env)
    assert all(t._costs[k] == model.cost(k) for k in ks)
    assert all(t._costs[(k, env)] == model.cost(k, env) for k in ks for env in envs[1:])
    assert len(t._costs) == len(set(ks)) * len(envs)
