"""What the scheduler and the engine hand each other: the step's plan and what the step produced.

    engine ──▶ Scheduler.schedule() ──▶ SchedulerOutput (which requests run, how many tokens each)
    engine runs the step (kernels, prices, time)
    engine ──▶ Scheduler.update_from_output(out) ──▶ StepResult (tokens sampled, first tokens, finished)

As vLLM V1: SchedulerInterface (vllm/v1/core/sched/interface.py: schedule, update_from_output, add_request,
has_unfinished_requests, get_num_unfinished_requests) and SchedulerOutput (vllm/v1/core/sched/output.py). The
rule for which request samples a token lives in the scheduler's update_from_output alone: the engine, the metrics
and the dashboard read StepResult (and the step event written from it), never replay the rule.

A step's output keeps its commonest entry apart: a running decode whose token fits its last block (no
allocation; most of a serving run's request-steps) is a request and its context in two parallel lists, not a
ScheduledSeq, so a step of a hundred decodes builds no per-request objects. The step's order is: those
decodes (running order), then the sequences that allocated (decodes needing a block, prefill chunks, admitted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from layerscope.runtime.kv.cache_manager import Allocation
from layerscope.runtime.request import Request


@dataclass(slots=True)
class ScheduledSeq:
    request: Request
    num_new_tokens: int
    num_context_tokens: int  # tokens whose KV is cached before this step (prefix hits included)
    num_cached_tokens: int = 0  # of those, found in the prefix cache this step
    allocation: Allocation | None = None


@dataclass
class SchedulerOutput:
    decodes: list[Request] = field(default_factory=list)  # one token each, fitting their last block
    decode_context: list[int] = field(default_factory=list)  # their computed tokens, parallel to decodes
    allocated: list[ScheduledSeq] = field(default_factory=list)  # the seqs that called allocate_slots, after them
    preempted: list[Request] = field(default_factory=list)
    admitted: list[Request] = field(default_factory=list)  # scheduled from waiting this step
    token_budget: int = 0

    @property
    def num_seqs(self) -> int:
        return len(self.decodes) + len(self.allocated)

    @property
    def num_tokens(self) -> int:
        return len(self.decodes) + sum(s.num_new_tokens for s in self.allocated)

    @property
    def seqs(self) -> list[ScheduledSeq]:
        """Every sequence of the step, in step order (built on demand: the engine's hot path reads the lists)."""
        return [ScheduledSeq(r, 1, c) for r, c in zip(self.decodes, self.decode_context, strict=True)] + self.allocated

    def batch(self) -> list[tuple[int, int]]:
        """(num_new_tokens, num_context_tokens) per sequence, in step order: what RuntimePlan.step_kernels takes."""
        rest = [(s.num_new_tokens, s.num_context_tokens) for s in self.allocated]
        return [(1, c) for c in self.decode_context] + rest

    def request_ids(self) -> list[int]:
        return [r.request_id for r in self.decodes] + [s.request.request_id for s in self.allocated]

    def tokens_per_seq(self) -> list[int]:
        return [1] * len(self.decodes) + [s.num_new_tokens for s in self.allocated]


@dataclass
class StepResult:
    """What a finished step produced: the tokens each request sampled (one per request whose known tokens were
    all computed by the step), the requests whose first token that was, and those that finished."""

    sampled: list[Request] = field(default_factory=list)  # every request that sampled a token, in step order
    first_token: list[Request] = field(default_factory=list)
    finished: list[Request] = field(default_factory=list)

    def num_sampled(self) -> dict[int, int]:
        """request_id -> tokens sampled this step (one each: no speculative decoding here)."""
        return {r.request_id: 1 for r in self.sampled}

    def sampled_into(self, request_ids: list[int], num_sampled: list[int]) -> None:
        """Add the tokens each of the step's requests sampled into `num_sampled`, parallel to `request_ids` (the
        step's order; `sampled` follows it, so one walk finds them: ~100 a step)."""
        i, n = 0, len(request_ids)
        for req in self.sampled:
            rid = req.request_id
            while i < n and request_ids[i] != rid:
                i += 1
            if i == n:  # out of step order: look each up (the schedulers here keep the order)
                where = {r: k for k, r in enumerate(request_ids)}
                for rid_, count in self.num_sampled().items():
                    num_sampled[where[rid_]] = count
                return
            num_sampled[i] += 1
            i += 1


class SchedulerInterface(Protocol):
    """What the engine asks of a scheduler (vLLM's SchedulerInterface; scheduler.py's Scheduler and
    ArticleScheduler implement it)."""

    def add_request(self, req: Request) -> None: ...

    def schedule(self) -> SchedulerOutput: ...

    def update_from_output(self, out: SchedulerOutput) -> StepResult: ...

    def has_unfinished(self) -> bool: ...

    def num_unfinished(self) -> int: ...
