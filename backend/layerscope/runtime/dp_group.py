"""A data-parallel group (deployment.dp > 1, issue 20): dp ranks stepping in lockstep, as vLLM's DP + EP does.

    DPGroup(spec, events, metrics): one entry in the loop's instances (runtime/loop.py)
        receive(req)  ─▶ the least loaded rank (vLLM's DP coordinator)          ─▶ DPRank.receive (its own queue)
        step(t)       ─▶ every rank schedules its own batch (its own scheduler and KV cache)
                      ─▶ the group's tokens, prefill or not, the busiest GPU's expert load ─▶ each rank's plan
                      ─▶ each rank's step: attention on its batch, all-to-all, experts on the group's tokens
                         (a rank with nothing scheduled runs a dummy batch of one token, as vLLM's
                         execute_dummy_batch, so the collectives match)
                      ─▶ the slowest rank ends the step for all: the others idle until then

Each rank is a ServingInstance whose events carry instance = its DP rank (vLLM runs one engine core per DP rank and
labels its metrics engine=<rank>); its kernel events' rank is its first GPU. The group's step is a `dp_step` event;
a rank's `step` event carries the group's duration (model_dur_us), so every client time is the group's. Memory and
bank snapshots are DP rank 0's (every rank is the same shape). Load balancing: vLLM's DPLBAsyncMPClient sends a
request to the engine with the lowest waiting x 4 + running (vllm/v1/engine/core_client.py
get_core_engine_for_request), ties to the lowest rank.
"""

from __future__ import annotations

from typing import Any

from layerscope.deployment import DeploymentSpec, eplb_bytes_per_gpu, rank_placements, shard
from layerscope.events import DPGroupEvent, DPStepEvent
from layerscope.result import Clock
from layerscope.runtime.dp_plan import DPRankPlan, GroupStep
from layerscope.runtime.expert_load import ExpertRows
from layerscope.runtime.frontend_latency import lagged_arrival
from layerscope.runtime.metrics import ServingMetrics
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.request import Request
from layerscope.runtime.sched_interface import SchedulerOutput
from layerscope.runtime.serving import ServingInstance, check_fits
from layerscope.runtime.sharded import ShardedRuntime, routing_of
from layerscope.scenario import ScenarioSpec

WAITING_WEIGHT = 4  # vLLM's DP load balancer scores an engine waiting x 4 + running (core_client.py)
# EPLB's re-placement moves each GPU's redundant experts' weights once (vLLM's rearrange_expert_weights_inplace:
# P2P sends); priced at the GPU's NVLink bandwidth, an estimate: vLLM publishes no rearrangement time.


class DPRecorder(Recorder):
    """Holds a rank's step event until the group's step has ended: its model_dur_us is the group's."""

    pending: tuple[Any, ...] | None = None

    def step(self, *args: Any) -> None:
        self.pending = args

    def flush_step(self, model_us: float) -> None:
        if self.pending is not None:
            args = list(self.pending)
            args[3] = model_us
            super().step(*args)
            self.pending = None


