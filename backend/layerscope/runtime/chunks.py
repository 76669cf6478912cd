"""The chunk scheduler: splits a prompt into prefill chunks and remaps each chunk's KV writes.

    prompt  [0 ........................................ S)
    chunks  [0, 4096) [4096, 8192) ...                      one attention launch each
    pages   chunk c writes logical pages token_start // page_size .. (token_end - 1) // page_size
            disabled: the address remap is skipped and every chunk writes pages 0.. (chunk-relative),
            over the pages of the chunks before it

The size is decided per chunk from the HBM free at that moment: below `low_mem_threshold_gib`
it drops to `low_mem_chunk_size`, so a prompt that fills memory shrinks its later chunks.
path_bw_scale prices memory-path contention for host traffic (re-fetches); it never scales HBM bandwidth.
SingleRequestScheduler is the one-request run's scheduler: this chunk policy, then decode, one token a step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from layerscope.runtime.request import Request, RequestStatus
from layerscope.runtime.sched_interface import ScheduledSeq, SchedulerOutput, StepResult

GIB = 1024**3

Reason = Literal["default", "low_memory", "disabled"]


@dataclass(frozen=True)
class ChunkDecision:
    index: int
    token_start: int
    token_end: int  # exclusive
    chunk_size: int  # the size in force (the last chunk may be shorter)
    reason: Reason
    pages: tuple[int, ...]  # logical pages the chunk's KV lands in
    remapped: bool  # False when the scheduler is disabled: pages are chunk-relative

    @property
    def num_tokens(self) -> int:
        return self.token_end - self.token_start


class ChunkScheduler:
    def __init__(
        self,
        chunk_size: int = 4096,
        low_mem_chunk_size: int = 2048,
        low_mem_threshold_gib: float = 12.0,
        page_size: int = 256,
        disabled: bool = False,
    ) -> None:
        if min(chunk_size, low_mem_chunk_size, page_size) < 1:
            raise ValueError("chunk sizes and page_size must be >= 1")
        self.chunk_size = chunk_size
        self.low_mem_chunk_size = low_mem_chunk_size
        self.low_mem_threshold_gib = low_mem_threshold_gib
        self.page_size = page_size
        self.disabled = disabled

    def size_for(self, free_hbm_bytes: float) -> tuple[int, Reason]:
        if free_hbm_bytes < self.low_mem_threshold_gib * GIB:
            return self.low_mem_chunk_size, "low_memory"
        return self.chunk_size, "default"

    def next_chunk(self, index: int, token_start: int, prompt_len: int, free_hbm_bytes: float) -> ChunkDecision:
        if not 0 <= token_start < prompt_len:
            raise ValueError(f"chunk start {token_start} is outside the prompt [0, {prompt_len})")
        size, reason = self.size_for(free_hbm_bytes)
        end = min(prompt_len, token_start + size)
        ps = self.page_size
        if self.disabled:
            # No address remap: positions are taken relative to the chunk, so pages restart at 0.
            pages = tuple(range(0, (end - token_start - 1) // ps + 1))
            return ChunkDecision(index, token_start, end, size, "disabled", pages, remapped=False)
        pages = tuple(range(token_start // ps, (end - 1) // ps + 1))
        return ChunkDecision(index, token_start, end, size, reason, pages, remapped=True)

    def plan(self, prompt_len: int, free_hbm_bytes: float) -> list[ChunkDecision]:
        """All chunks when free HBM stays at `free_hbm_bytes` (the engine calls next_chunk as memory changes)."""
        out: list[ChunkDecision] = []
        start = 0
        while start < prompt_len:
            out.append(self.next_chunk(len(out), start, prompt_len, free_hbm_bytes))
            start = out[-1].token_end
        return out


def path_bw_scale(contention: float) -> float:
    """Share of the host link's bandwidth left to a transfer that crosses the host memory path (re-fetching
    evicted KV pages from host memory) when cross-socket traffic contends for that path, as on a two-socket host.

    Only host traffic crosses this path: a GPU kernel's HBM reads never do, so HBM bandwidth is not scaled.
    Model (an assumption, not a measurement): `contention` is the competing traffic per byte of ours (0..1), and
    the path is shared fairly, so the transfer gets 1 / (1 + contention) of it: all of it at 0, half at 1.
    """
    return 1.0 / (1.0 + contention)


class SingleRequestScheduler:
    """One request and no client (the one-request shorthand), as a SchedulerInterface (sched_interface.py): its
    prompt in chunks sized by the HBM free at each chunk (the article's chunk policy, ChunkScheduler), then one
    token a step. The last prefill chunk samples the first token, each decode step the next; `chunk` is the
    decision behind the step just scheduled (None for a decode step). `disabled_from`: the chunk from which a
    scheduler_disabled fault skips the address remap."""

    def __init__(self, chunks: ChunkScheduler, free_bytes: Callable[[], float], disabled_from: int | None) -> None:
        self.chunks = chunks
        self.free_bytes = free_bytes
        self.disabled_from = disabled_from
        self.request: Request | None = None
        self.chunk: ChunkDecision | None = None
        self.num_chunks = 0  # prefill chunks scheduled so far

    def add_request(self, req: Request) -> None:
        assert self.request is None, "a single-request scheduler takes one request"
        self.request = req

    def has_unfinished(self) -> bool:
        return self.request is not None and self.request.status is not RequestStatus.FINISHED

    def num_unfinished(self) -> int:
        return int(self.has_unfinished())

    def schedule(self) -> SchedulerOutput:
        req = self.request
        assert req is not None
        if req.num_computed_tokens < req.input_len:
            index = self.num_chunks
            self.chunks.disabled = self.disabled_from is not None and index >= self.disabled_from
            d = self.chunk = self.chunks.next_chunk(index, req.num_computed_tokens, req.input_len, self.free_bytes())
            self.num_chunks += 1
            seq = ScheduledSeq(req, d.num_tokens, d.token_start)
            return SchedulerOutput(allocated=[seq], token_budget=d.chunk_size)
        self.chunk = None
        return SchedulerOutput(decodes=[req], decode_context=[req.num_computed_tokens], token_budget=1)

    def update_from_output(self, out: SchedulerOutput) -> StepResult:
        res = StepResult()
        for req, n in [(r, 1) for r in out.decodes] + [(s.request, s.num_new_tokens) for s in out.allocated]:
            req.num_computed_tokens += n
            req.status = RequestStatus.RUNNING
            if req.num_computed_tokens < req.num_tokens:
                continue  # a prefill chunk short of the prompt's end
            req.num_output_tokens += 1
            res.sampled.append(req)
            if req.num_output_tokens == 1:
                res.first_token.append(req)
            if req.num_output_tokens >= req.output_len:
                req.status = RequestStatus.FINISHED
                res.finished.append(req)
        return res
