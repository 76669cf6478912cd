"""The article's stated figures, as data, beside what LayerScope computes: like with like.

CLAIMS is the list of what the design article states (as quoted in the project's issues; the article itself is
not in the source material). Each claim is evaluated where the article made it:

- scope "article": a figure the article measured in its own setting (one layer at 128K tokens of context on an
  A100 80GB, the article's runtime and model). It is evaluated on a probe run of that setting (ARTICLE_SETTING,
  simulated once per process and cached), whatever scenario is open; the open run's own figure is given beside
  it (`run`), so a preset that runs 200 tokens on an H100 never makes the 42 ms claim "off by 715x".
- scope "run": a mechanism the open run exercises (chunk sizes, launches, pages, banks, SLA, numerics).

Verdicts (VERDICTS): consistent (within the claim's tolerance), off (`factor` says how many times apart),
not-exercised (the setting does not exercise the mechanism, or LayerScope does not model it), not-stated (the
article's figure is not quoted in the source material), input (the article's own constants, given to the
simulator: nothing to compare), setting (the scenario chose another page or chunk size than the article's
default: a choice, not a claim). Decode latencies are read on the steady pipeline; steps with host re-fetches,
migrations, faults or the switch-over are reported as what they are.

Nothing here produces a stated number from itself.
"""

from __future__ import annotations

import bisect
import functools
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from layerscope.events import (
    ChunkEvent,
    DecodeStepEvent,
    FaultEvent,
    KernelEvent,
    MemoryEvent,
    PageAllocEvent,
    PageMigrateEvent,
)
from layerscope.model.config import preset
from layerscope.result import SimResult
from layerscope.scenario import ScenarioSpec

Kind = Literal["value", "at_most", "exact"]
Scope = Literal["article", "run"]
Verdict = Literal["consistent", "off", "not-exercised", "not-stated", "input", "setting"]
VERDICTS: tuple[str, ...] = ("consistent", "off", "not-exercised", "not-stated", "input", "setting")
GIB = 1024**3
NOT_QUOTED = "the article's figure is not quoted in the source material"
NOT_EXERCISED = "not exercised"
NOT_MODELLED = (
    "not modelled: LayerScope prices L2 only for data a kernel declares resident (an embedding row, a lookup "
    "table); reuse of weights, K/V and activations in L2 across tiles, heads and chunks is not modelled, so no "
    "hit rate is shown rather than a number nobody computed"
)
SEQ_OWNERS_EXCLUDED = frozenset({"hint", "tenant", "pressure"})
TIMING_FAULTS = frozenset({"memory_contention", "stale_chunk_metadata"})  # faults that change decode step times

# The article's defaults for the settings it states (a scenario may choose others: then the row says so).
ARTICLE_PAGE_SIZE = 256
ARTICLE_CHUNK_SIZE = 4096
ARTICLE_LOW_MEM_CHUNK_SIZE = 2048
ARTICLE_THRESHOLD_GIB = 12.0
ARTICLE_BANKS = 32

# The article's own setting: one layer at 128K tokens of context on an A100 80GB (issue 9), its runtime and its
# model, the article's chunk/page/bank defaults. 64 decode steps are enough for a steady median. free_hbm_gib:
# an 80 GB A100 holds 74.5 GiB; the 2-bit weights of 94 layers take 1.4 GiB (model/config.py), activations and
# the runtime ~3 GiB, so ~70 GiB are left for the KV cache. The whole model's KV at 128K (94 GiB) does not fit:
# the probe evicts and re-fetches, and its rows say so.
ARTICLE_SETTING: dict[str, Any] = dict(
    name="article-setting",
    title="The article's own setting: one layer at 128K context on an A100 80GB",
    model="article",
    runtime="article",
    gpu="a100-80g-sxm",
    prompt_len=131072,
    decode_steps=64,
    free_hbm_gib=70.0,
)
ARTICLE_SETTING_TEXT = (
    "the article's setting (probe run): article runtime and model on a100-80g-sxm, 131072-token prompt, "
    "256-token pages, 4096-token chunks"
)


@functools.lru_cache(maxsize=2)
def article_run(allocator: str = "bank_aware") -> SimResult:
    """The probe: the article's setting simulated once per process (about 0.1 s, bounded by ARTICLE_SETTING)."""
    from layerscope.runtime.engine import simulate  # the engine is heavy and imports this module's users

    return simulate(ScenarioSpec(**ARTICLE_SETTING, allocator=allocator))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Claim:
    """One figure the article states. `kind`: value (within +-tolerance, relative), at_most (an upper bound),
    exact (a setting or count that must match). `scope`: where it is evaluated (module docstring)."""

    id: str
    what: str
    stated: float | None
    unit: str
    where: str  # where the article states it (as quoted in the issues)
    how: str  # how LayerScope computes the simulated value
    kind: Kind = "value"
    tolerance: float = 0.25
    scope: Scope = "run"


