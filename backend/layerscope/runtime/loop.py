"""The loop: one time-ordered loop drives a run's instances.

    heap of (when, instance): each instance's next step, in time order (ties: the lower instance first)
    pop the earliest ─▶ the client sends what has arrived by then ─▶ route(request) ─▶ Instance.receive
                     ─▶ Instance.step(t) ─▶ its end goes back on the heap; its finished requests free client slots
    an instance with nothing to do waits for the client's next send (or, with none due, until a request is routed
    to it); the run ends when no instance has work and the client has sent everything

Each instance keeps its own clock (runtime/instance.py); all append to the run's one event list, which the run
sorts by time at the end. A second instance is one more entry in `instances` and a `route` that picks it.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator, Sequence

from layerscope.runtime.instance import Instance
from layerscope.runtime.request import Request

Progress = Callable[[float], None]
Check = Callable[[int], None]  # called every few steps with the events made so far; raises to stop the run
Route = Callable[[Request], int]  # which instance a request goes to
CHECK_EVERY = 16  # steps between progress reports and budget checks


class Client:
    """The workload's client: sends each request at its arrival time, or when one of its max_concurrency slots
    frees, if later (a slot frees when one of its requests finishes)."""

    def __init__(self, requests: list[Request], max_concurrency: int | None) -> None:
        self.num_requests = len(requests)
        self.pending = deque(requests)
        self.slots = [0.0] * min(max_concurrency or len(requests), len(requests))  # when each slot came free

    def next_send_us(self) -> float | None:
        if self.pending and self.slots:
            return max(self.pending[0].arrival_us, self.slots[0])
        return None

    def due(self, seen: float) -> Iterator[tuple[Request, float]]:
        """The requests sent by `seen`, each with when it was sent (a slot freed meanwhile is used at once)."""
        while self.pending and self.slots and max(self.pending[0].arrival_us, self.slots[0]) <= seen:
            req = self.pending.popleft()
            yield req, max(req.arrival_us, heapq.heappop(self.slots))

    def finished(self, t: float, n: int) -> None:
        for _ in range(n):
            heapq.heappush(self.slots, t)


class Loop:
    def __init__(self, instances: Sequence[Instance], client: Client | None = None, route: Route | None = None,
                 progress: Progress | None = None, check: Check | None = None,
                 events: list[object] | None = None) -> None:
        self.instances = list(instances)
        self.client = client
        self.route: Route = route or (lambda req: 0)
        self.progress = progress
        self.check = check
        self.events = events
        self.num_steps = 0
        self.end_us = [0.0] * len(self.instances)  # when each instance's last step ended

    def run(self) -> None:
        for inst in self.instances:
            inst.start()
        heap = [(0.0, i) for i in range(len(self.instances))]
        self._at: list[float | None] = [0.0] * len(self.instances)  # each instance's one live entry on the heap
        while heap:
            t, i = heapq.heappop(heap)
            if self._at[i] != t:
                continue  # superseded: the instance was woken earlier by a request routed to it
            self._at[i] = None
            inst = self.instances[i]
            self._deliver(inst.seen(t), heap, i)
            if not inst.has_work():  # idle: wait for the client's next send (None: until a request is routed here)
                nxt = self.client.next_send_us() if self.client is not None else None
                if nxt is not None:
                    self._push(heap, nxt, i)
                continue
            t_end, finished = inst.step(t)
            self.end_us[i] = t_end
            if self.client is not None:
                self.client.finished(t_end, finished)
            self._push(heap, t_end, i)
            self._tick()
        for i, inst in enumerate(self.instances):
            inst.finish(self.end_us[i])

    def _deliver(self, seen: float, heap: list[tuple[float, int]], current: int) -> None:
        """What the client has sent by `seen`, each request to its instance; an idle one is woken for it."""
        if self.client is None:
            return
        for req, sent in self.client.due(seen):
            j = self.route(req)
            idle = not self.instances[j].has_work()
            if not self.instances[j].receive(req, sent):  # refused (vLLM's 400): the client's slot is free again
                self.client.finished(sent, 1)
                continue
            wake = max(sent, self.end_us[j])
            if j != current and idle and (self._at[j] is None or wake < self._at[j]):  # type: ignore[operator]
                self._push(heap, wake, j)

    def _push(self, heap: list[tuple[float, int]], t: float, i: int) -> None:
        self._at[i] = t
        heapq.heappush(heap, (t, i))

    def _tick(self) -> None:
        self.num_steps += 1
        if self.num_steps % CHECK_EVERY:
            return
        if self.progress is not None:
            self.progress(min(1.0, self._done()))
        if self.check is not None:
            self.check(len(self.events) if self.events is not None else 0)

    def _done(self) -> float:
        if self.client is None:
            return sum(inst.progress() for inst in self.instances) / len(self.instances)
        c = self.client
        unfinished = sum(inst.num_unfinished() for inst in self.instances)
        return (c.num_requests - len(c.pending) - unfinished) / c.num_requests
