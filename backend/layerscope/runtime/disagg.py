"""Prefill and decode apart (xPyD): x prefill engines, y decode engines, the KV sent from one to the other.

    client ─▶ route ─▶ prefill engine (its own tp, KV pool, scheduler)   a request's prompt, chunked as usual
        prefill done: its first token sampled, its blocks held (vLLM's delay_free_blocks: freed once read)
    ─▶ route ─▶ decode engine: blocks for the prompt allocated first (vLLM's num_external_computed_tokens path:
        Scheduler.schedule -> connector.get_num_new_matched_tokens -> allocate_slots, the request then
        WAITING_FOR_REMOTE_KVS; vllm/v1/core/sched/scheduler.py) ─▶ KV transfer on the sender's link
        (runtime/transfer.py: NIXL READ by the decode worker, NixlConnector) ─▶ transfer_done: the prefill
        engine frees its blocks, the decode engine runs the request as a decode; its first token reaches
        the client now (TTFT includes the transfer), its next tokens from the decode engine's steps

Back-pressure, as vLLM's NixlConnector does it: a decode engine out of blocks leaves the request in its inbox
(first come first served; no preemption for it); the prefill engine keeps that request's blocks until they
are read, so a prefill pool whose blocks are all held stops admitting (its engine stalls until a transfer
frees some). Routing: round robin, as vLLM's disaggregated proxy (tests/v1/kv_connector/nixl_integration/
toy_proxy_server.py cycles its prefill and decode clients), or least loaded (fewest requests in the engine),
as SGLang's router's load-aware policies and Dynamo's planner.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from layerscope.deployment import DisaggregationSpec
from layerscope.events import KernelEvent
from layerscope.runtime.dp_group import WAITING_WEIGHT, DPGroup, DPRank, DPRecorder
from layerscope.runtime.instance import Instance
from layerscope.runtime.loop import Check, Client, Loop, Progress
from layerscope.runtime.metrics import ServingMetrics
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.request import Request, RequestStatus
from layerscope.runtime.sched_interface import SchedulerOutput, StepResult
from layerscope.runtime.scheduler import Scheduler
from layerscope.runtime.serving import ServingInstance
from layerscope.runtime.transfer import Link, Transfer, lane_bandwidth, transfer_size
from layerscope.scenario import ScenarioSpec

KV_TRANSFER = "kv_transfer"  # the transfers' stream: one timeline row


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
class _Arrival:
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


def allocate_inbox(inbox: list[_Arrival], t: float, targets: Callable[[], list[Any]]) -> list[_Arrival]:
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
        self.inbox: list[_Arrival] = []  # prefilled, waiting for decode blocks (back-pressure lives here)

    def load(self) -> int:
        return self.scheduler.num_unfinished() + len(self.inbox) + self.inflight

    def allocate_arrived(self, t: float) -> list[_Arrival]:
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
        self.inbox: list[_Arrival] = []
        self.decode_ranks = cast(list[DecodeRank], self.ranks)

    def load(self) -> int:
        return self.num_unfinished() + len(self.inbox) + sum(r.inflight for r in self.decode_ranks)

    def allocate_arrived(self, t: float) -> list[_Arrival]:
        return allocate_inbox(self.inbox, t, lambda: sorted((r for r in self.decode_ranks if r.has_room()),
                                                            key=DecodeRank.score))  # sorted is stable: low rank

    def members(self) -> list[ServingInstance]:
        return list(self.ranks)


@dataclass
class TransferRecord:
    request_id: int
    prefill_end_us: float
    start_us: float  # blocks allocated on the decode side, the transfer posted
    done_us: float = 0.0
    bytes: float = 0.0


class DisaggLoop(Loop):
    """The loop (loop.py) over prefill engines, decode engines and one link per prefill engine (its NVLink ports
    or NICs, shared by the transfers it sends): each link is one more entry on the heap, at its next event."""

    def __init__(self, prefills: list[PrefillInstance | PrefillGroup], decodes: list[DecodeInstance | DecodeGroup],
                 dis: DisaggregationSpec,
                 client: Client, progress: Progress | None, check: Check | None, events: list[Any] | None) -> None:
        engines = [cast(Instance, e) for e in (*prefills, *decodes)]  # a DP group is one by shape, as engine.py's
        super().__init__(engines, client, self._route_prefill, progress, check, events)
        self.prefills, self.decodes, self.dis = prefills, decodes, dis
        bw = lane_bandwidth(prefills[0].gpu, dis.link)
        senders = [len(p.members()) for p in prefills]  # an engine sends from its GPUs; a DP group's ranks each
        self.first_link = [sum(senders[:i]) for i in range(len(prefills))]
        self.links = [Link(bw) for _ in range(sum(senders))]
        self.num_layers = prefills[0].model.num_hidden_layers
        self.records: dict[int, TransferRecord] = {}
        self._rr_prefill = itertools.cycle(range(len(prefills)))
        self._rr_decode = itertools.cycle(range(len(decodes)))
        self._order = itertools.count()

    # -- routing --------------------------------------------------------------------------------------------
    def _route_prefill(self, req: Request) -> int:
        if self.dis.routing == "round_robin":
            return next(self._rr_prefill)
        return min(range(len(self.prefills)), key=lambda i: self.prefills[i].num_unfinished() + self.prefills[i].held)

    def _route_decode(self) -> int:
        if self.dis.routing == "round_robin":
            return next(self._rr_decode)
        return min(range(len(self.decodes)), key=lambda j: self.decodes[j].load())

    # -- the loop -------------------------------------------------------------------------------------------
    def run(self) -> None:
        for inst in self.instances:
            inst.start()
        n, x = len(self.instances), len(self.prefills)
        heap = [(0.0, i) for i in range(n)]
        self._at = [0.0] * n + [None] * len(self.links)
        assert self.client is not None
        while heap:
            t, i = heapq.heappop(heap)
            if self._at[i] != t:
                continue
            self._at[i] = None
            if i >= n:
                self._link_step(i - n, t, heap)
                continue
            inst = self.instances[i]
            if i < x:
                self._deliver(inst.seen(t), heap, i)
            else:
                self._allocate(i - x, t, heap)
            if not inst.has_work():
                nxt = self.client.next_send_us()
                if i < x and not self.prefills[i].stalled and nxt is not None:
                    self._push(heap, nxt, i)
                elif i >= x and self.decodes[i - x].inbox and self.decodes[i - x].inbox[0].ready_us > t:
                    self._push(heap, self.decodes[i - x].inbox[0].ready_us, i)  # a prefill ends later
                continue
            t_end, finished = inst.step(t)
            self.end_us[i] = t_end
            self.client.finished(t_end, finished)
            self._push(heap, t_end, i)
            if i < x:
                p = self.prefills[i]
                for req, rank in p.take_handoffs():
                    self._handoff(i, self.first_link[i] + rank, req, p.last_step_start if self.dis.streaming else t_end,
                                  t_end, heap)
            else:
                self._allocate(i - x, t_end, heap)
                if finished:  # client slots came free: idle prefill engines take the next sends
                    self._wake_idle_prefills(heap)
            self._tick()
        for i, inst in enumerate(self.instances):
            inst.finish(self.end_us[i])

    def _wake_idle_prefills(self, heap: list[tuple[float, int]]) -> None:
        nxt = self.client.next_send_us() if self.client is not None else None
        if nxt is None:
            return
        for i, p in enumerate(self.prefills):
            if self._at[i] is None and not p.stalled:
                self._push(heap, max(nxt, self.end_us[i]), i)

    def _wake(self, heap: list[tuple[float, int]], t: float, i: int) -> None:
        """An engine with no entry on the heap is woken at t (not before its last step ended)."""
        if self._at[i] is None:
            self._push(heap, max(t, self.end_us[i]), i)

    def _handoff(self, src: int, link: int, req: Request, ready: float, prefill_end: float,
                 heap: list[tuple[float, int]]) -> None:
        j = self._route_decode()
        d = self.decodes[j]
        bisect.insort(d.inbox, _Arrival(ready, next(self._order), req, src, link, prefill_end))
        self._wake(heap, ready, len(self.prefills) + j)

    def _allocate(self, j: int, t: float, heap: list[tuple[float, int]]) -> None:
        for a in self.decodes[j].allocate_arrived(t):
            p, req, d = self.prefills[a.src], a.req, a.dst
            size = transfer_size(p.full_model, req.num_computed_tokens, p.spec.deployment.tp,  # type: ignore[union-attr]
                                 d.spec.deployment.tp, d.model.kv_dtype, d.page_size)
            link = self.links[a.link]
            post, not_before = size.post_us, 0.0
            if self.dis.streaming:  # each layer's KV posted and sent as prefill finishes it: the last layer's after
                post = size.layer_post_us(self.num_layers)
                not_before = a.prefill_end_us + post + size.lane_bytes / self.num_layers / link.bandwidth * 1e6
            link.add(Transfer(req.request_id, size, t, t + post, not_before, payload=(req, a.src, j, d)))
            self.records[req.request_id] = TransferRecord(req.request_id, a.prefill_end_us, t, bytes=size.total_bytes)
            if d.recorder.keeps:
                d.recorder.request(req, "transfer_start", t)
            self._wake_link(heap, a.link)

    def _wake_link(self, heap: list[tuple[float, int]], k: int) -> None:
        nxt = self.links[k].next_event_us()
        i = len(self.instances) + k
        if nxt is not None and (self._at[i] is None or nxt < self._at[i]):  # type: ignore[operator]
            self._push(heap, nxt, i)

    def _link_step(self, k: int, t: float, heap: list[tuple[float, int]]) -> None:
        x = len(self.prefills)
        for tr in self.links[k].advance(t):
            req, src, j, d = cast(tuple[Request, int, int, DecodeInstance | DecodeRank], tr.payload)
            self.prefills[src].release(req, t)
            d.kv_arrived(req, t)
            rec = self.records[req.request_id]
            rec.done_us = t
            if d.recorder.keeps:
                d.emit(_transfer_kernel(tr, t, d.recorder.instance, self.dis.link))
            self._wake(heap, t, src)
            self._wake(heap, t, x + j)
        self._wake_link(heap, k)


def _transfer_kernel(tr: Transfer, t: float, instance: int, link: str) -> KernelEvent:
    s = tr.size
    return KernelEvent(
        t_us=tr.start_us, name=f"nixl_kv_read_{link}", stage="kv_transfer", stage_kind="memory", phase="decode",
        stream=KV_TRANSFER, start_us=tr.start_us, dur_us=t - tr.start_us, flops=0.0, bytes=s.total_bytes,
        bound="memory", hbm_util=0.0, l2_hit=0.0, shapes=f"request {tr.request_id}: {s.total_bytes / 1e6:.1f} MB over "
        f"{s.lanes} lanes ({s.lane_bytes / 1e6:.1f} MB on the busiest), post {s.post_us / 1000:.2f} ms for "
        f"{s.descriptors:,} descriptors a GPU", scope="model",
        instance=instance)
