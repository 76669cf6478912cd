"""The engines of a disaggregated deployment's pools (runtime/disagg.py runs them): a prefill engine that hands a
prompt-complete request off with its blocks held, a decode engine that allocates its blocks before the KV comes,
and their DP-group forms (dp > 1 in a pool: runtime/dp_group.py's DPGroup with these ranks)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from layerscope.runtime.dp_group import WAITING_WEIGHT, DPGroup, DPRank, DPRecorder
from layerscope.runtime.metrics import ServingMetrics
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.request import Request, RequestStatus
from layerscope.runtime.sched_interface import SchedulerOutput, StepResult
from layerscope.runtime.scheduler import Scheduler
from layerscope.runtime.serving import ServingInstance
from layerscope.scenario import ScenarioSpec


class PrefillScheduler(Scheduler):
    """vLLM's scheduler on a prefill engine: a request whose prompt is done leaves the engine with its blocks held
    (the KV producer's request finishes with delay_free_blocks; its token goes to the client with the KV)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handoffs: list[Request] = []
        self.peeked: SchedulerOutput | None = None  # made by the engine's look before its step: the step's own

    def schedule(self) -> SchedulerOutput:
        out, self.peeked = self.peeked, None
        return out if out is not None else super().schedule()

    def update_from_output(self, out: SchedulerOutput) -> StepResult:
        res = super().update_from_output(out)
        done = [r for r in res.first_token if r.status is RequestStatus.RUNNING]  # more to generate: decode's
        if done:
            gone = set(map(id, done))
            for r in done:
                self.running.remove(r)
                r.status = RequestStatus.WAITING
            res.first_token = [r for r in res.first_token if id(r) not in gone]
            res.sampled = [r for r in res.sampled if id(r) not in gone]
            self.handoffs += done
        return res


def prefill_scheduler(inst: ServingInstance) -> PrefillScheduler:
    """vLLM's scheduler with the engine's own limits, handing prompt-complete requests off."""
    lim = inst.limits
    return PrefillScheduler(inst.cache, lim.max_num_batched_tokens, lim.max_num_seqs, lim.long_prefill_token_threshold,
                            inst.spec.scheduler.enable_chunked_prefill)


class HoldsKV:
    """What a prefill engine (or a DP group of them) counts of the requests whose blocks it holds for a transfer:
    held now and at most, stalls (nothing fitted beside them), when its last step started (streaming)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stalled = False  # nothing fits beside the blocks held for transfers: waits for one to end
        self.stalls = 0
        self.held = 0
        self.max_held = 0
        self.last_step_start = 0.0

    def _hold(self, n: int) -> None:
        self.held += n
        self.max_held = max(self.max_held, self.held)

    def _stall(self) -> None:
        self.stalled = True
        self.stalls += 1


def free_read(inst: ServingInstance, req: Request, t: float) -> None:
    """The decode side has read the request's KV: its blocks go back to `inst`'s pool."""
    inst.cache.free(req)
    inst.recorder.cache_frees(t, inst.cache.drain_log(), inst.kv.page_bytes)


class PrefillInstance(HoldsKV, ServingInstance):
    def __init__(self, spec: ScenarioSpec, recorder: Recorder) -> None:
        super().__init__(spec, recorder)
        self.scheduler: PrefillScheduler = prefill_scheduler(self)

    def has_work(self) -> bool:
        return not self.stalled and super().has_work()

    def step(self, t: float) -> tuple[float, int]:
        out = self.scheduler.schedule()
        if not out.num_seqs:  # back-pressure: the held blocks leave no room for a waiting prompt
            self._stall()
            return t, 0
        self.last_step_start = t
        self.scheduler.peeked = out  # ServingInstance.step takes this step's schedule
        return super().step(t)

    def take_handoffs(self) -> list[tuple[Request, int]]:
        """The requests whose prompt is done, each with the sender it stays on (this engine: 0)."""
        done, self.scheduler.handoffs = self.scheduler.handoffs, []
        self._hold(len(done))
        return [(r, 0) for r in done]

    def release(self, req: Request, t: float) -> None:
        free_read(self, req, t)
        self.held -= 1
        self.stalled = False

    def members(self) -> list[ServingInstance]:
        return [self]


class PrefillRank(DPRank):
    """One DP rank of a prefill engine with data-parallel attention: its own KV cache, requests and scheduler,
    which hands prompt-complete requests off."""

    def __init__(self, spec: ScenarioSpec, recorder: DPRecorder, rank: int) -> None:
        super().__init__(spec, recorder, rank)
        self.scheduler: PrefillScheduler = prefill_scheduler(self)
        self.blocked = False  # its schedule this step is empty: the blocks it holds leave no room

    def has_work(self) -> bool:
        return not self.blocked and super().has_work()


class PrefillGroup(HoldsKV, DPGroup):
    """A prefill engine of dp ranks stepping in lockstep (runtime/dp_group.py), as SGLang's PD prefill with DP
    attention runs (DeepSeek's and SGLang's large-scale PD deployments prefill with DP attention and EP): a request
    is prefilled on the rank vLLM's DP balancer picks, its blocks held there until read; each rank sends from its
    own GPUs (a link each). A rank whose schedule is empty (its held blocks leave no room) runs the dummy batch;
    when every rank with work is so, the engine stalls until a transfer frees blocks."""

    rank_class = PrefillRank

    def __init__(self, spec: ScenarioSpec, events: list[Any] | None, metrics: ServingMetrics | None,
                 first_instance: int = 0) -> None:
        super().__init__(spec, events, metrics, first_instance)
        self.prefill_ranks = cast(list[PrefillRank], self.ranks)
        self.full_model = self.ranks[0].full_model
        self.holder: dict[int, int] = {}  # request id -> the rank holding its blocks

    def has_work(self) -> bool:
        return not self.stalled and super().has_work()

    def step(self, t: float) -> tuple[float, int]:
        live = [r for r in self.prefill_ranks if r.has_work()]
        for r in live:
            out = r.scheduler.schedule()
            r.blocked = not out.num_seqs
            r.scheduler.peeked = None if r.blocked else out  # the group's step takes the rest
        if all(r.blocked for r in live):
            self._stall()
            return t, 0
        self.last_step_start = t
        return super().step(t)

    def take_handoffs(self) -> list[tuple[Request, int]]:
        out = []
        for r in self.prefill_ranks:
            done, r.scheduler.handoffs = r.scheduler.handoffs, []
            for req in done:
                self.holder[req.request_id] = r.rank
                out.append((req, r.rank))
        self._hold(len(out))
        return out

    def release(self, req: Request, t: float) -> None:
        free_read(self.ranks[self.holder.pop(req.request_id)], req, t)
        self.held -= 1
        self.stalled = False
        for r in self.prefill_ranks:
            r.blocked = False

    def members(self) -> list[ServingInstance]:
        return list(self.ranks)


@dataclass(order=True)
class Arrival:
    ready_us: float  # when the decode engine may allocate for it (prefill's end; streaming: its last step's start)
    order: int
    req: Request = field(compare=False)
    src: int = field(compare=False)  # the prefill engine
    link: int = field(compare=False)  # the sender's link (the engine's, or its DP rank's)
    prefill_end_us: float = field(compare=False)
    dst: Any = field(default=None, compare=False)  # what received its blocks: the decode engine, or a DP rank of it


def allocate_remote(inst: ServingInstance, req: Request, t: float) -> bool:
    """The prompt's blocks on `inst`, before its KV arrives (num_external_computed_tokens = the prompt)."""
    computed, req.num_computed_tokens = req.num_computed_tokens, 0
    try:
        alloc = inst.cache.allocate_slots(req, computed)
    finally:
        req.num_computed_tokens = computed
    if alloc is None:
        return False
    if inst.recorder.keeps and alloc.new_blocks:
        inst.recorder.request_pages(t, req.request_id, "decode", 0, [int(b.bank) for b in alloc.new_blocks],
                                    [int(b.slot) for b in alloc.new_blocks])
    return True


class ReceivesKV:
    """What a decode engine, or one DP rank of it, does with a request whose KV comes from a prefill engine."""

    scheduler: Any
    limits: Any
    metrics: Any
    recorder: Recorder
    inflight = 0  # blocks allocated, KV on its way

    def has_room(self) -> bool:
        """Fewer than max_num_seqs running or on their way."""
        return len(self.scheduler.running) + self.inflight < self.limits.max_num_seqs

    def kv_arrived(self, req: Request, t: float) -> None:
        """The KV is in: the request runs as a decode; its first token reaches the client now."""
        self.inflight -= 1
        req.status = RequestStatus.RUNNING
        self.scheduler.running.append(req)
        if self.metrics is not None:
            req.token_us.append(t)
        else:
            self.recorder.request(req, "transfer_done", t)


def allocate_inbox(inbox: list[Arrival], t: float, targets: Callable[[], list[Any]]) -> list[Arrival]:
    """The prefilled requests ready by t, first come first served, each onto the first of `targets()` (those with
    room, best first) whose KV pool holds its blocks; it stops at one that none holds (no request passes another)."""
    out = []
    while inbox and inbox[0].ready_us <= t:
        a = inbox[0]
        dst = next((r for r in targets() if allocate_remote(r, a.req, t)), None)
        if dst is None:
            break
        inbox.pop(0)
        dst.inflight += 1
        a.dst = dst
        out.append(a)
    return out


class DecodeInstance(ReceivesKV, ServingInstance):
    def __init__(self, spec: ScenarioSpec, recorder: Recorder) -> None:
        super().__init__(spec, recorder)
        assert isinstance(self.scheduler, Scheduler), "a deployment runs vLLM's scheduler"
        self.inbox: list[Arrival] = []  # prefilled, waiting for decode blocks (back-pressure lives here)

    def load(self) -> int:
        return self.scheduler.num_unfinished() + len(self.inbox) + self.inflight

    def allocate_arrived(self, t: float) -> list[Arrival]:
        return allocate_inbox(self.inbox, t, lambda: [self] if self.has_room() else [])

    def members(self) -> list[ServingInstance]:
        return [self]


class DecodeRank(ReceivesKV, DPRank):
    """One DP rank of a decode engine with data-parallel attention: its own KV cache and scheduler, requests
    arriving with their KV."""

    def score(self) -> int:
        """vLLM's DP load balancer's score (DPRank.load_score), a KV on its way counted as waiting."""
        return self.load_score() + WAITING_WEIGHT * self.inflight


class DecodeGroup(DPGroup):
    """A decode engine of dp ranks stepping in lockstep (runtime/dp_group.py), as SGLang's PD decode with DP
    attention and wide EP runs: a prefilled request's blocks go to the rank the DP load balancer scores lowest
    (waiting x 4 + running, its KV on its way counted as waiting; ties to the lowest rank) that has room."""

    rank_class = DecodeRank

    def __init__(self, spec: ScenarioSpec, events: list[Any] | None, metrics: ServingMetrics | None,
                 first_instance: int) -> None:
        super().__init__(spec, events, metrics, first_instance)
        self.inbox: list[Arrival] = []
        self.decode_ranks = cast(list[DecodeRank], self.ranks)

    def load(self) -> int:
        return self.num_unfinished() + len(self.inbox) + sum(r.inflight for r in self.decode_ranks)

    def allocate_arrived(self, t: float) -> list[Arrival]:
        return allocate_inbox(self.inbox, t, lambda: sorted((r for r in self.decode_ranks if r.has_room()),
                                                            key=DecodeRank.score))  # sorted is stable: low rank

    def members(self) -> list[ServingInstance]:
        return list(self.ranks)
