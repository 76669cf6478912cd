"""Runs of one deployment share its plan (runtime/shared_plans.py), and a shared plan changes no event."""

from __future__ import annotations

from typing import Any

from layerscope.events import event_json
from layerscope.runtime import shared_plans
from layerscope.runtime.engine import simulate
from layerscope.runtime.shared_plans import shared_deployed
from layerscope.scenario import ScenarioSpec


def _spec(deployment: dict[str, Any], **workload: Any) -> ScenarioSpec:
    w = {"num_requests": 12, "input_len": 300, "output_len": 40, "max_concurrency": 6, "seed": 1, **workload}
    return ScenarioSpec.model_validate({"model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h100-sxm",
                                        "deployment": deployment, "workload": w})


def _events(spec: ScenarioSpec) -> list[str]:
    return [event_json(e) for e in simulate(spec).events]


def test_one_plan_per_deployment_and_its_events_are_a_fresh_plans() -> None:
    tp2 = _spec({"tp": 2})
    shared_plans._plans.clear()
    fresh = _events(tp2)  # the first run makes the plan and fills its memos
    assert shared_deployed(tp2)[0] is shared_deployed(_spec({"tp": 2}, max_concurrency=3))[0]  # scheduler: same plan
    assert shared_deployed(tp2)[0] is not shared_deployed(_spec({"tp": 4}))[0]
    assert _events(tp2) == fresh  # the second run starts from the first one's memos: the same events, byte for byte
    other = _events(_spec({"tp": 2}, seed=2))  # another seed: another routing draw, so another plan
    shared_plans._plans.clear()
    assert _events(_spec({"tp": 2}, seed=2)) == other


def test_data_parallel_ranks_and_file_routing_get_their_own_plans() -> None:
    dp = _spec({"dp": 2})
    assert shared_deployed(dp)[0] is not shared_deployed(dp)[0]
    assert shared_plans._key(dp) is None
    assert shared_plans._key(_spec({"tp": 2}, routing="file:counts.json")) is None


def test_vllms_plan_without_a_deployment_is_shared_the_articles_is_not() -> None:
    one = ScenarioSpec.model_validate({"model": "qwen3-30b-a3b", "runtime": "vllm", "gpu": "h100-sxm",
                                       "prompt_len": 256, "decode_steps": 4})
    assert shared_deployed(one)[0] is shared_deployed(one)[0]
    article = ScenarioSpec.model_validate({"model": "article", "runtime": "article", "gpu": "h100-sxm",
                                           "prompt_len": 256, "decode_steps": 4})
    assert shared_deployed(article)[0] is not shared_deployed(article)[0]
