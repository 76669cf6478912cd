"""The article's stated figures, as data, beside what a LayerScope run computes.

CLAIMS is the list of what the design article states (as quoted in the project's issues; the
article itself is not in the source material). build_claims(result) measures each one on a run
(summary figures, events, and the numpy error measurements of model/numerics.py) and gives a
verdict: "consistent" within the claim's tolerance, or "off by N x". Nothing here produces the
stated number from itself: a row whose run does not exercise the mechanism says so.

Rows with stated=None are figures the article gives but the source material does not quote:
LayerScope shows what it computes and never invents the article's number.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from layerscope.events import ChunkEvent, DecodeStepEvent, KernelEvent, MemoryEvent, PageAllocEvent
from layerscope.model.config import preset
from layerscope.tour import SimResultLike

Kind = Literal["value", "at_most", "exact"]
GIB = 1024**3
NOT_QUOTED = "the article's figure is not quoted in the source material"
NOT_EXERCISED = "not exercised by this run"
SEQ_OWNERS_EXCLUDED = frozenset({"hint", "tenant"})


@dataclass(frozen=True)
class Claim:
    """One figure the article states. `kind`: value (within +-tolerance, relative), at_most (an upper bound),
    exact (a setting or count that must match)."""

    id: str
    what: str
    stated: float | None
    unit: str
    where: str  # where the article states it (as quoted in the issues)
    how: str  # how LayerScope computes the simulated value
    kind: Kind = "value"
    tolerance: float = 0.25


_ISSUE3 = "article, quoted in issue 3 (runtime simulator)"
_ISSUE5 = "article, listed in issue 5 (claims panel)"

CLAIMS: list[Claim] = [
    Claim("prefill_layer", "Prefill time of one layer", 42.0, "ms", _ISSUE3,
          "sum of one layer's prefill kernel times for the run's prompt (summary prefill_layer_us); the "
          "article's prompt length is not quoted"),
    Claim("decode_step", "Decode step latency, whole model", 8.3, "ms", _ISSUE3,
          "median whole-model decode step after the first (decode_step events, model_latency_us)"),
    Claim("decode_pipeline", "Five-stage decode pipeline time", 7.92, "ms", _ISSUE3,
          "median sum of the decode stage times of a step x layers (decode_step events, stage_us)"),
    Claim("decode_no_allocator", "Decode step without the bank-aware allocator", 22.0, "ms", _ISSUE3,
          "median whole-model decode step of the run (or its compare run) that uses the naive allocator"),
    Claim("first_step_overhead", "First-step switch-over: quant context switch 1.2 + init 0.8 + L2 warm-up 0.3",
          2.3, "ms", _ISSUE3, "first decode step minus the median later step, whole model"),
    Claim("decode_sla", "Decode steps stay within the latency SLA", 10.0, "ms", _ISSUE3,
          "p99 whole-model decode step latency (decode_step events)", kind="at_most", tolerance=0.0),
    Claim("chunk_size", "Default prefill chunk size", 4096, "tokens", _ISSUE3,
          "size of the scheduler's default-reason chunks (chunk events)", kind="exact"),
    Claim("chunk_size_low_mem", "Chunk size when free HBM is low", 2048, "tokens", _ISSUE3,
          "size of the scheduler's low-memory chunks (chunk events)", kind="exact"),
    Claim("chunk_threshold", "Chunks shrink below this much free HBM", 12.0, "GiB", _ISSUE3,
          "free HBM when the scheduler first chose a low-memory chunk (memory + chunk events)", kind="at_most",
          tolerance=0.0),
    Claim("attention_launches", "Prefill attention launches: one per 4096-token chunk", None, "launches", _ISSUE5,
          "prefill attention kernels launched (summary num_attention_launches)", kind="exact"),
    Claim("page_size", "KV page size (one new page every page-size decode tokens)", 256, "tokens", _ISSUE3,
          "median decode steps between the sequence's new pages: the memory staircase (page_alloc events)",
          kind="exact"),
    Claim("banks", "KV cache banks", 32, "banks", _ISSUE3, "banks in the run's bank snapshots (banks events)",
          kind="exact"),
    Claim("lut_sigmoid", "LUT sigmoid (2048 entries, interpolated) max error", 1e-4, "abs", _ISSUE5,
          "max |lut_sigmoid(x) - sigmoid(x)| measured by model/numerics.py", kind="at_most", tolerance=0.0),
    Claim("shared_rmsnorm", "Shared-statistics RMSNorm degradation", 0.03, "%", _ISSUE5,
          "relative output error of decode RMSNorm with prefill statistics, measured by model/numerics.py",
          kind="at_most", tolerance=0.0),
    Claim("weight_bits", "Weights are 2-bit ('a22b' read as asymmetric 2-bit)", 2.0, "bits/weight", _ISSUE5,
          "weight bytes per layer x 8 / parameters per layer for the run's model (scales included)",
          tolerance=0.3),
    Claim("dequant_share", "Share of prefill time in 2-bit dequant + matmul", None, "%", _ISSUE5,
          "time of prefill kernels named *dequant* / prefill layer time (kernel events)"),
    Claim("page_hint_jitter", "Decode jitter with the page hint", None, "us", _ISSUE5,
          "summary jitter_us of the run with decode_page_hint on (or its compare run)"),
    Claim("prefill_hbm_util", "HBM bandwidth utilisation, prefill", None, "%", _ISSUE5,
          "time-weighted HBM utilisation of prefill kernels (summary prefill_hbm_util)"),
    Claim("decode_hbm_util", "HBM bandwidth utilisation, decode", None, "%", _ISSUE5,
          "time-weighted HBM utilisation of decode kernels (summary decode_hbm_util)"),
    Claim("prefill_l2_hit", "L2 hit rate, prefill", None, "%", _ISSUE5,
          "byte-weighted L2 hit rate of prefill kernels (summary prefill_l2_hit)"),
    Claim("decode_l2_hit", "L2 hit rate, decode", None, "%", _ISSUE5,
          "byte-weighted L2 hit rate of decode kernels (summary decode_l2_hit)"),
]  # fmt: skip

# Per-stage shares (stated by the article, not quoted): added per run, one row per stage and phase.
STAGE_SHARE_ROWS = 4


@dataclass
class Measured:
    value: float | None
    physics: str = ""  # one line: why the value is what it is
    stated: float | None = None  # a stated figure the claim derives from the run (launch count rule)


# -- reading a run ----------------------------------------------------------------------------------
class _Run:
    """Typed views of one run's events, computed once."""

    def __init__(self, result: SimResultLike) -> None:
        self.result = result
        self.spec = result.spec
        self.summary = result.summary
        ev = result.events
        self.kernels = [e for e in ev if isinstance(e, KernelEvent)]
        self.steps = sorted((e for e in ev if isinstance(e, DecodeStepEvent)), key=lambda e: e.step)
        self.chunks = [e for e in ev if isinstance(e, ChunkEvent)]
        self.memory = [e for e in ev if isinstance(e, MemoryEvent)]
        self.allocs = [e for e in ev if isinstance(e, PageAllocEvent)]
        self.banks = [e for e in ev if getattr(e, "kind", "") == "banks"]
        self.layers = preset(self.spec.model).num_hidden_layers if self.spec.model else 1

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

    def later_steps_ms(self) -> list[float]:
        return [s.model_latency_us / 1e3 for s in self.steps if s.step > 0]