class DPRank(ServingInstance):
    """One DP rank: its own scheduler, KV cache and requests; its plan's MoE is the group's (runtime/dp_plan.py)."""

    def __init__(self, spec: ScenarioSpec, recorder: DPRecorder, rank: int) -> None:
        super().__init__(spec, recorder)
        dep = spec.deployment
        assert dep is not None
        self.dp_recorder = recorder
        self.rank = rank
        self.timing.rank = rank * dep.tp  # its kernel events: the rank's first GPU
        assert isinstance(self.plan, ShardedRuntime)  # deployed() made one: the spec has a deployment
        base = self.plan.base
        self.plan = DPRankPlan(base, dep, self.gpu, self.full_model, routing_of(spec))
        self.plan.price = self.timing.cost
        self._dummy: dict[GroupStep, float] = {}

    # -- only rank 0 draws the shared pictures (deployment, phases, memory): the ranks are the same shape -------------
    def start(self) -> None:
        if self.rank == 0:
            super().start()
            return
        self.hbm(0.0)
        check_fits(self.requests, self.kv.pool.num_free, self.page_size, self.limits.max_model_len)

    def finish(self, t: float) -> None:
        if self.rank == 0:
            super().finish(t)

    def _snapshot(self, t: float, activation: float, final: bool = False) -> None:
        if self.rank == 0:
            super()._snapshot(t, activation, final)
        else:
            self.hbm(activation)

    # -- the group's step, in two halves --------------------------------------------------------------------------
    def begin(self, out: SchedulerOutput, t: float) -> float:
        """Run the rank's share of the step from t: its own work, in microseconds."""
        self._step_start = t
        return self._run_step(out, t) - t

    def end(self, out: SchedulerOutput, t_end: float) -> int:
        """The group's step ended at t_end: the rank's tokens are sampled then; how many requests finished."""
        self.dp_recorder.flush_step(t_end - self._step_start)
        res = self.scheduler.update_from_output(out)
        if self._step_ids is not None:
            res.sampled_into(*self._step_ids)
        self._finish_step(res, t_end)
        self._drain_frees(t_end)
        return len(res.finished)

    def dummy_us(self, group: GroupStep) -> float:
        """vLLM's execute_dummy_batch: one token through the model, joining the group's collectives."""
        hit = self._dummy.get(group)
        if hit is None:
            batch = [(1, 1)]
            ks = self.plan.step_kernels(self.model, batch)
            layer = sum(self.timing.cost(k).time_us for k in ks)
            scope = sum(self.timing.cost(k).time_us for k in ks if k.scope == "model")
            outside = sum(self.timing.cost(k).time_us for k in self.plan.outside_layer_kernels(self.model, batch))
            hit = self._dummy[group] = self.model_step_us(layer, scope, outside)
        return hit

    def load_score(self) -> int:
        s = self.scheduler
        return WAITING_WEIGHT * len(getattr(s, "waiting", ())) + len(getattr(s, "running", ()))