_ISSUE3 = "article, quoted in issue 3 (runtime simulator)"
_ISSUE5 = "article, listed in issue 5 (claims panel)"
_ISSUE9 = "article's Nsight profile, quoted in issue 9"

CLAIMS: list[Claim] = [
    Claim("prefill_layer", "Prefill time of one layer at 128K context", 42.0, "ms", _ISSUE3,
          "sum of one layer's prefill kernel times for the whole prompt (summary prefill_layer_us)", scope="article"),
    Claim("decode_step", "Decode step latency, whole model", 8.3, "ms", _ISSUE3,
          "median whole-model step of the steady pipeline: layer latency x layers + whole-model kernels once, "
          "steps with re-fetches, migrations or timing faults left out (decode_step and kernel events)",
          scope="article"),
    Claim("decode_pipeline", "Five-stage decode pipeline time", 7.92, "ms", _ISSUE3,
          "median sum of the decode stage times of a steady step, per-layer stages x layers (decode_step events)",
          scope="article"),
    Claim("decode_no_allocator", "Decode step without the bank-aware allocator", 22.0, "ms", _ISSUE3,
          "the steady decode step of the same setting with the naive allocator", scope="article"),
    Claim("first_step_overhead", "First-step switch-over: quant context switch 1.2 + init 0.8 + L2 warm-up 0.3",
          2.3, "ms", _ISSUE3, "the article's constants (runtime/article.py ArticleProfile), given as input"),
    Claim("decode_sla", "Decode steps stay within the latency SLA", 10.0, "ms", _ISSUE3,
          "whole-model decode step latencies against the run's SLA (decode_step events)", kind="at_most",
          tolerance=0.0),
    Claim("chunk_size", "Default prefill chunk size", ARTICLE_CHUNK_SIZE, "tokens", _ISSUE3,
          "size of the scheduler's default-reason chunks (chunk events)", kind="exact"),
    Claim("chunk_size_low_mem", "Chunk size when free HBM is low", ARTICLE_LOW_MEM_CHUNK_SIZE, "tokens", _ISSUE3,
          "size of the scheduler's low-memory chunks (chunk events)", kind="exact"),
    Claim("chunk_threshold", "Chunks shrink below this much free HBM", ARTICLE_THRESHOLD_GIB, "GiB", _ISSUE3,
          "free HBM when the scheduler first chose a low-memory chunk (memory + chunk events)", kind="at_most",
          tolerance=0.0),
    Claim("attention_launches", "Prefill attention launches: one per chunk", None, "launches", _ISSUE5,
          "prefill attention kernels launched (summary num_attention_launches) against ceil(tokens / size) over "
          "the chunk sizes the scheduler had in force (chunk events)", kind="exact"),
    Claim("page_size", "KV page size (one new page every page-size decode tokens)", ARTICLE_PAGE_SIZE, "tokens",
          _ISSUE3, "median decode steps between the sequence's new pages, restored pages left out: the memory "
          "staircase (page_alloc events)", kind="exact"),
    Claim("banks", "KV cache banks", ARTICLE_BANKS, "banks", _ISSUE3,
          "banks in the run's bank snapshots (banks events)", kind="exact"),
    Claim("lut_sigmoid", "LUT sigmoid (2048 entries, interpolated) max error", 1e-4, "abs", _ISSUE5,
          "max |lut_sigmoid(x) - sigmoid(x)| measured by model/numerics.py", kind="at_most", tolerance=0.0),
    Claim("shared_rmsnorm", "Shared-statistics RMSNorm degradation", 0.03, "%", _ISSUE5,
          "relative output error of decode RMSNorm with prefill statistics, measured by model/numerics.py",
          kind="at_most", tolerance=0.0),
    Claim("weight_bits", "Weights are 2-bit ('a22b' read as asymmetric 2-bit)", 2.0, "bits/weight", _ISSUE5,
          "weight bytes per layer x 8 / parameters per layer for the run's model (scales included)",
          tolerance=0.3),
    Claim("dequant_share", "Share of prefill time in 2-bit dequant + matmul", None, "%", _ISSUE5,
          "time of prefill kernels named *dequant* / prefill layer time (kernel events)", scope="article"),
    Claim("page_hint_jitter", "Decode jitter with the page hint", None, "us", _ISSUE5,
          "summary jitter_us of the run with decode_page_hint on (or its compare run)"),
    Claim("prefill_hbm_util", "HBM bandwidth utilisation, prefill", 89.0, "%", _ISSUE9,
          "time-weighted HBM utilisation of the per-layer prefill kernels (summary prefill_hbm_util)",
          scope="article"),
    Claim("decode_hbm_util", "HBM bandwidth utilisation, decode", 32.0, "%", _ISSUE9,
          "time-weighted HBM utilisation of the per-layer decode kernels (summary decode_hbm_util)",
          scope="article"),
    Claim("prefill_l2_hit", "L2 hit rate, prefill (below)", 40.0, "%", _ISSUE9, NOT_MODELLED, kind="at_most",
          tolerance=0.0, scope="article"),
    Claim("decode_l2_hit", "L2 hit rate, decode", 92.0, "%", _ISSUE9, NOT_MODELLED, scope="article"),
]  # fmt: skip

