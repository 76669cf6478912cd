"""The scheduler: which requests run in the next engine step and how many tokens each (vLLM v1's rules).

    budget = max_num_batched_tokens
    1. running requests in decode: one token each (decodes first)
    2. running requests part-way through their prompt: the next chunk, as much as the budget leaves
       no KV block for a running request -> preempt the most recently admitted running request
       (recompute: its blocks are freed, it goes back to the front of the waiting queue); a request that had
       to preempt itself ends the running pass
    3. waiting requests, first come first served, while the budget lasts and fewer than max_num_seqs run
       (prefix-cache hits skip their prefill; a prompt longer than the budget left is chunked, or, without
       chunked prefill, waits)
       a waiting request that does not fit stops admission (no preemption for it; not in a step that preempted)
    long_prefill_token_threshold (when > 0) caps the tokens of one request in one step, running or waiting

Each rule is vLLM's Scheduler.schedule (vllm/v1/core/sched/scheduler.py): the running pass's allocate_slots loop
preempts `self.running.pop()` and breaks when the request preempted itself; "Next, schedule the WAITING requests"
only `if not preempted_reqs`, breaking when allocate_slots returns None or, with enable_chunked_prefill off, when
num_new_tokens > token_budget; `0 < long_prefill_token_threshold < num_new_tokens` caps both passes. Decodes go
first here: vLLM walks `self.running` in admission order, and a running request part-way through its prompt is
always behind the decodes there too (it was admitted last, or resumed last after a preemption), while
max_num_batched_tokens >= max_num_seqs (refused otherwise, scenario.py) leaves every decode its token. Async
scheduling's one-step delay for new requests is the serving loop's (frontend_latency.lagged_arrival).

SGLangScheduler is SGLang's policy (deployment.engine: sglang): a step runs prefill chunks or decodes, never both.
SGLang's Scheduler.get_next_batch_to_run builds a prefill batch first ("Run prefill first if possible") and runs the
running decodes only when there is none; server_args.enable_mixed_chunk, which would mix the decodes into the
prefill batch, defaults to False (python/sglang/srt/managers/scheduler.py, server_args.py).

ArticleScheduler keeps the article's chunk scheduler: decodes unbudgeted, then one prefill chunk of the
oldest request still in prefill, of chunk_size (low_mem_chunk_size below the free-HBM threshold).

The hand-off types (SchedulerOutput, ScheduledSeq, StepResult) and the interface both schedulers implement are in
sched_interface.py.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from layerscope.runtime.chunks import ChunkScheduler
from layerscope.runtime.kv.cache_manager import Allocation, KVCacheManager, cache_filled_block
from layerscope.runtime.request import Request, RequestStatus
from layerscope.runtime.sched_interface import ScheduledSeq, SchedulerOutput, StepResult


class Scheduler:
    def __init__(self, kv: KVCacheManager, max_num_batched_tokens: int, max_num_seqs: int,
                 long_prefill_token_threshold: int = 0, enable_chunked_prefill: bool = True) -> None:
        if max_num_batched_tokens < 1 or max_num_seqs < 1 or long_prefill_token_threshold < 0:
            raise ValueError("max_num_batched_tokens and max_num_seqs must be >= 1, long_prefill_token_threshold >= 0")
        self.kv = kv
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self.long_prefill_token_threshold = long_prefill_token_threshold
        self.enable_chunked_prefill = enable_chunked_prefill
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []  # in order of admission
        self.num_preemptions = 0

    def add_request(self, req: Request) -> None:
        self.waiting.append(req)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def num_unfinished(self) -> int:
        return len(self.waiting) + len(self.running)

    # -- one step --------------------------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput(token_budget=self.max_num_batched_tokens)
        budget = self.max_num_batched_tokens
        if budget >= len(self.running):  # every decode gets its token (most steps): no budget test per request
            decodes, prefills = self._plain_decodes(out)
            budget -= len(out.decodes)
            if decodes and self._boundary_decodes(decodes, out):  # those crossing a block boundary, in one call
                budget -= len(decodes)
                decodes = []
        else:
            decodes, prefills, budget = self._plain_decodes_budgeted(out, budget)
        for req in decodes + prefills:
            if req.status is not RequestStatus.RUNNING or budget <= 0:
                continue  # preempted earlier in this pass
            n = self._running_tokens(req, budget)
            if n <= 0:
                continue
            preempted = len(out.preempted)
            alloc = self._allocate_or_preempt(req, n, out)
            if len(out.preempted) > preempted:  # a preempted request scheduled earlier hands its tokens back
                budget = self.max_num_batched_tokens - out.num_tokens
            if alloc is None:
                break  # it preempted itself: vLLM's running pass ends here
            out.allocated.append(ScheduledSeq(req, n, req.num_computed_tokens, allocation=alloc))
            budget -= n
        if not out.preempted:  # Scheduler.schedule: "Next, schedule the WAITING requests" only if none was preempted
            budget = self._admit(out, budget)
        return out

    def _plain_decodes(self, out: SchedulerOutput) -> tuple[list[Request], list[Request]]:
        """The running pass's first part with a budget for every running request: decodes whose token fits their
        last block go into `out` (its filled block cached, as allocate_slots would); returned, the decodes that
        need a block and the requests in prefill, in running order. ~100 requests a step: kept to a few bytecodes."""
        bs, tables = self.kv.block_size, self.kv.req_to_blocks
        plain, plain_ctx = out.decodes.append, out.decode_context.append  # bound once
        caching, last = self.kv.prefix_caching, self.kv.block_size - 1
        decodes: list[Request] = []  # decodes that need a new block
        prefills: list[Request] = []
        for r in self.running:
            c = r.num_computed_tokens
            o = r.num_output_tokens
            if o and r.input_len + o - c == 1:
                # its table holds blocks for its c computed tokens, so a token not at a block boundary fits them
                m = c % bs
                if m or c < len(tables[r.request_id]) * bs:
                    plain(r)  # fits its last block: most steps
                    plain_ctx(c)
                    if m == last and caching:  # its token fills the block: cached now, as allocate_slots
                        cache_filled_block(self.kv, r, c + 1)
                else:
                    decodes.append(r)
            else:
                prefills.append(r)
        return decodes, prefills

    def _boundary_decodes(self, decodes: list[Request], out: SchedulerOutput) -> bool:
        """Decodes that each need a new block, all given one when the pool holds enough (then none preempts and
        each gets its token, as in the general pass: the budget covers every running request); whether they
        were (False: none was, the general pass handles them)."""
        allocs = self.kv.allocate_boundary_blocks(decodes)
        if allocs is None:
            return False
        out.allocated.extend(ScheduledSeq(r, 1, r.num_computed_tokens, allocation=a)
                             for r, a in zip(decodes, allocs, strict=True))
        return True

    def _plain_decodes_budgeted(self, out: SchedulerOutput, budget: int
                                ) -> tuple[list[Request], list[Request], int]:
        """_plain_decodes when the budget may run out in the pass (fewer tokens than running requests): a decode
        left without budget is returned with those needing a block (the allocation pass skips it)."""
        bs, tables = self.kv.block_size, self.kv.req_to_blocks
        decodes: list[Request] = []
        prefills: list[Request] = []
        for r in self.running:
            c, o = r.num_computed_tokens, r.num_output_tokens
            if o and r.input_len + o - c == 1:
                if budget > 0 and (c % bs or c < len(tables[r.request_id]) * bs):
                    out.decodes.append(r)
                    out.decode_context.append(c)
                    budget -= 1
                    if self.kv.prefix_caching and (c + 1) % bs == 0:
                        cache_filled_block(self.kv, r, c + 1)
                else:
                    decodes.append(r)
            else:
                prefills.append(r)
        return decodes, prefills, budget

    def _capped(self, n: int) -> int:
        threshold = self.long_prefill_token_threshold
        return threshold if 0 < threshold < n else n

    def _running_tokens(self, req: Request, budget: int) -> int:
        return min(self._capped(req.num_tokens - req.num_computed_tokens), budget)

    def _prefill_tokens(self, req: Request, remaining: int, budget: int) -> int:
        n = self._capped(remaining)
        if not self.enable_chunked_prefill and n > budget:
            return 0  # it waits for a step with room for all of it
        return min(n, budget)

    def _allocate_or_preempt(self, req: Request, n: int, out: SchedulerOutput) -> Allocation | None:
        while True:
            alloc = self.kv.allocate_slots(req, n)
            if alloc is not None:
                return alloc
            victim = self.running[-1]  # the most recently admitted (Scheduler.schedule: self.running.pop())
            self._preempt(victim, out)
            if victim is req:
                return None

    def _preempt(self, victim: Request, out: SchedulerOutput) -> None:
        if victim in out.decodes:  # scheduled earlier in this pass: undone
            i = out.decodes.index(victim)
            del out.decodes[i], out.decode_context[i]
        out.allocated[:] = [s for s in out.allocated if s.request is not victim]
        self.running.remove(victim)
        self.kv.free(victim)
        victim.status = RequestStatus.PREEMPTED
        victim.num_computed_tokens = 0
        victim.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(victim)
        out.preempted.append(victim)

    def _admit(self, out: SchedulerOutput, budget: int) -> int:
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]
            hits = self.kv.get_computed_blocks(req) if req.num_computed_tokens == 0 else []
            cached = len(hits) * self.kv.block_size
            n = self._prefill_tokens(req, req.num_tokens - req.num_computed_tokens - cached, budget)
            if n <= 0:
                break
            alloc = self.kv.allocate_slots(req, n, hits)
            if alloc is None:
                break  # no room: it waits (Scheduler.schedule breaks; it preempts only for running requests)
            self.waiting.popleft()
            self.kv.record_admission(req, cached)
            req.num_computed_tokens += cached
            req.status = RequestStatus.RUNNING
            self.running.append(req)
            out.allocated.append(ScheduledSeq(req, n, req.num_computed_tokens, cached, alloc))
            out.admitted.append(req)
            budget -= n
        return budget

    def update_from_output(self, out: SchedulerOutput) -> StepResult:
        """The step ran: its tokens are computed; requests whose known tokens are all computed sample one."""
        res = StepResult()
        res.sampled.extend(out.decodes)  # a decode's one token was its last known one: it samples the next
        for req in out.decodes:
            req.num_computed_tokens += 1
            n = req.num_output_tokens = req.num_output_tokens + 1
            if n >= req.output_len:
                self._finished(req, res)
        for s in out.allocated:
            req = s.request
            req.num_computed_tokens += s.num_new_tokens
            known = req.input_len + req.num_output_tokens
            assert req.num_computed_tokens <= known, f"request {req.request_id} computed past its tokens"
            if req.num_computed_tokens < known:
                continue  # a prefill chunk short of the prompt's end: no token yet
            req.num_output_tokens += 1
            res.sampled.append(req)
            if req.num_output_tokens == 1:
                res.first_token.append(req)
            if req.num_output_tokens >= req.output_len:
                self._finished(req, res)
        return res

    def _finished(self, req: Request, res: StepResult) -> None:
        req.status = RequestStatus.FINISHED
        self.running.remove(req)
        self.kv.free(req)
        res.finished.append(req)


class SGLangScheduler(Scheduler):
    """SGLang's prefill-first policy without mixed chunks: a step of prefill chunks (the request part-way through
    its prompt first, then waiting ones, within the chunked-prefill budget) while any is ready, else the decodes."""

    def schedule(self) -> SchedulerOutput:
        if self.waiting or any(map(self._in_prefill, self.running)):
            out = self._prefill_pass()
            if out.num_tokens or out.preempted:
                return out
        return super().schedule()  # no prefill could run (none ready, or no KV room): the decodes

    @staticmethod
    def _in_prefill(r: Request) -> bool:
        return not (r.num_output_tokens and r.input_len + r.num_output_tokens - r.num_computed_tokens == 1)

    def _prefill_pass(self) -> SchedulerOutput:
        out = SchedulerOutput(token_budget=self.max_num_batched_tokens)
        budget = self.max_num_batched_tokens
        for req in [r for r in self.running if self._in_prefill(r)]:
            if req.status is not RequestStatus.RUNNING or budget <= 0:
                continue
            n = self._running_tokens(req, budget)
            alloc = self._allocate_or_preempt(req, n, out) if n > 0 else None
            if alloc is None:
                break
            out.allocated.append(ScheduledSeq(req, n, req.num_computed_tokens, allocation=alloc))
            budget -= n
        if not out.preempted:
            self._admit(out, budget)
        return out


class ArticleScheduler(Scheduler):
    """The article's runtime: decodes first, then one chunk of one prompt per step, sized by free HBM."""

    def __init__(self, kv: KVCacheManager, chunks: ChunkScheduler, max_num_seqs: int,
                 free_bytes: Callable[[], float]) -> None:
        # the budget only bounds the one chunk: every running decode fits beside it
        super().__init__(kv, max(chunks.chunk_size, chunks.low_mem_chunk_size) + max_num_seqs, max_num_seqs)
        self.chunks = chunks
        self.free_bytes = free_bytes

    def schedule(self) -> SchedulerOutput:
        self._chunk = self.chunks.size_for(self.free_bytes())[0]
        self._prefill_taken = False
        out = super().schedule()
        out.token_budget = self._chunk + len(out.decodes) + sum(1 for s in out.allocated if s.num_new_tokens == 1)
        return out

    def _running_tokens(self, req: Request, budget: int) -> int:
        remaining = req.num_tokens - req.num_computed_tokens
        if not req.is_prefill:
            return remaining  # decodes are not charged to the chunk
        return self._prefill_tokens(req, remaining, budget)

    def _prefill_tokens(self, req: Request, remaining: int, budget: int) -> int:
        if self._prefill_taken:
            return 0
        self._prefill_taken = True
        return min(remaining, self._chunk)
