"""ShardedRuntime.with_collectives works out where its all-reduces go once per (model, tokens, stages): the memoised
step kernels must equal the plain build (the insertion walk over every kernel, as before the memo), for TP plans,
SGLang's, a dense model's and a DP rank's (whose override of with_collectives depends on the group's step)."""

from __future__ import annotations

import pytest

from layerscope.deployment import DeploymentSpec, shard
from layerscope.hardware.gpus import gpu
from layerscope.hardware.kernel import Kernel
from layerscope.model.config import PRESETS, ModelConfig
from layerscope.runtime.dp_plan import DPRankPlan, GroupStep
from layerscope.runtime.sharded import REDUCED_AFTER, ShardedRuntime
from layerscope.runtime.vllm import VllmRuntime

BATCHES: list[list[tuple[int, int]]] = [
    [(1, 100)],
    [(1, c) for c in range(10, 110)],  # decodes only
    [(500, 0)],  # one prompt
    [(300, 0), (200, 40), *[(1, c) for c in range(5, 60)]],  # mixed: varlen prefill and decodes
    [(2048, 0), (1, 7)],  # past the largest CUDA graph: eager launches
    [(1, 0)],  # a one-token prompt
]


def _plain_collectives(plan: ShardedRuntime, model: ModelConfig, kernels: list[Kernel], tokens: int) -> list[Kernel]:
    """The walk with_collectives did before its memo: after the last kernel of each reduced stage, its all-reduce."""
    if plan.dep.tp == 1:
        return kernels
    out = list(kernels)
    last = {k.stage: i for i, k in enumerate(kernels)}
    for i, stage in sorted(((last[s], r) for s, r in REDUCED_AFTER.items() if s in last), reverse=True):
        out.insert(i + 1, plan._all_reduce_kernel(model, tokens, stage))
    return out


def _plain_step(plan: ShardedRuntime, model: ModelConfig, batch: list[tuple[int, int]]) -> list[Kernel]:
    ks = plan.base.step_kernels(model, batch, plan.dep.weight_dtype)
    tokens = sum(n for n, _ in batch)
    prefill = tokens > len(batch) or any(c == 0 for _, c in batch)
    eager = prefill and plan.dep.engine == "sglang"
    padded = plan.padded_tokens(tokens, eager)  # the graph's all-reduces run the padded rows
    return plan.launch_floors(_plain_collectives(plan, model, ks, padded), tokens, eager)


@pytest.mark.parametrize("model_name", ["qwen3-235b-a22b", "qwen3-30b-a3b", "small"])
@pytest.mark.parametrize("dep", [DeploymentSpec(tp=8), DeploymentSpec(tp=4, engine="sglang"),
                                 DeploymentSpec(tp=2, cuda_graphs=False), DeploymentSpec(tp=1)])
def test_memoised_step_kernels_equal_the_plain_build(model_name: str, dep: DeploymentSpec) -> None:
    full = PRESETS[model_name]
    model = shard(full, dep)
    plan = ShardedRuntime(VllmRuntime(), dep, gpu("h200"), full)
    for _ in range(2):  # the second pass reads the memo
        for batch in BATCHES:
            assert plan.step_kernels(model, batch) == _plain_step(plan, model, batch)


def test_with_collectives_follows_the_stages_of_any_list() -> None:
    """Lists with the same stages share a layout; a list with the stages in another order gets its own."""
    dep = DeploymentSpec(tp=8)
    full = PRESETS["qwen3-235b-a22b"]
    model = shard(full, dep)
    plan = ShardedRuntime(VllmRuntime(), dep, gpu("h200"), full)
    ks = plan.base.step_kernels(model, [(1, 300), (1, 20)])
    for kernels in (ks, ks[::-1], ks[3:], ks[:5], [k for k in ks if k.stage != "experts"], []):
        for _ in range(2):
            assert plan.with_collectives(model, kernels, 2) == _plain_collectives(plan, model, kernels, 2)


def test_a_dp_rank_step_equals_the_unmemoised_build() -> None:
    """A DP rank's MoE is the group's step's: the memo of the TP part must not keep one step's experts for the next."""
    dep = DeploymentSpec(tp=2, dp=4, ep=8)
    full = PRESETS["qwen3-30b-a3b"]
    model = shard(full, dep)
    plan = DPRankPlan(VllmRuntime(), dep, gpu("h200"), full)
    for group_tokens in (8, 64, 8, 300):
        for batch in BATCHES[:4]:
            tokens = sum(n for n, _ in batch)
            plan.group = GroupStep(max(tokens, group_tokens), tokens > len(batch), None, "uniform")
            fresh = DPRankPlan(VllmRuntime(), dep, gpu("h200"), full)
            fresh.group = plan.group
            got = plan.step_kernels(model, batch)
            assert got == fresh.step_kernels(model, batch)
            assert [k.stage for k in got].count("attn_all_reduce") == 1
            experts = [k for k in got if k.stage == "experts"]
            # the group's experts (past the largest CUDA graph with their launch floors: the same ops)
            assert [k.op for k in experts] == [k.op for k in fresh.group_experts(model, plan.group)]