# Per-stage shares (stated by the article, not quoted): added per run, one row per stage and phase.
STAGE_SHARE_ROWS = 4


@dataclass
class Measured:
    value: float | None
    physics: str = ""  # one line: why the value is what it is
    stated: float | None = None  # a stated figure the claim derives from the run (launch count rule, SLA)
    verdict: Verdict | None = None  # a verdict the measurement decides itself (SLA: no factor)
    why_none: str = ""  # why value is None (not exercised / not modelled), when it is


# -- reading a run ----------------------------------------------------------------------------------
@dataclass
class _Step:
    """One decode step with what disturbed it."""

    event: DecodeStepEvent
    pipeline_ms: float  # whole-model time of the layer pipeline: no host traffic, no switch-over
    stage_ms: float  # sum of stage times, per-layer stages x layers, whole-model stages once
    effects: list[str] = field(default_factory=list)


class _Run:
    """Typed views of one run's events, computed once."""

    def __init__(self, result: SimResult) -> None:
        self.result = result
        self.spec = result.spec
        self.summary = result.summary
        ev = result.events
        self.kernels = [e for e in ev if isinstance(e, KernelEvent)]
        self.steps = sorted((e for e in ev if isinstance(e, DecodeStepEvent)), key=lambda e: e.step)
        self.chunks = [e for e in ev if isinstance(e, ChunkEvent)]
        self.memory = [e for e in ev if isinstance(e, MemoryEvent)]
        self.allocs = [e for e in ev if isinstance(e, PageAllocEvent)]
        self.migrations = [e for e in ev if isinstance(e, PageMigrateEvent)]
        self.faults = [e for e in ev if isinstance(e, FaultEvent)]
        self.banks = [e for e in ev if getattr(e, "kind", "") == "banks"]
        self.layers = preset(self.spec.model).num_hidden_layers if self.spec.model else 1
        self._annotated: list[_Step] | None = None

    def fig(self, key: str) -> float | None:
        v = self.summary.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def phase_kernels(self, phase: str) -> list[KernelEvent]:
        return [k for k in self.kernels if k.phase == phase]

    def prefill_us(self) -> float | None:
        v = self.fig("prefill_layer_us")
        if v is None and self.phase_kernels("prefill"):
            v = sum(k.dur_us for k in self.phase_kernels("prefill"))
        return v

    # -- decode steps and what disturbed them -------------------------------------------------------------
    def annotated(self) -> list[_Step]:
        if self._annotated is None:
            # one pass over the kernels and the migrations, not one per step (4096 steps x 20 000 launches)
            self._step_kernels: dict[int, list[KernelEvent]] = {}
            for k in self.kernels:
                if k.step is not None and k.phase == "decode" and k.stream != "copy":
                    self._step_kernels.setdefault(k.step, []).append(k)
            self._step_starts = [x.t_us for x in self.steps]
            self._migration_times = sorted(m.t_us for m in self.migrations)
            self._annotated = [self._annotate(s) for s in self.steps]
        return self._annotated

    def _annotate(self, s: DecodeStepEvent) -> _Step:
        mine = self._step_kernels.get(s.step, [])
        once = sum(k.dur_us for k in mine if k.scope == "model")
        switch = sum(k.dur_us for k in mine if k.stage == "switch_over")
        model_stages = {k.stage for k in mine if k.scope == "model"}
        pipeline = (s.latency_us - once) * self.layers + once - switch
        per_layer = sum(v for k, v in s.stage_us.items() if k not in model_stages)
        stages = per_layer * self.layers + sum(v for k, v in s.stage_us.items() if k in model_stages)
        step = _Step(s, pipeline / 1e3, stages / 1e3)
        if switch > 0:
            step.effects.append("switch-over")
        if s.refetched_pages:
            step.effects.append("re-fetch")
        if self._migrated(s):
            step.effects.append("migration")
        step.effects.extend(f"fault {f}" for f in self._faults_at(s))
        return step

    def _migrated(self, s: DecodeStepEvent) -> bool:
        starts = self._step_starts
        i = bisect.bisect_right(starts, s.t_us)
        end = starts[i] if i < len(starts) else math.inf
        j = bisect.bisect_left(self._migration_times, s.t_us)  # the first migration at or after the step's start
        return j < len(self._migration_times) and self._migration_times[j] < end

    def _faults_at(self, s: DecodeStepEvent) -> list[str]:
        out = []
        for f in self.spec.faults:
            if f.kind not in TIMING_FAULTS:
                continue
            if f.kind == "memory_contention":
                if f.at_step is not None and f.at_step <= s.step < f.at_step + f.count:
                    out.append(f.kind)
                continue
            inj = next((e.t_us for e in self.faults if e.fault == f.kind and e.action == "injected"), None)
            rec = next((e.t_us for e in self.faults if e.fault == f.kind and e.action == "recovered"), math.inf)
            if inj is not None and inj <= s.t_us < rec:
                out.append(f.kind)
        return out

    def steady(self) -> list[_Step]:
        """Steps after the first with nothing but the pipeline in them; if none, those without timing faults."""
        later = [s for s in self.annotated() if s.event.step > 0]
        clean = [s for s in later if not s.effects]
        return clean or [s for s in later if not any(e.startswith("fault") for e in s.effects)] or later