class DPGroup:
    """The loop's view of a DP group: one instance that steps all its ranks at once."""

    clock: Clock = "model"
    rank_class: type[DPRank] = DPRank  # a subclass's ranks (a disaggregated decode pool's: runtime/disagg.py)

    def __init__(self, spec: ScenarioSpec, events: list[Any] | None, metrics: ServingMetrics | None,
                 first_instance: int = 0) -> None:
        dep = spec.deployment
        assert dep is not None and dep.dp > 1
        self.spec, self.dep = spec, dep
        self.metrics = metrics  # a summary-only run's, which every rank feeds
        self.shadow = None  # the scaled layer runs on single-engine serving runs only
        # instance: the rank's own (first_instance + rank: a pool's group numbers its ranks after the engines before)
        self.ranks = [self.rank_class(spec, DPRecorder(events, instance=first_instance + r, metrics=metrics), r)
                      for r in range(dep.dp)]
        first = self.ranks[0]
        share_memos([r.plan for r in self.ranks])  # type: ignore[misc]
        if events is None:  # no kernel events, so nothing rank-specific in a launch's memo: one for all ranks
            for r in self.ranks[1:]:
                r.timing._by_id = first.timing._by_id
        self.model, self.plan, self.gpu, self.emit = first.model, first.plan, first.gpu, first.emit
        self.timing = first.timing  # its prices (the topology is drawn from rank 0's plan)
        self.keeps = events is not None
        assert first.traffic is not None, "a DP group needs an MoE model (experts to spread over its ranks)"
        self.rows = ExpertRows(first.traffic, dep.ep, dep.eplb)
        self.traffic_k = first.traffic.k
        self.num_steps = 0
        self.totals = {"dur": 0.0, "idle": 0.0, "a2a": 0.0, "moe_imbalance": 0.0}  # summed over the steps
        self._step_start = 0.0
        self._ahead = dep.async_scheduling

    # == what the loop asks =========================================================================================
    def expect(self, requests: list[Request]) -> None:
        self.ranks[0].expect(requests)
        for r in self.ranks[1:]:
            r.requests = requests  # each must fit any rank's pool alone

    def start(self) -> None:
        for r in self.ranks:
            r.start()
        if self.keeps:
            self.emit(group_event(self.spec, self.dep, self.ranks[0]))

    def has_work(self) -> bool:
        return any(r.has_work() for r in self.ranks)

    def num_unfinished(self) -> int:
        return sum(r.num_unfinished() for r in self.ranks)

    def progress(self) -> float:
        return 0.0

    def seen(self, t: float) -> float:
        return lagged_arrival(self._ahead, self.has_work(), self._step_start, t)

    def receive(self, req: Request, t: float) -> bool:
        rank = min(self.ranks, key=DPRank.load_score)  # min keeps the first (lowest rank) of equal scores
        return rank.receive(req, t)

    def step(self, t: float) -> tuple[float, int]:
        self._step_start = t
        outs = [r.scheduler.schedule() if r.has_work() else None for r in self.ranks]
        tokens = [sum(o.tokens_per_seq()) if o is not None else 0 for o in outs]
        prefill = any(o is not None and sum(o.tokens_per_seq()) > o.tokens_per_seq().count(1) for o in outs)
        group = self.group_step(sum(max(1, n) for n in tokens), prefill)
        busy = []
        for r, o in zip(self.ranks, outs, strict=True):
            r.plan.group = group  # type: ignore[attr-defined]
            busy.append(r.begin(o, t) if o is not None else r.dummy_us(group))
        dur = max(busy) + self._rebalance_us()
        finished = sum(r.end(o, t + dur) for r, o in zip(self.ranks, outs, strict=True) if o is not None)
        slowest = max(range(len(busy)), key=busy.__getitem__)
        a2a = self.a2a_us(slowest, max(1, tokens[slowest]), group)
        self._add(dur, busy, a2a, group)
        if self.keeps:
            self.emit(self.step_event(t, dur, busy, tokens, group, slowest, a2a))
        self.num_steps += 1
        return t + dur, finished

    def finish(self, t: float) -> None:
        for r in self.ranks:
            r.finish(t)

    # == the group's step ===========================================================================================
    def balanced(self) -> bool:
        """EPLB has re-placed the experts (its first rearrangement comes after step_interval steps)."""
        eplb = self.dep.eplb
        return eplb is not None and self.num_steps >= eplb.step_interval

    def group_step(self, tokens: int, prefill: bool) -> GroupStep:
        balanced = self.balanced()
        routing = "balanced" if balanced else routing_of(self.spec)
        return GroupStep(tokens, prefill, self.rows.busiest(tokens, balanced), routing)

    def _rebalance_us(self) -> float:
        eplb = self.dep.eplb
        if eplb is None or not self.num_steps or self.num_steps % eplb.step_interval:
            return 0.0
        return eplb_moved_bytes(self.ranks[0]) / self.gpu.nvlink_bw * 1e6

    def a2a_us(self, rank: int, tokens: int, group: GroupStep) -> float:
        """A rank's dispatch + combine over every MoE layer of the step."""
        r = self.ranks[rank]
        d, c = r.plan.a2a_kernels(self.model, tokens, group.prefill)  # type: ignore[attr-defined]
        return (r.timing.cost(d).time_us + r.timing.cost(c).time_us) * self.model.num_hidden_layers

    def _add(self, dur: float, busy: list[float], a2a: float, group: GroupStep) -> None:
        t = self.totals
        t["dur"] += dur
        t["idle"] += dur * len(busy) - sum(busy)
        t["a2a"] += a2a
        mean = group.tokens * self.traffic_k / self.dep.ep
        t["moe_imbalance"] += (group.load.rows / mean if group.load is not None and mean else 1.0) * dur

    def figures(self) -> dict[str, float | int | str]:
        """The run summary's DP figures: idle share (lockstep), all-to-all share, expert imbalance (busiest GPU's
        rows over the mean, weighted by step time)."""
        t, dur = self.totals, self.totals["dur"] or 1.0
        return {"dp": self.dep.dp, "nodes": self.dep.nodes, "all2all_backend": self.dep.all2all_backend,
                "dp_idle_share": round(t["idle"] / (dur * self.dep.dp), 4), "a2a_share": round(t["a2a"] / dur, 4),
                "expert_imbalance": round(t["moe_imbalance"] / dur, 4), "dp_steps": self.num_steps}

    def step_event(self, t: float, dur: float, busy: list[float], tokens: list[int], group: GroupStep,
                   slowest: int, a2a: float) -> DPStepEvent:
        r = self.ranks[slowest]
        plan: DPRankPlan = r.plan  # type: ignore[assignment]
        d, _ = plan.a2a_kernels(self.model, max(1, tokens[slowest]), group.prefill)
        layers = self.model.num_hidden_layers
        moe = sum(r.timing.cost(k).time_us for k in plan.group_experts(self.model, group)) * layers
        eplb = self.dep.eplb
        return DPStepEvent(t_us=t, index=self.num_steps, start_us=t, dur_us=dur, slowest_rank=slowest,
                           busy_us=[round(b, 3) for b in busy], tokens=tokens, a2a_us=round(a2a, 3),
                           moe_us=round(moe, 3), a2a_kernels=d.name.rsplit(" ", 1)[0],
                           expert_rows=self.rows.per_gpu(group.tokens, self.balanced()),
                           eplb_rebalanced=eplb is not None and self.num_steps > 0
                           and self.num_steps % eplb.step_interval == 0)


