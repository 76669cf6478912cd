"""Timing: kernels laid on streams, and the kernel events it makes equal validated ones byte for byte."""

from __future__ import annotations

from typing import Any

from layerscope.events import KernelEvent, event_json, parse_event
from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import gpu
from layerscope.model.config import PRESETS
from layerscope.runtime.kernels import Kernel
from layerscope.runtime.timing import COPY, Timing
from layerscope.runtime.vllm import VllmRuntime


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