def _sum_bytes_flops(kernels: list[KernelEvent]) -> tuple[float, float, float]:
    return sum(k.bytes for k in kernels), sum(k.flops for k in kernels), sum(k.dur_us for k in kernels)


def _roofline_line(run: _Run, phase: str) -> str:
    """Bytes moved / HBM bandwidth and FLOPs / peak, for one prefill layer or one steady decode step (whole model)."""
    from layerscope.hardware.gpus import gpu

    if phase == "prefill":
        ks, per, scale, what = run.phase_kernels("prefill"), 1, 1, "per prefill layer"
    else:
        steady = {s.event.step for s in run.steady()}
        ks = [k for k in run.phase_kernels("decode") if k.step in steady and k.scope == "layer"]  # no host copies
        per, scale, what = max(1, len({k.step for k in ks})), run.layers, f"per decode step x {run.layers} layers"
    if not ks:
        return ""
    nbytes, flops, dur = (x * scale / per for x in _sum_bytes_flops(ks))
    g = gpu(run.spec.gpu)
    mem_ms, cmp_ms = nbytes / g.hbm_bw * 1e3, flops / g.bf16_flops * 1e3
    return (
        f"{nbytes / 1e9:.2f} GB / {g.hbm_bw / 1e12:.1f} TB/s = {mem_ms:.2f} ms vs {flops / 1e12:.2f} TFLOP / "
        f"{g.bf16_flops / 1e12:.0f} TFLOP/s = {cmp_ms:.2f} ms {what} ({'memory' if mem_ms > cmp_ms else 'compute'}"
        f"-bound at roofline)"
    )


def _m_prefill_layer(run: _Run) -> Measured:
    v = run.prefill_us()
    if v is None:
        return Measured(None)
    attn = sum(k.dur_us for k in run.phase_kernels("prefill") if k.stage_kind == "attention")
    share = f"attention {attn / 1e3:.2f} ms of it; " if attn > 0 else ""
    return Measured(
        v / 1e3, f"{run.spec.prompt_len} tokens on {run.spec.gpu}: {share}" + _roofline_line(run, "prefill")
    )


def _effects_line(run: _Run, clean: bool) -> str:
    """What the steady figure leaves out, each with its size: re-fetches, migrations, faults, the switch-over."""
    steps = [s for s in run.annotated() if s.event.step > 0]
    counts: dict[str, list[float]] = {}
    for s in steps:
        for e in s.effects:
            counts.setdefault(e, []).append(s.event.model_latency_us / 1e3 - s.pipeline_ms)
    parts = []
    for e, extra in sorted(counts.items()):
        if e.startswith("fault"):
            parts.append(f"{len(extra)} steps under {e}")
        else:
            parts.append(f"{len(extra)} steps with {e} (+{statistics.median(extra):.2f} ms each, median)")
    lead = "left out of the steady median" if clean else "kept apart from the pipeline figure"
    return f"{lead}: " + "; ".join(parts) if parts else ""


def _m_decode_step(run: _Run) -> Measured:
    steady = run.steady()
    if not steady:
        return Measured(None)
    clean = not any(s.effects for s in steady)
    med = statistics.median(s.pipeline_ms for s in steady)
    layer = statistics.median(s.event.latency_us for s in steady)
    over = f"over {len(steady)} steady steps" if clean else f"the layer pipeline of {len(steady)} steps"
    text = f"{layer:.1f} us per layer x {run.layers} layers, {over}; " + _roofline_line(run, "decode")
    effects = _effects_line(run, clean)
    return Measured(med, f"{text}; {effects}" if effects else text)


def _m_decode_pipeline(run: _Run) -> Measured:
    steady = [s for s in run.steady() if s.event.stage_us]
    if not steady:
        return Measured(None)
    med = statistics.median(s.stage_ms for s in steady)
    top = max(steady[0].event.stage_us.items(), key=lambda kv: kv[1])
    return Measured(med, f"stages x {run.layers} layers (whole-model stages once); largest stage {top[0]} "
                    f"({top[1]:.1f} us per layer)")  # fmt: skip


def _naive_run(run: _Run) -> _Run | None:
    if run.spec.allocator == "naive":
        return run
    c = run.result.compare
    return _Run(c) if c is not None and c.spec.allocator == "naive" else None


