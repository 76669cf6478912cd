"""The loop: instances stepped in time order, the client's requests routed to them, idle ones woken."""

from __future__ import annotations

from typing import Any

import numpy as np

from layerscope.runtime.engine import simulate
from layerscope.runtime.instance import Instance
from layerscope.runtime.loop import Client, Loop
from layerscope.runtime.metrics import serving_metrics
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.request import Request
from layerscope.runtime.serving import ServingInstance
from layerscope.runtime.workload import make_requests
from layerscope.scenario import ScenarioSpec


class _Ticker(Instance):
    """An instance whose every step lasts `step_us` and finishes one request (no engine behind it)."""

    def __init__(self, name: int, step_us: float, log: list[tuple[float, int]]) -> None:
        self.name, self.step_us, self.log = name, step_us, log
        self.queue: list[Request] = []

    def has_work(self) -> bool:
        return bool(self.queue)

    def receive(self, req: Request, t: float) -> None:
        self.queue.append(req)

    def step(self, t: float) -> tuple[float, int]:
        self.log.append((t, self.name))
        self.queue.pop(0)
        return t + self.step_us, 1

    def num_unfinished(self) -> int:
        return len(self.queue)


def _requests(arrivals: list[float]) -> list[Request]:
    return [Request(i, a, 1, 1, np.zeros(2, dtype=np.int32)) for i, a in enumerate(arrivals)]


def test_two_instances_step_in_time_order_and_an_idle_one_wakes_for_its_request() -> None:
    log: list[tuple[float, int]] = []
    fast, slow = _Ticker(0, 1.0, log), _Ticker(1, 2.5, log)
    reqs = _requests([0.0, 0.0, 0.0, 0.0, 10.0])
    Loop([fast, slow], Client(reqs, None), route=lambda r: r.request_id % 2).run()
    assert log == [(0.0, 0), (0.0, 1), (1.0, 0), (2.5, 1), (10.0, 0)]  # every step in time order, both clocks
    assert [t for t, _ in log] == sorted(t for t, _ in log)


def test_max_concurrency_holds_a_request_until_a_slot_frees() -> None:
    log: list[tuple[float, int]] = []
    only = _Ticker(0, 3.0, log)
    Loop([only], Client(_requests([0.0, 0.0, 0.0]), max_concurrency=1)).run()
    assert log == [(0.0, 0), (3.0, 0), (6.0, 0)]


def _serving_spec() -> ScenarioSpec:
    return ScenarioSpec.model_validate({"model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h200",
                                        "free_hbm_gib": 20.0, "workload": {"num_requests": 12, "input_len": 200,
                                                                           "output_len": 8, "request_rate": 200.0}})


INSTANCE_KINDS = {"step", "kernel", "request", "page_alloc", "page_free", "page_evict", "page_migrate"}


def test_a_second_serving_instance_is_a_few_lines_and_serves_its_share() -> None:
    spec = _serving_spec()
    assert spec.workload is not None
    events: list[Any] = []
    instances = [ServingInstance(spec, Recorder(events, instance=i)) for i in range(2)]
    requests = make_requests(spec.workload, instances[0].model.vocab_size)
    for inst in instances:
        inst.expect(requests)
    Loop(instances, Client(requests, None), route=lambda r: r.request_id % 2, events=events).run()
    events.sort(key=lambda e: e.t_us)
    for i in range(2):
        steps = [e for e in events if e.kind == "step" and e.instance == i]
        assert steps and all(rid % 2 == i for s in steps for rid in s.request_ids)  # only its own requests
        assert [s.start_us for s in steps] == sorted(s.start_us for s in steps)
        assert [s.index for s in steps] == list(range(len(steps)))  # each instance counts its own steps
    assert all(e.request_id % 2 == e.instance for e in events if e.kind == "request")
    assert {e.instance for e in events if e.kind in INSTANCE_KINDS} == {0, 1}
    assert {e.instance for e in events if e.kind == "kernel"} == {0, 1}
    finished = sorted(e.request_id for e in events if e.kind == "request" and e.what == "finished")
    assert finished == list(range(12))
    # two engines share the load: the last request ends no later than on one engine
    assert serving_metrics(events)["duration"] <= simulate(spec).summary["duration"]


def test_a_one_instance_run_says_instance_0_and_its_kernels_rank_0() -> None:
    served = simulate(_serving_spec())
    one = simulate(ScenarioSpec.model_validate({"model": "qwen3-30b-a3b", "prompt_len": 300, "decode_steps": 3,
                                                "gpu": "h200"}))
    for r in (served, one):
        marked = [e for e in r.events if hasattr(e, "instance")]
        assert {e.kind for e in marked} >= {"kernel", "page_alloc"}
        assert {e.instance for e in marked} == {0}
        assert {e.rank for e in r.events if e.kind == "kernel"} == {0}
    assert {e.kind for e in served.events if hasattr(e, "instance")} >= {"step", "request", "kernel", "page_alloc"}
    assert {e.kind for e in one.events if hasattr(e, "instance")} >= {"chunk", "decode_step", "kernel"}