def _sum_bytes_flops(kernels: list[KernelEvent]) -> tuple[float, float, float]:
    return sum(k.bytes for k in kernels), sum(k.flops for k in kernels), sum(k.dur_us for k in kernels)


def _roofline_line(run: _Run, phase: str) -> str:
    """Bytes moved / HBM bandwidth and FLOPs / peak, for one prefill layer or one steady decode step (whole model)."""
    from layerscope.hardware.gpus import gpu

    if phase == "prefill":
        ks, per, scale, what = run.phase_kernels("prefill"), 1, 1, "per prefill layer"
    else:
        ks = [k for k in run.phase_kernels("decode") if k.step is not None and k.step > 0]
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
    return Measured(v / 1e3, f"{run.spec.prompt_len} tokens on {run.spec.gpu}: " + _roofline_line(run, "prefill"))


def _m_decode_step(run: _Run) -> Measured:
    later = run.later_steps_ms()
    if not later:
        return Measured(None)
    med = statistics.median(later)
    layer = statistics.median(s.latency_us for s in run.steps if s.step > 0)
    return Measured(med, f"{layer:.1f} us per layer x {run.layers} layers; " + _roofline_line(run, "decode"))


def _m_decode_pipeline(run: _Run) -> Measured:
    later = [s for s in run.steps if s.step > 0 and s.stage_us]
    if not later:
        return Measured(None)
    sums = [sum(s.stage_us.values()) for s in later]
    med = statistics.median(sums)
    top = max(later[0].stage_us.items(), key=lambda kv: kv[1])
    return Measured(
        med * run.layers / 1e3,
        f"{med:.1f} us of stages per layer x {run.layers} layers; largest stage {top[0]} ({top[1]:.1f} us)",
    )


def _naive_run(run: _Run) -> _Run | None:
    if run.spec.allocator == "naive":
        return run
    c = run.result.compare
    return _Run(c) if c is not None and c.spec.allocator == "naive" else None


def _m_no_allocator(run: _Run) -> Measured:
    naive = _naive_run(run)
    if naive is None or not naive.later_steps_ms():
        return Measured(None)
    med = statistics.median(naive.later_steps_ms())
    cross = naive.fig("cross_bank_reads")
    ctx = naive.steps[-1].context_len
    return Measured(med, f"naive placement at {ctx} tokens of context: {cross or 0:.0f} cross-bank page reads")


def _m_first_step(run: _Run) -> Measured:
    from layerscope.model.config import preset
    from layerscope.runtime.plan import get_runtime

    later = run.later_steps_ms()
    if not run.steps or run.steps[0].step != 0 or not later:
        return Measured(None)
    if not get_runtime(run.spec.runtime).switch_over(preset(run.spec.model)):
        return Measured(None)  # a runtime with no switch-over (vllm): the first step differs only by noise
    first = run.steps[0].model_latency_us / 1e3
    extra = first - statistics.median(later)
    return Measured(extra, f"first step {first:.2f} ms vs median {statistics.median(later):.2f} ms")


