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
as SGLang's router's load-aware policies and Dynamo's planner. The engines of each pool (and their DP-group forms
with dp > 1) are runtime/pools.py's; this module is the loop over them and the links.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from dataclasses import dataclass
from typing import Any, cast

from layerscope.deployment import DisaggregationSpec
from layerscope.events import KernelEvent
from layerscope.runtime.instance import Instance
from layerscope.runtime.loop import Check, Client, Loop, Progress
from layerscope.runtime.pools import Arrival, DecodeGroup, DecodeInstance, DecodeRank, PrefillGroup, PrefillInstance
from layerscope.runtime.request import Request
from layerscope.runtime.transfer import Link, Transfer, lane_bandwidth, transfer_size

KV_TRANSFER = "kv_transfer"  # the transfers' stream: one timeline row


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
                self._poll_links(t, heap)  # the step's poll sees what landed by now (polled_us)
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
        bisect.insort(d.inbox, Arrival(ready, next(self._order), req, src, link, prefill_end))
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

    def _poll_links(self, t: float, heap: list[tuple[float, int]]) -> None:
        """Transfers ending at t end before a decode engine steps at t: its poll before scheduling sees them."""
        for k, link in enumerate(self.links):
            nxt = link.next_event_us()
            if nxt is not None and nxt <= t:
                self._link_step(k, t, heap)

    def _link_step(self, k: int, t: float, heap: list[tuple[float, int]]) -> None:
        x = len(self.prefills)
        for tr in self.links[k].advance(t):
            req, src, j, d = cast(tuple[Request, int, int, DecodeInstance | DecodeRank], tr.payload)
            self.prefills[src].release(req, t)
            seen = polled_us(t, self.end_us[x + j])
            d.kv_arrived(req, seen)
            rec = self.records[req.request_id]
            rec.done_us = seen
            if d.recorder.keeps:
                d.emit(_transfer_kernel(tr, seen, d.recorder.instance, self.dis.link))
            self._wake(heap, t, src)
            self._wake(heap, t, x + j)
        self._wake_link(heap, k)


def polled_us(wire_end_us: float, step_end_us: float) -> float:
    """When the decode engine learns its READ is done. vLLM's NixlConnector polls its transfers once per engine
    step (NixlConnectorWorker.get_finished -> _pop_done_transfers -> check_xfer_state, called by the worker after
    each step's forward), and NIXL's xferDuration ends at that poll (nixlAgent::getXferStatus sets it when the
    backend reports the transfer done): bytes landing mid-step are seen at that step's end. An idle engine polls
    at once (EngineCore keeps stepping empty batches while a request waits for its remote KV)."""
    return max(wire_end_us, step_end_us)


def _transfer_kernel(tr: Transfer, t: float, instance: int, link: str) -> KernelEvent:
    s = tr.size
    return KernelEvent(
        t_us=tr.start_us, name=f"nixl_kv_read_{link}", stage="kv_transfer", stage_kind="memory", phase="decode",
        stream=KV_TRANSFER, start_us=tr.start_us, dur_us=t - tr.start_us, flops=0.0, bytes=s.total_bytes,
        bound="memory", hbm_util=0.0, l2_hit=0.0, shapes=f"request {tr.request_id}: {s.total_bytes / 1e6:.1f} MB over "
        f"{s.lanes} lanes ({s.lane_bytes / 1e6:.1f} MB on the busiest), post {s.post_us / 1000:.2f} ms for "
        f"{s.descriptors:,} descriptors a GPU", scope="model",
        instance=instance)