def eplb_moved_bytes(rank: DPRank) -> float:
    """One GPU's redundant experts' weights, every layer (what a rearrangement sends at most)."""
    assert rank.spec.deployment is not None
    return eplb_bytes_per_gpu(rank.full_model, shard(rank.full_model, rank.spec.deployment), rank.spec.deployment)


def group_event(spec: ScenarioSpec, dep: DeploymentSpec, first: DPRank) -> DPGroupEvent:
    assert first.placement is not None
    ranks = rank_placements(first.full_model, first.placement, dep)
    return DPGroupEvent(
        t_us=0.0, dp=dep.dp, tp=dep.tp, ep=dep.ep, nodes=dep.nodes, all2all_backend=dep.all2all_backend,
        eplb=dep.eplb.model_dump() if dep.eplb is not None else None,
        ranks=[{"rank": r.rank, "node": r.node, "gpus": list(r.gpus), "experts": [list(e) for e in r.experts],
                "redundant_experts": r.redundant_experts} for r in ranks])


SHARED_MEMOS = ("_outside", "_all_reduce", "_floored", "_a2a_memo", "_experts_memo", "_routers_memo")


def share_memos(plans: list[DPRankPlan]) -> None:
    """The ranks' plans are the same shape: one memo of kernels by shape for all, so a kernel every rank runs is
    built and priced once (the memos are keyed by shape, or by the id of a kernel they hold)."""
    first = plans[0]
    _ = first._a2a, first._experts, first._routers  # made on first use
    parts = getattr(first.base, "_parts", None)
    for p in plans[1:]:
        for name in SHARED_MEMOS:
            setattr(p, name, getattr(first, name))
        if parts is not None:
            p.base._parts = parts  # type: ignore[attr-defined]


def is_dp(spec: ScenarioSpec) -> bool:
    return spec.deployment is not None and spec.deployment.dp > 1


def dp_figures(instance: Any) -> dict[str, float | int | str]:
    """A DP group's summary figures (none for another instance)."""
    return instance.figures() if isinstance(instance, DPGroup) else {}


def members(instance: Any) -> list[Any]:
    """The serving instances a summary adds up: a DP group's ranks, or the instance itself."""
    return list(instance.ranks) if isinstance(instance, DPGroup) else [instance]
