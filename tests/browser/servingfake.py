"""A small, fake serving run with the contract's event shapes (request, step, deployment, request_id on pages).

The browser tests of the serving views play it through the real server, so what the views must show is known
exactly: 12 requests, a 64-token budget, decode first then prefill chunks FCFS, a 24-page KV pool small enough
that the last admitted request is preempted and recomputed, two requests sharing a prefix block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from layerscope import events as ev
from layerscope.scenario import ScenarioSpec

BUDGET, MAX_SEQS, PAGE, BANKS, CAPACITY = 64, 6, 16, 4, 6
COLLECTIVE = "collective" if "collective" in ev.StageKind.__args__ else "memory"  # type: ignore[attr-defined]
LAYER_US, MODEL_LAYERS = 40.0, 94  # one step of one layer; whole model = 94 layers (Qwen3-235B-A22B)
INPUTS = [70, 40, 130, 50, 90, 40, 60, 110, 45, 80, 55, 100]
OUTPUTS = [12, 20, 8, 15, 10, 18, 9, 14, 16, 11, 13, 7]


class _E(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    t_us: float


class RequestEvent(_E):
    kind: Literal["request"] = "request"
    request_id: int
    what: Literal["arrive", "scheduled", "first_token", "preempted", "finished"]
    input_len: int
    output_len: int
    num_computed_tokens: int
    num_output_tokens: int


class StepEvent(_E):
    kind: Literal["step"] = "step"
    index: int
    start_us: float
    dur_us: float
    model_dur_us: float
    num_seqs: int
    prefill_tokens: int
    decode_tokens: int
    token_budget: int
    request_ids: list[int]
    num_tokens: list[int]
    cached_blocks: int | None = None


class PageAlloc(_E):
    kind: Literal["page_alloc"] = "page_alloc"
    owner: str
    phase: str
    logical: list[int]
    banks: list[int]
    slots: list[int]
    request_id: int | None = None


class PageFree(_E):
    kind: Literal["page_free"] = "page_free"
    owner: str
    banks: list[int]
    slots: list[int]
    request_id: int | None = None


class DeploymentEvent(_E):
    kind: Literal["deployment"] = "deployment"
    gpu: str
    num_gpus: int
    tp: int
    ep: int
    moe_tp: int
    weight_dtype: str
    kv_dtype: str
    gpu_memory_utilization: float
    cuda_graphs: bool
    async_scheduling: bool
    cuda_graph_memory_profiled: bool
    max_model_len: int
    per_gpu: dict[str, float]


@dataclass
class _Req:
    id: int
    input_len: int
    output_len: int
    arrive: float
    computed: int = 0
    out: int = 0
    pages: list[tuple[int, int]] = field(default_factory=list)
    scheduled: bool = False
    first: bool = False


@dataclass
class FakeServingResult:
    spec: ScenarioSpec
    events: list[Any]
    topology: ev.Topology
    summary: dict[str, Any]
    compare: Any = None
    claims: list[dict[str, Any]] = field(default_factory=list)
    clock: str = "model"  # a serving run: steps a whole-model step apart (layerscope.result.SimResult.clock)


def _kernel(t: float, name: str, kind: str, dur: float, stream: str = "compute") -> ev.KernelEvent:
    return ev.KernelEvent(
        t_us=t, name=name, stage=name, stage_kind=kind, phase="decode", stream=stream, start_us=t, dur_us=dur,  # type: ignore[arg-type]
        flops=1e9, bytes=1e6, bound="memory", hbm_util=0.5, l2_hit=0.2, shapes="x[64,4096]",
    )


class _Pool:
    def __init__(self) -> None:
        self.free = [(b, s) for s in range(CAPACITY) for b in range(BANKS)]
        self.used = [0] * BANKS

    def take(self) -> tuple[int, int] | None:
        if not self.free:
            return None
        b, s = self.free.pop(0)
        self.used[b] += 1
        return b, s

    def give(self, page: tuple[int, int]) -> None:
        self.used[page[0]] -= 1
        self.free.append(page)


def fake_serving(spec: ScenarioSpec) -> FakeServingResult:
    """The run: arrivals every 30 µs, steps of LAYER_US * (0.5 + tokens / BUDGET) µs, one collective per step."""
    reqs = [_Req(i, n, o, 30.0 * i) for i, (n, o) in enumerate(zip(INPUTS, OUTPUTS, strict=True))]
    out: list[Any] = [
        DeploymentEvent(
            t_us=0.0, gpu=spec.gpu, num_gpus=8, tp=8, ep=1, moe_tp=8, weight_dtype="bf16", kv_dtype="bf16",
            gpu_memory_utilization=0.9, cuda_graphs=True, async_scheduling=True, cuda_graph_memory_profiled=True,
            max_model_len=4096,
            per_gpu={"capacity_gib": 139.8, "weights_gib": 54.8, "activation_gib": 3.1, "cuda_graph_gib": 0.6,
                     "non_torch_gib": 0.4, "kv_cache_gib": 66.9, "kv_tokens": 358_000.0,
                     "kv_bytes_per_token": 196_608.0, "max_concurrency": 87.4},
        )
    ]
    pool, running, waiting, t, index = _Pool(), [], [], 0.0, 0
    pending = list(reqs)
    shared: tuple[int, int] | None = None

    def emit(r: _Req, what: str, at: float) -> None:
        out.append(RequestEvent(t_us=at, request_id=r.id, what=what, input_len=r.input_len,  # type: ignore[arg-type]
                                output_len=r.output_len, num_computed_tokens=r.computed, num_output_tokens=r.out))

    refs: dict[tuple[int, int], int] = {}  # page -> requests holding it (2 for the shared prefix block)

    def release(r: _Req) -> None:
        for p in r.pages:
            refs[p] -= 1
            if not refs[p]:
                pool.give(p)

    def preempt(at: float) -> _Req:
        victim = running.pop()  # the most recently admitted: free its pages, requeue it first (recompute)
        release(victim)
        out.append(PageFree(t_us=at, owner=f"req{victim.id}", banks=[p[0] for p in victim.pages],
                            slots=[p[1] for p in victim.pages], request_id=victim.id))
        victim.pages, victim.computed = [], 0
        emit(victim, "preempted", at)
        waiting.insert(0, victim)
        return victim

    def grow(r: _Req, n: int, phase: str, at: float) -> bool:
        """Pages for r's next n tokens; False if the pool is out of pages (nothing taken)."""
        need = -(-(r.computed + n) // PAGE) - len(r.pages)
        if need > len(pool.free):
            return False
        pages = [p for p in (pool.take() for _ in range(need)) if p is not None]
        if r.id == 5 and shared is not None and refs.get(shared) and not r.pages and pages:
            pool.give(pages[0])  # request 5 reuses request 1's first block: a prefix-cache hit
            pages[0] = shared
        for p in pages:
            refs[p] = refs.get(p, 0) + 1
        if pages:
            out.append(PageAlloc(t_us=at, owner=f"req{r.id}", phase=phase,
                                 logical=list(range(len(r.pages), len(r.pages) + len(pages))),
                                 banks=[p[0] for p in pages], slots=[p[1] for p in pages], request_id=r.id))
        r.pages += pages
        return True

    while pending or running or waiting:
        while pending and pending[0].arrive <= t:
            r = pending.pop(0)
            emit(r, "arrive", r.arrive)
            waiting.append(r)
        if not running and not waiting:
            t = pending[0].arrive
            continue
        sched: list[tuple[_Req, int]] = []
        budget = BUDGET
        for r in list(running):  # decode first: the one token sampled last step
            if r not in running or not r.first or r.input_len + r.out - r.computed != 1:
                continue
            while not grow(r, 1, "decode", t):
                if preempt(t) is r:
                    break
            if r in running:
                sched.append((r, 1))
                budget -= 1
        for r in running + list(waiting):  # then prefill chunks: partial ones first, then waiting FCFS
            if budget <= 0 or len(sched) >= MAX_SEQS:
                break
            need = r.input_len + r.out - r.computed
            if any(q is r for q, _ in sched) or need <= 0:
                continue
            n = min(budget, need)
            if not grow(r, n, "prefill", t):
                break
            if r in waiting:
                waiting.remove(r)
                running.append(r)
                emit(r, "scheduled", t)
            if r.id == 1 and shared is None:
                shared = r.pages[0]
            sched.append((r, n))
            budget -= n
        total = sum(n for _, n in sched)
        dur = LAYER_US * (0.5 + total / BUDGET)
        decode = sum(1 for r, n in sched if n == 1 and r.first)
        hit = any(r.id == 5 and r.computed == 0 for r, _ in sched)
        out.append(StepEvent(t_us=t, index=index, start_us=t, dur_us=dur, model_dur_us=dur * MODEL_LAYERS,
                             num_seqs=len(sched), prefill_tokens=total - decode, decode_tokens=decode,
                             token_budget=BUDGET, request_ids=[r.id for r, _ in sched],
                             num_tokens=[n for _, n in sched], cached_blocks=1 if hit else 0))
        out.append(_kernel(t, "fused_moe_kernel", "moe", dur * 0.8))
        out.append(_kernel(t + dur * 0.8, "all_reduce", COLLECTIVE, dur * 0.2, "comm"))
        end = t + dur
        for r, n in sched:
            r.computed += n
            if r.computed < r.input_len + r.out:
                continue
            r.out += 1  # the step that computed a request's last known token samples its next one
            if not r.first:
                r.first = True
                emit(r, "first_token", end)
            if r.out >= r.output_len:
                running.remove(r)
                release(r)
                out.append(PageFree(t_us=end, owner=f"req{r.id}", banks=[p[0] for p in r.pages],
                                    slots=[p[1] for p in r.pages], request_id=r.id))
                r.pages = []
                emit(r, "finished", end)
        out.append(ev.BanksEvent(t_us=end, used=list(pool.used), capacity=CAPACITY))
        t, index = end, index + 1
        assert index < 2000, "the fake run must end"
    assert not any(pool.used), "every page is returned"
    summary = {"completed": len(reqs), "duration": t * MODEL_LAYERS / 1e6, "num_preemptions":
               sum(1 for e in out if getattr(e, "what", "") == "preempted")}
    out.append(ev.SummaryEvent(t_us=t, figures=summary))
    phase = ev.PhaseTopology(nodes=[ev.TopologyNode(id="experts", label="experts", kind="moe")], edges=[])
    topo = ev.Topology(model=spec.model, runtime=spec.runtime, prefill=phase, decode=phase)
    return FakeServingResult(spec, out, topo, summary)