def _m_no_allocator(run: _Run) -> Measured:
    naive = _naive_run(run)
    if naive is None:
        return Measured(None, why_none="no run with the naive allocator here (neither this run nor its compare)")
    m = _m_decode_step(naive)
    if m.value is None:
        return m
    cross = naive.fig("cross_bank_reads")
    ctx = naive.steps[-1].context_len
    tenants = (
        f", {naive.spec.fragmentation:.0%} of pages held by other tenants"
        if naive.spec.fragmentation
        else (", no other tenants: first-free placement is as sequential as bank-aware placement")
    )
    return Measured(m.value, f"naive placement at {ctx} tokens of context{tenants}: {cross or 0:.0f} cross-bank "
                    f"page reads; {m.physics}")  # fmt: skip


def _m_first_step(run: _Run) -> Measured:
    steps = run.annotated()
    later = [s for s in run.steady()]
    if not steps or steps[0].event.step != 0 or not later:
        return Measured(None)
    from layerscope.runtime.plan import get_runtime

    if not get_runtime(run.spec.runtime).switch_over(preset(run.spec.model)):
        return Measured(None)  # a runtime with no switch-over (vllm): the first step differs only by noise
    first = steps[0].event.model_latency_us / 1e3
    med = statistics.median(s.event.model_latency_us / 1e3 for s in later)
    others = [e for e in steps[0].effects if e != "switch-over"]
    also = f" (it also carries {', '.join(others)})" if others else ""
    return Measured(
        first - med, f"this run's first step is {first - med:.2f} ms above the steady median{also}", verdict="input"
    )


def _m_sla(run: _Run) -> Measured:
    steps = run.annotated()
    if not steps:
        return Measured(None)
    sla = run.spec.sla_ms
    lat = [s.event.model_latency_us / 1e3 for s in steps]
    over = [(s, x - sla) for s, x in zip(steps, lat, strict=True) if x > sla]
    worst = max(lat)
    if not over:
        return Measured(
            worst,
            f"all {len(steps)} steps within the {sla:g} ms SLA (worst {worst:.2f} ms)",
            stated=sla,
            verdict="consistent",
        )
    by: dict[str, int] = {}
    for s, _ in over:
        for e in s.effects or ["nothing but the steady pipeline"]:
            by[e] = by.get(e, 0) + 1
    why = ", ".join(f"{n} with {e}" for e, n in sorted(by.items()))
    misses = [m for _, m in over]
    return Measured(worst, f"{len(over)} of {len(steps)} steps miss the {sla:g} ms SLA, by {min(misses):.2f} to "
                    f"{max(misses):.2f} ms (median {statistics.median(misses):.2f} ms; worst step {worst:.2f} ms); "
                    f"{why}", stated=sla, verdict="off")  # fmt: skip


def _chunk_size(run: _Run, reason: str) -> Measured:
    sizes = [c.chunk_size for c in run.chunks if c.reason == reason]
    if not sizes:
        return Measured(None)
    return Measured(float(max(sizes)), f"{len(sizes)} {reason} chunk(s) of a {run.spec.prompt_len}-token prompt")


def _m_threshold(run: _Run) -> Measured:
    low = [c for c in run.chunks if c.reason == "low_memory"]
    if not low:
        return Measured(None)
    before = [m for m in run.memory if m.t_us <= low[0].t_us]
    if not before:
        return Measured(None)
    free = before[-1].hbm_free_bytes / GIB
    return Measured(free, f"{free:.1f} GiB free before chunk {low[0].chunk}; threshold set to "
                    f"{run.spec.low_mem_threshold_gib:g} GiB")  # fmt: skip


def chunk_runs(chunks: list[ChunkEvent]) -> list[tuple[int, int]]:
    """(size in force, tokens prefilled at that size) for each run of consecutive chunks of one size."""
    out: list[tuple[int, int]] = []
    for c in sorted(chunks, key=lambda c: c.chunk):
        n = c.token_end - c.token_start
        if out and out[-1][0] == c.chunk_size:
            out[-1] = (c.chunk_size, out[-1][1] + n)
        else:
            out.append((c.chunk_size, n))
    return out


