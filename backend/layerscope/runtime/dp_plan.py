"""One GPU of a data-parallel rank (deployment.dp > 1, issue 20): its layer as vLLM runs it with
--data-parallel-size N --enable-expert-parallel.

    attention, norms, dense projections   on the rank's own batch (tp-sharded within the rank; all-reduce if tp > 1)
    router                                 on the rank's own tokens (every GPU scores all experts)
    ep_dispatch (all-to-all, stream comm)  the rank's tokens to the GPUs holding their top-k experts
    experts                                this GPU's E / ep experts over the rows the whole group routed to them,
                                           priced on the busiest GPU at the group's token count
    ep_combine (all-to-all, stream comm)   the expert outputs back to their ranks, summed there

The group (runtime/dp_group.py) hands in, before each step, the group's token count, whether any rank prefills
(DeepEP's normal kernels then, low-latency otherwise) and the busiest GPU's expert load; the all-to-all prices
come from hardware/all_to_all.py. There is no MoE all-reduce: the combine replaces it.
"""

from __future__ import annotations

from dataclasses import dataclass

from layerscope.hardware.all_to_all import FP8_DISPATCH_BYTES, A2ACost, dispatch_combine
from layerscope.hardware.kernel import Kernel
from layerscope.model.config import ModelConfig
from layerscope.runtime.routing import ExpertLoad
from layerscope.runtime.sharded import COMM, ShardedRuntime
from layerscope.runtime.vllm import MoePlacement, moe_kernels

DP_STAGES = {
    "ep_dispatch": ("all-to-all dispatch (tokens to their experts' GPUs)", "NVLink / node link, expert parallel"),
    "ep_combine": ("all-to-all combine (expert outputs back)", "NVLink / node link, expert parallel"),
}


@dataclass(frozen=True)
class GroupStep:
    """What a rank's MoE depends on beyond its own batch: the group's step."""

    tokens: int  # every rank's tokens this step (a dummy rank counts its one token)
    prefill: bool  # some rank prefills: DeepEP's normal kernels
    load: ExpertLoad | None  # the busiest GPU's rows and distinct experts (None: the placement's routing)
    routing: str  # the label the measured MoE rows are read with (balanced once EPLB has re-placed the experts)


class DPRankPlan(ShardedRuntime):
    """A ShardedRuntime whose MoE runs between an all-to-all dispatch and combine over the group's tokens."""

    group: GroupStep | None = None  # set by the group before each step; None: the topology's, dp x the tokens

    def stage_info(self, stage: str) -> tuple[str, str]:
        return DP_STAGES.get(stage) or super().stage_info(stage)

    def with_collectives(self, model: ModelConfig, kernels: list[Kernel], tokens: int) -> list[Kernel]:
        experts = [i for i, k in enumerate(kernels) if k.stage == "experts"]
        if not experts:
            return super().with_collectives(model, kernels, tokens)
        group = self.group or GroupStep(tokens * self.dep.dp, tokens > 1, None, self.base_routing())
        dispatch, combine = self.a2a_kernels(model, tokens, group.prefill)
        moe = self.group_experts(model, group)
        router = [i for i, k in enumerate(kernels) if k.stage == "router"]
        head = kernels[:router[0]] if router else kernels[:experts[0]]
        out = [*head, *self.router(model, tokens), dispatch, *moe, combine, *kernels[experts[-1] + 1:]]
        if self.dep.tp > 1:  # the attention output is still a partial sum over the rank's tp GPUs
            at = max(i for i, k in enumerate(out) if k.stage == "o_proj")
            out.insert(at + 1, self._all_reduce_kernel(model, tokens, "attn_all_reduce"))
        return out

    def router(self, model: ModelConfig, tokens: int) -> list[Kernel]:
        """The router on the rank's own tokens, scoring all E experts for the whole model's top-k (the shard's
        top-k is a GPU's share, under one when ep > k)."""
        key = (model, tokens)
        hit = self._routers.get(key)
        if hit is None:
            full, dep = self.full, self.dep
            ks = moe_kernels(tokens, model.hidden_size, model.moe_intermediate_size, full.num_experts,
                             full.num_experts_per_tok, dep.weight_dtype, MoePlacement(dep.ep, 1, "uniform"))
            hit = self._routers[key] = [k for k in ks if k.stage == "router"]
        return hit

    def base_routing(self) -> str:
        p = getattr(self.base, "placement", None)
        return p.routing if isinstance(p, MoePlacement) else "uniform"

    def a2a_costs(self, model: ModelConfig, tokens: int, prefill: bool) -> tuple[A2ACost, A2ACost]:
        elem = FP8_DISPATCH_BYTES if self.dep.weight_dtype == "fp8" and self.dep.all2all_backend.startswith(
            "deepep") else 2.0  # DeepEP dispatches block-fp8 activations (vLLM's DeepEP + fp8 path); others bf16
        # each of the rank's tp GPUs dispatches its share of the rank's tokens (vLLM splits them over tp)
        local = max(1, -(-tokens // self.dep.tp))
        return dispatch_combine(self.gpu, self.dep.all2all_backend, prefill, self.dep.ep, self.dep.nodes, local,
                                model.hidden_size, self.full.num_experts_per_tok, elem)

    def a2a_kernels(self, model: ModelConfig, tokens: int, prefill: bool) -> tuple[Kernel, Kernel]:
        key = (model, tokens, prefill)
        hit = self._a2a.get(key)
        if hit is None:
            costs = self.a2a_costs(model, tokens, prefill)
            hit = self._a2a[key] = tuple(  # type: ignore[assignment]
                Kernel(c.kernel, stage, "collective", 0.0, c.bytes_sent, stream=COMM, own_launch=False,
                       fixed_us=c.time_us, op=c.op,
                       shapes=f"{c.bytes_sent:,.0f} B sent, {c.inter_node_bytes:,.0f} B off the node, over "
                              f"{self.dep.ep} GPUs ({c.source})")
                for c, stage in zip(costs, ("ep_dispatch", "ep_combine"), strict=True))
        return hit  # type: ignore[return-value]

    def group_experts(self, model: ModelConfig, group: GroupStep) -> list[Kernel]:
        """This GPU's experts over the group's tokens (the router's kernels are the rank's own, kept as planned)."""
        key = (model, group)
        hit = self._experts.get(key)
        if hit is None:
            full, dep = self.full, self.dep
            placement = MoePlacement(dep.ep, 1, group.routing)
            ks = moe_kernels(group.tokens, model.hidden_size, model.moe_intermediate_size, full.num_experts,
                             full.num_experts_per_tok, dep.weight_dtype, placement, group.load)
            hit = self._experts[key] = [k for k in ks if k.stage == "experts"]
        return hit

    @property
    def _a2a(self) -> dict[tuple[ModelConfig, int, bool], tuple[Kernel, Kernel]]:
        return self.__dict__.setdefault("_a2a_memo", {})

    @property
    def _routers(self) -> dict[tuple[ModelConfig, int], list[Kernel]]:
        return self.__dict__.setdefault("_routers_memo", {})

    @property
    def _experts(self) -> dict[tuple[ModelConfig, GroupStep], list[Kernel]]:
        return self.__dict__.setdefault("_experts_memo", {})