def _m_sla(run: _Run) -> Measured:
    if not run.steps:
        return Measured(None)
    lat = sorted(s.model_latency_us / 1e3 for s in run.steps)
    p99 = lat[min(len(lat) - 1, math.ceil(0.99 * len(lat)) - 1)]
    over = sum(s.over_sla for s in run.steps)
    return Measured(p99, f"{over} of {len(run.steps)} steps over the run's {run.spec.sla_ms:g} ms SLA")


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


def _m_launches(run: _Run) -> Measured:
    v = run.fig("num_attention_launches")
    if v is None:
        v = float(sum(1 for k in run.phase_kernels("prefill") if k.stage == "attention"))
    rule = math.ceil(run.spec.prompt_len / 4096)
    return Measured(v, f"ceil({run.spec.prompt_len} / 4096) = {rule} by the article's rule; chunks used: "
                    f"{len(run.chunks)}", stated=float(rule))  # fmt: skip


def _m_page_size(run: _Run) -> Measured:
    if not run.steps:
        return Measured(None)
    step_times = [s.t_us for s in run.steps]
    seq_decode = [a for a in run.allocs if a.phase == "decode" and a.owner not in SEQ_OWNERS_EXCLUDED]
    at_step = sorted({sum(1 for t in step_times if t <= a.t_us) for a in seq_decode})
    gaps = [b - a for a, b in zip(at_step, at_step[1:], strict=False) if b > a]
    if not gaps:
        return Measured(None)
    kv = preset(run.spec.model).kv_bytes_per_token_per_layer() * run.spec.effective_page_size
    chosen = f"this run sets page_size={run.spec.page_size}; " if run.spec.page_size is not None else ""
    return Measured(
        float(statistics.median(gaps)),
        f"{chosen}{len(seq_decode)} new pages in {len(run.steps)} decode steps; "
        f"one page = {kv / 1024:.0f} KiB per layer",
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
        bound = [k.bound for k in run.phase_kernels(phase)]
        mem = sum(b == "memory" for b in bound)
        return Measured(100 * v, f"{mem} of {len(bound)} {phase} kernels memory-bound")

    return measure


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
    "prefill_l2_hit": _m_util("prefill_l2_hit", "prefill"),
    "decode_l2_hit": _m_util("decode_l2_hit", "decode"),
}
assert set(_MEASURE) == {c.id for c in CLAIMS}, "every claim needs a measurement"


# -- verdicts -----------------------------------------------------------------------------------------
def verdict(kind: Kind, stated: float | None, simulated: float | None, tolerance: float) -> str:
    """'consistent', 'off by N x', 'not stated' (no article figure quoted) or 'not exercised by this run'."""
    if simulated is None:
        return NOT_EXERCISED
    if stated is None:
        return "not stated"
    if kind == "at_most" and simulated <= stated * (1 + tolerance):
        return "consistent"
    if kind == "exact" and simulated == stated:
        return "consistent"
    if kind == "value" and stated != 0 and simulated > 0:
        ratio = simulated / stated
        if 1 / (1 + tolerance) <= ratio <= 1 + tolerance:
            return "consistent"
    return f"off by {off_factor(stated, simulated):.3g}x"


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
            rows.append({
                "id": f"share_{phase}_{stage}",
                "claim": f"Share of {phase} time in {stage}",
                "stated": None,
                "simulated": 100 * float(share),
                "unit": "%",
                "verdict": "not stated",
                "explanation": f"{NOT_QUOTED}; {us:.1f} us {unit}, {bound}-bound",
                "where": _ISSUE5,
                "how": f"summary {prefix}{stage}: the stage's fraction of the phase's kernel time",
            })  # fmt: skip
    return rows


def build_claims(result: SimResultLike) -> list[dict[str, Any]]:
    """The claims table for one run: {id, claim, stated, simulated, unit, verdict, explanation, where, how}."""
    run = _Run(result)
    rows = []
    for c in CLAIMS:
        m = _MEASURE[c.id](run)
        stated = c.stated if c.stated is not None else m.stated
        v = verdict(c.kind, stated, m.value, c.tolerance)
        if c.stated is None and m.stated is None:
            explanation = f"{NOT_QUOTED}; {m.physics}" if m.physics else NOT_QUOTED
        elif m.value is None:
            explanation = f"{NOT_EXERCISED}: {c.how}"
        else:
            direction = _direction(stated, m.value) if v != "consistent" else ""
            explanation = "; ".join(p for p in (direction, m.physics) if p)
        rows.append({
            "id": c.id,
            "claim": c.what,
            "stated": stated,
            "simulated": m.value,
            "unit": c.unit,
            "verdict": v,
            "explanation": explanation,
            "where": c.where,
            "how": c.how,
        })  # fmt: skip
    rows.extend(_stage_share_rows(run))
    return rows