def _m_launches(run: _Run) -> Measured:
    runs = chunk_runs(run.chunks)
    if not runs:
        return Measured(None)
    v = run.fig("num_attention_launches")
    if v is None:
        v = float(sum(1 for k in run.phase_kernels("prefill") if k.stage == "attention"))
    rule = sum(-(-tokens // size) for size, tokens in runs)
    terms = " + ".join(f"ceil({tokens} / {size})" for size, tokens in runs)
    return Measured(v, f"one launch per chunk over the chunk sizes in force: {terms} = {rule}; {v:.0f} launched",
                    stated=float(rule))  # fmt: skip


def _m_page_size(run: _Run) -> Measured:
    """The staircase: decode steps between NEW pages of the sequence (pages restored after an eviction, or
    re-allocated after a repair, are not the staircase)."""
    if not run.steps:
        return Measured(None)
    seen: set[int] = set()
    new_at: list[float] = []
    for a in run.allocs:  # time order
        if a.owner in SEQ_OWNERS_EXCLUDED:
            continue
        fresh = [p for p in a.logical if p not in seen]
        seen.update(a.logical)
        if fresh and a.phase == "decode":
            new_at.append(a.t_us)
    step_times = [s.t_us for s in run.steps]
    at_step = sorted({bisect.bisect_right(step_times, t) for t in new_at})
    gaps = [b - a for a, b in zip(at_step, at_step[1:], strict=False) if b > a]
    if not gaps:
        return Measured(None, why_none=f"{len(new_at)} new page(s) in {len(run.steps)} decode steps: a staircase "
                        "needs two")  # fmt: skip
    kv = preset(run.spec.model).kv_bytes_per_token_per_layer() * run.spec.effective_page_size
    restored = sum(1 for a in run.allocs if a.phase == "decode" and a.owner not in SEQ_OWNERS_EXCLUDED) - len(new_at)
    extra = f"; {restored} restored page allocation(s) left out" if restored > 0 else ""
    return Measured(
        float(statistics.median(gaps)),
        f"{len(new_at)} new pages in {len(run.steps)} decode steps{extra}; one page = {kv / 1024:.0f} KiB per layer",
    )


def _m_banks(run: _Run) -> Measured:
    if not run.banks:
        return Measured(None)
    b = run.banks[-1]
    return Measured(float(len(b.used)), f"{b.capacity} pages per bank")


@functools.lru_cache(maxsize=8)
def _numerics(seed: int) -> dict[str, float]:
    try:
        from layerscope.model.numerics import measure_all
    except ImportError:  # numerics module not installed in this build: the rows say "not exercised"
        return {}
    return {k: float(v) for k, v in measure_all(seed).items() if isinstance(v, int | float)}


def _find(measured: dict[str, float], key: str) -> tuple[str, float] | None:
    return (key, measured[key]) if key in measured else None


def _m_lut(run: _Run) -> Measured:
    hit = _find(_numerics(run.spec.seed), "sigmoid_lut_max_abs_error")
    if hit is None:
        return Measured(None)
    return Measured(hit[1], f"{hit[0]}: linear interpolation between 2048 table entries, error ~ h^2/8 x |sigmoid''|")


def _m_rmsnorm(run: _Run) -> Measured:
    hit = _find(_numerics(run.spec.seed), "shared_rmsnorm_rel_error")
    if hit is None:
        return Measured(None)
    return Measured(100 * hit[1], f"{hit[0]}: decode tokens normalised by the prefill RMS instead of their own")


def _m_weight_bits(run: _Run) -> Measured:
    cfg = preset(run.spec.model)
    bits = cfg.weight_bytes_per_layer() * 8 / cfg.params_per_layer
    note = {
        "int2": f"int2 + one fp16 scale and zero per {cfg.quant_group_size} weights",
        "bf16": "Qwen3-235B-A22B: 'A22B' means 22B active parameters; its weights ship in bf16",
    }.get(cfg.weight_dtype, f"weights stored as {cfg.weight_dtype}")
    return Measured(bits, f"{run.spec.model}: {note}")


def _m_dequant_share(run: _Run) -> Measured:
    pre = run.phase_kernels("prefill")
    total = sum(k.dur_us for k in pre)
    if not pre or total <= 0:
        return Measured(None)
    deq = sum(k.dur_us for k in pre if "dequant" in k.name)
    if deq == 0:
        return Measured(0.0, f"{run.spec.runtime} runtime with {run.spec.model}: no dequant kernel in prefill")
    return Measured(100 * deq / total, f"{deq / 1e3:.2f} ms of {total / 1e3:.2f} ms prefill layer time")


def _m_hint_jitter(run: _Run) -> Measured:
    pair = [run] + ([_Run(run.result.compare)] if run.result.compare is not None else [])
    on = next((r for r in pair if r.spec.decode_page_hint), None)
    if on is None or on.fig("jitter_us") is None:
        return Measured(None)
    off = next((r for r in pair if not r.spec.decode_page_hint), None)
    off_txt = f"; without the hint {off.fig('jitter_us'):.1f} us" if off and off.fig("jitter_us") is not None else ""
    res = on.fig("hint_reserved_pages")
    return Measured(on.fig("jitter_us"), f"hint reserves {res or 0:.0f} pages up front{off_txt}")


def _m_util(key: str, phase: str) -> Callable[[_Run], Measured]:
    def measure(run: _Run) -> Measured:
        v = run.fig(key)
        if v is None:
            return Measured(None)
        bound = [k.bound for k in run.phase_kernels(phase) if k.scope == "layer"]
        mem = sum(b == "memory" for b in bound)
        return Measured(100 * v, f"{mem} of {len(bound)} per-layer {phase} kernels memory-bound")

    return measure


def _m_not_modelled(run: _Run) -> Measured:
    return Measured(None, why_none=NOT_MODELLED)


_MEASURE: dict[str, Callable[[_Run], Measured]] = {
    "prefill_layer": _m_prefill_layer,
    "decode_step": _m_decode_step,
    "decode_pipeline": _m_decode_pipeline,
    "decode_no_allocator": _m_no_allocator,
    "first_step_overhead": _m_first_step,
    "decode_sla": _m_sla,
    "chunk_size": lambda r: _chunk_size(r, "default"),
    "chunk_size_low_mem": lambda r: _chunk_size(r, "low_memory"),
    "chunk_threshold": _m_threshold,
    "attention_launches": _m_launches,
    "page_size": _m_page_size,
    "banks": _m_banks,
    "lut_sigmoid": _m_lut,
    "shared_rmsnorm": _m_rmsnorm,
    "weight_bits": _m_weight_bits,
    "dequant_share": _m_dequant_share,
    "page_hint_jitter": _m_hint_jitter,
    "prefill_hbm_util": _m_util("prefill_hbm_util", "prefill"),
    "decode_hbm_util": _m_util("decode_hbm_util", "decode"),
    "prefill_l2_hit": _m_not_modelled,
    "decode_l2_hit": _m_not_modelled,
}
assert set(_MEASURE) == {c.id for c in CLAIMS}, "every claim needs a measurement"


# -- settings the scenario chose ----------------------------------------------------------------------
def _pages_setting(spec: ScenarioSpec) -> str | None:
    p = spec.effective_page_size
    if p == ARTICLE_PAGE_SIZE:
        return None
    why = "" if spec.page_size is not None else f" (the {spec.runtime} runtime's default block size)"
    return f"this scenario uses {p}-token pages{why}"


def _size_setting(value: float, default: float, text: str) -> str | None:
    return None if value == default else text


_SETTINGS: dict[str, Callable[[ScenarioSpec], str | None]] = {
    "page_size": _pages_setting,
    "chunk_size": lambda s: _size_setting(s.chunk_size, ARTICLE_CHUNK_SIZE,
                                          f"this scenario uses {s.chunk_size}-token chunks"),
    "chunk_size_low_mem": lambda s: _size_setting(s.low_mem_chunk_size, ARTICLE_LOW_MEM_CHUNK_SIZE,
                                                  f"this scenario uses {s.low_mem_chunk_size}-token low-memory "
                                                  "chunks"),
    "chunk_threshold": lambda s: _size_setting(s.low_mem_threshold_gib, ARTICLE_THRESHOLD_GIB,
                                               f"this scenario shrinks chunks below {s.low_mem_threshold_gib:g} "
                                               "GiB free"),
    "banks": lambda s: _size_setting(s.banks, ARTICLE_BANKS, f"this scenario uses {s.banks} banks"),
}  # fmt: skip


def _run_setting(spec: ScenarioSpec) -> str:
    return (f"this run: {spec.runtime} runtime, {spec.model} on {spec.gpu}, {spec.prompt_len}-token prompt, "
            f"{spec.decode_steps} decode steps")  # fmt: skip


# -- verdicts -----------------------------------------------------------------------------------------
def verdict(kind: Kind, stated: float | None, simulated: float | None, tolerance: float) -> Verdict:
    """consistent | off | not-exercised (nothing simulated) | not-stated (no article figure quoted)."""
    if simulated is None:
        return "not-exercised"
    if stated is None:
        return "not-stated"
    if kind == "at_most" and simulated <= stated * (1 + tolerance):
        return "consistent"
    if kind == "exact" and simulated == stated:
        return "consistent"
    if kind == "value" and stated != 0 and simulated > 0:
        ratio = simulated / stated
        if 1 / (1 + tolerance) <= ratio <= 1 + tolerance:
            return "consistent"
    return "off"


def off_factor(stated: float, simulated: float) -> float:
    """How many times apart two figures are (>= 1); infinite when one is zero and the other is not."""
    a, b = abs(stated), abs(simulated)
    if a == b:
        return 1.0
    if min(a, b) == 0:
        return math.inf
    return max(a, b) / min(a, b)


def _direction(stated: float | None, simulated: float | None) -> str:
    if stated is None or simulated is None or simulated == stated:
        return ""
    return "simulated higher" if simulated > stated else "simulated lower"


def _row(c: Claim, m: Measured, own: Measured, run: _Run) -> dict[str, Any]:
    stated = m.stated if m.stated is not None else c.stated
    chosen = _SETTINGS[c.id](run.spec) if c.id in _SETTINGS else None
    factor: float | None = None
    if c.id == "first_step_overhead":
        v: Verdict = "input"
        explanation = (
            "the article's own constants (quant context switch 1.2 + init 0.8 + L2 warm-up 0.3 ms, "
            "runtime/article.py ArticleProfile), given to the simulator as input: nothing to compare"
        )
        if m.value is not None:
            explanation += f"; {m.physics}"
        elif run.spec.runtime != "article":
            explanation += f"; the {run.spec.runtime} runtime has no switch-over"
        return _out(c, stated, None, m.value, v, None, chosen or _run_setting(run.spec), explanation)  # fmt: skip
    if chosen is not None:
        v = "setting"
        follows = (
            "" if m.value is None else (f"; measured {m.value:g} {c.unit}" + (f" ({m.physics})" if m.physics else ""))
        )
        explanation = f"a setting, not a claim: the article's default is {c.stated:g} {c.unit}{follows}"
    else:
        v = m.verdict or verdict(c.kind, stated, m.value, c.tolerance)
        if v == "not-exercised":
            explanation = f"{NOT_EXERCISED}: {m.why_none or c.how}"
        elif c.stated is None and m.stated is None:
            explanation = f"{NOT_QUOTED}; {m.physics}" if m.physics else NOT_QUOTED
        elif v == "off" and m.verdict is None and stated is not None and m.value is not None:
            factor = off_factor(stated, m.value)
            explanation = "; ".join(p for p in (f"off by {factor:.3g}x", _direction(stated, m.value), m.physics) if p)
        else:
            explanation = m.physics
    if c.scope == "article":
        setting = ARTICLE_SETTING_TEXT + (", naive allocator" if c.id == "decode_no_allocator" else "")
        if own.value is not None:
            explanation += f"; this run ({run.spec.gpu}, {run.spec.prompt_len} tokens): {own.value:.4g} {c.unit}"
    else:
        setting = chosen or _run_setting(run.spec)
    return _out(c, stated, m.value, own.value, v, factor, setting, explanation)


def _out(c: Claim, stated: float | None, simulated: float | None, own: float | None, v: Verdict,
         factor: float | None, setting: str, explanation: str) -> dict[str, Any]:  # fmt: skip
    return {"id": c.id, "claim": c.what, "stated": stated, "simulated": simulated, "run": own, "unit": c.unit,
            "verdict": v, "factor": factor, "setting": setting, "explanation": explanation, "where": c.where,
            "how": c.how, "scope": c.scope}  # fmt: skip


# measured by model/numerics.py whatever the run: they concern a run only where its numpy layer runs
_NUMERICS_CLAIMS = {"lut_sigmoid", "shared_rmsnorm"}


def concerns(row: dict[str, Any], spec: ScenarioSpec) -> bool:
    """Whether a row concerns the open run (the claims panel shows these and folds the rest away): the article
    describes one request's layer, so none of its figures concerns a serving run (that run's panel shows its SLO
    figures instead); in a one-request run, a row concerns it when the run has its own figure for it, exercises
    it, and the article states it."""
    if spec.workload is not None and spec.workload.num_requests > 1:
        return False
    if row["id"] in _NUMERICS_CLAIMS and not spec.numerics:
        return False
    return row["run"] is not None and row["verdict"] not in ("not-exercised", "not-stated")


def _stage_share_rows(run: _Run) -> list[dict[str, Any]]:
    """The largest per-stage shares of each phase (summary share_<phase>_<stage>), with time per layer."""
    rows = []
    for phase in ("prefill", "decode"):
        prefix = f"share_{phase}_"
        shares = {k.removeprefix(prefix): v for k, v in run.summary.items() if k.startswith(prefix)}
        ks = run.phase_kernels(phase)
        steps = max(1, len({k.step for k in ks if k.step is not None})) if phase == "decode" else 1
        unit = "per step per layer" if phase == "decode" else "per layer"
        for stage, share in sorted(shares.items(), key=lambda kv: -float(kv[1]))[:STAGE_SHARE_ROWS]:
            mine = [k for k in ks if k.stage == stage]
            us = sum(k.dur_us for k in mine) / steps
            bound = max((k.bound for k in mine), key=lambda b: b == "memory", default="-")
            claim = Claim(
                f"share_{phase}_{stage}",
                f"Share of {phase} time in {stage}",
                None,
                "%",
                _ISSUE5,
                f"summary {prefix}{stage}: the stage's fraction of the phase's per-layer kernel time",
            )
            value = 100 * float(share)
            rows.append(_out(claim, None, value, value, "not-stated", None, _run_setting(run.spec),
                             f"{NOT_QUOTED}; {us:.1f} us {unit}, {bound}-bound"))  # fmt: skip
    return rows


def build_claims(result: SimResult, article: SimResult | None = None) -> list[dict[str, Any]]:
    """The claims table for one run: {id, claim, stated, simulated, run, unit, verdict, factor, setting,
    explanation, where, how, scope}. Article-scope claims are measured on `article` (default: the cached probe
    of ARTICLE_SETTING) and, beside it, on the run."""
    run = _Run(result)
    probes: dict[str, _Run] = {}

    def probe(claim: Claim) -> _Run:
        allocator = "naive" if claim.id == "decode_no_allocator" else "bank_aware"
        if allocator not in probes:
            given = article if article is not None and article.spec.allocator == allocator else None
            probes[allocator] = _Run(given if given is not None else article_run(allocator))
        return probes[allocator]

    rows = []
    for c in CLAIMS:
        own = _MEASURE[c.id](run)
        m = _MEASURE[c.id](probe(c)) if c.scope == "article" else own
        rows.append(_row(c, m, own, run))
    rows.extend(_stage_share_rows(run))
    for row in rows:
        row["concerns"] = concerns(row, result.spec)
    return rows
