"""The offline report: one self-contained HTML file a teacher can hand out.

build_report(result) -> str gives the scenario's settings, its summary, the guided tour with each
check's result, the claims table, and Plotly figures (kernel timeline, HBM memory, decode latency,
per-stage time, the bank map at key moments, expert routing for MoE runs). plotly.min.js is inlined
from the installed plotly package, so the file opens with no network.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from layerscope import __version__
from layerscope.claims import build_claims
from layerscope.events import (
    BanksEvent,
    CrcEvent,
    DecodeStepEvent,
    ExpertsEvent,
    FaultEvent,
    KernelEvent,
    MemoryEvent,
    NumericsEvent,
    PageAllocEvent,
    PageEvictEvent,
    PageFreeEvent,
    PageMigrateEvent,
    PhaseEvent,
    RequestEvent,
    StepEvent,
)
from layerscope.export.palette import palette
from layerscope.result import SimResult
from layerscope.runtime.deployment import scenario_placement
from layerscope.runtime.metrics import ServingMetrics
from layerscope.server.overview import main_label
from layerscope.tour import format_value, tour_results

GIB = 1024**3
MAX_TIMELINE_KERNELS = 3000  # keeps the file small; decode steps are sampled evenly beyond this
MAX_BANK_COLUMNS = 512  # bank-map heatmaps bin wider banks (a bin shows its most notable page state)
PLOT_CONFIG = {"displaylogo": False, "responsive": True}

# Bank-map page states, in order of how notable a state is when a heatmap bin holds several.
PAGE_STATES = ["free", "prefill", "decode", "hint", "other tenant", "evicted"]  # pressure pages count as a tenant
_P = palette("light")  # the dashboard's presenter palette: one colour per entity in the report too
PAGE_COLOURS = [_P["cell"]["empty"], _P["phase"]["prefill"], _P["phase"]["decode"], _P["cell"]["hint"],
                _P["cell"]["tenant"], _P["cell"]["evicted"]]  # fmt: skip


def _stage_colour(kind: str) -> str:
    return _P["stage_kind"].get(kind, _P["stage_kind"]["overhead"])


def _run_colour(i: int) -> str:
    return _P["run"]["compare" if i else "main"]


# -- figures ---------------------------------------------------------------------------------------
def _kernels_for_timeline(kernels: list[KernelEvent]) -> tuple[list[KernelEvent], int]:
    """All prefill kernels, and decode kernels of every `stride`-th step so the total stays bounded."""
    decode_steps = sorted({k.step for k in kernels if k.phase == "decode" and k.step is not None})
    other = [k for k in kernels if not (k.phase == "decode" and k.step is not None)]
    per_step = max(1, (len(kernels) - len(other)) // max(1, len(decode_steps)))
    budget = max(1, (MAX_TIMELINE_KERNELS - len(other)) // per_step)
    stride = max(1, math.ceil(len(decode_steps) / budget))
    keep = set(decode_steps[::stride])
    return other + [k for k in kernels if k.step in keep and k.phase == "decode"], stride


def timeline_figure(result: SimResult) -> go.Figure:
    kernels, stride = _kernels_for_timeline([e for e in result.events if isinstance(e, KernelEvent)])
    fig = go.Figure()
    for stage in dict.fromkeys(k.stage for k in kernels):
        ks = [k for k in kernels if k.stage == stage]
        fig.add_trace(go.Bar(
            name=stage,
            orientation="h",
            base=[k.start_us / 1e3 for k in ks],
            x=[k.dur_us / 1e3 for k in ks],
            y=[f"{k.phase}/{k.stream}" for k in ks],
            hovertext=[_kernel_hover(k) for k in ks],
            hoverinfo="text",
            marker_line_width=0,
            marker_color=_stage_colour(ks[0].stage_kind),
        ))  # fmt: skip
    sampled = f" (decode: 1 step in {stride} shown)" if stride > 1 else ""
    fig.update_layout(barmode="overlay", title=f"Kernel timeline, one layer{sampled}", xaxis_title="time (ms)")
    return fig


def _kernel_hover(k: KernelEvent) -> str:
    where = f"chunk {k.chunk}" if k.chunk is not None else f"step {k.step}" if k.step is not None else k.phase
    return (
        f"{k.name} ({where})<br>{k.shapes}<br>{k.dur_us:.1f} us, {k.flops / 1e9:.2f} GFLOP, {k.bytes / 1e6:.2f} MB"
        f"<br>{k.bound}-bound, HBM {100 * k.hbm_util:.0f}%"
        + (f", {100 * k.l2_hit:.0f}% of bytes from L2-resident data" if k.l2_hit > 0 else "")
    )


def memory_figure(result: SimResult) -> go.Figure | None:
    if not any(isinstance(e, MemoryEvent) for e in result.events):
        return None
    fig = go.Figure()
    for i, (label, run) in enumerate(_runs(result)):
        mem = [e for e in run.events if isinstance(e, MemoryEvent)]
        t = [m.t_us / 1e3 for m in mem]
        suffix = f" ({label})" if result.compare is not None else ""
        line = {"color": _run_colour(i), "shape": "hv"}  # colour = run, line style = series (as the dashboard)
        fig.add_trace(go.Scatter(x=t, y=[m.hbm_used_bytes / GIB for m in mem], name=f"HBM used{suffix}",
                                 line={**line, "dash": "longdash"}))  # fmt: skip
        fig.add_trace(go.Scatter(x=t, y=[m.hbm_free_bytes / GIB for m in mem], name=f"free{suffix}",
                                 line=line))  # fmt: skip
        fig.add_trace(go.Scatter(x=t, y=[m.largest_free_run_bytes / GIB for m in mem],
                                 name=f"largest free run{suffix}", line={**line, "dash": "dot"}))  # fmt: skip
    fig.update_layout(title="HBM over time", xaxis_title="simulated time (ms)", yaxis_title="GiB")
    return fig


def latency_figure(result: SimResult) -> go.Figure | None:
    if not any(isinstance(e, DecodeStepEvent) for _, run in _runs(result) for e in run.events):
        return None
    fig = go.Figure()
    for i, (label, run) in enumerate(_runs(result)):
        steps = [e for e in run.events if isinstance(e, DecodeStepEvent)]
        if not steps:
            continue
        fig.add_trace(go.Scatter(
            line_color=_run_colour(i),
            x=[s.step for s in steps],
            y=[s.model_latency_us / 1e3 for s in steps],
            name=f"decode step, whole model ({label})",
            mode="lines+markers" if len(steps) < 200 else "lines",
            hovertext=[f"context {s.context_len}, jitter {s.jitter_us:.1f} us, cross-bank reads {s.cross_bank_reads}"
                       for s in steps],
        ))  # fmt: skip
    steps = [e for e in result.events if isinstance(e, DecodeStepEvent)]
    if steps:
        fig.add_hline(y=steps[0].sla_us / 1e3, line_dash="dash", line_color=_P["series"]["sla"], annotation_text="SLA")
        later = sorted(s.model_latency_us / 1e3 for s in steps if s.step > 0)
        if len(later) >= 2:
            lo, hi = _quantile(later, 0.05), _quantile(later, 0.95)
            fig.add_hrect(y0=lo, y1=hi, fillcolor=_P["run"]["main"], opacity=0.08, line_width=0,
                          annotation_text="jitter band (p5-p95)")  # fmt: skip
    fig.update_layout(title="Decode step latency", xaxis_title="decode step", yaxis_title="ms")
    return fig


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))]


def stages_figure(result: SimResult) -> go.Figure:
    kernels = [e for e in result.events if isinstance(e, KernelEvent)]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("prefill (one layer)", "decode (one layer, per step)"))
    for col, phase in ((1, "prefill"), (2, "decode")):
        ks = [k for k in kernels if k.phase == phase and k.scope == "layer"]  # a layer's stages only
        steps = max(1, len({k.step for k in ks if k.step is not None})) if phase == "decode" else 1
        stages = list(dict.fromkeys(k.stage for k in ks))
        ms = [sum(k.dur_us for k in ks if k.stage == s) / steps / 1e3 for s in stages]
        hover = [_stage_hover([k for k in ks if k.stage == s]) for s in stages]
        fig.add_trace(go.Bar(x=stages, y=ms, name=phase, hovertext=hover, hoverinfo="text+y"), row=1, col=col)
    fig.update_yaxes(title_text="ms")
    fig.update_layout(title="Time per stage, with HBM utilisation (hover)", showlegend=False)
    return fig


def _stage_hover(ks: list[KernelEvent]) -> str:
    dur = sum(k.dur_us for k in ks) or 1.0
    hbm = sum(k.hbm_util * k.dur_us for k in ks) / dur
    bounds = ", ".join(sorted({k.bound for k in ks}))
    return f"{ks[0].stage}: HBM {100 * hbm:.0f}%, {bounds}-bound"  # no L2 hit rate: L2 reuse is not modelled


# -- the bank map ------------------------------------------------------------------------------------
def key_moments(result: SimResult) -> list[tuple[str, float]]:
    """(label, t_us): after prefill, mid-decode, end of run."""
    ev = result.events
    end = max((e.t_us for e in ev), default=0.0)
    decode_start = next((e.t_us for e in ev if isinstance(e, PhaseEvent) and e.phase == "decode"), None)
    steps = [e for e in ev if isinstance(e, DecodeStepEvent)]
    moments = []
    if decode_start is not None:
        moments.append(("after prefill", decode_start))
    if steps:
        moments.append(("mid-decode", steps[len(steps) // 2].t_us))
    moments.append(("end of run", end))
    return moments


def bank_grid(events: Iterable[Any], until_us: float, banks: int, capacity: int) -> list[list[int]]:
    """Replay page events up to `until_us` into a banks x slots grid of PAGE_STATES indices."""
    grid = [[0] * capacity for _ in range(banks)]

    def put(b: int, s: int, state: int) -> None:
        if 0 <= b < banks and 0 <= s < capacity:
            grid[b][s] = state

    for e in events:
        if e.t_us > until_us:
            break
        if isinstance(e, PageAllocEvent):
            state = {"hint": 3, "tenant": 4, "pressure": 4}.get(e.owner, 2 if e.phase == "decode" else 1)
            for b, s in zip(e.banks, e.slots, strict=False):
                put(b, s, state)
        elif isinstance(e, PageFreeEvent):
            for b, s in zip(e.banks, e.slots, strict=False):
                put(b, s, 0)
        elif isinstance(e, PageEvictEvent):
            for b, s in zip(e.banks, e.slots, strict=False):
                put(b, s, 5)
        elif isinstance(e, PageMigrateEvent):
            state = grid[e.from_bank][e.from_slot] if 0 <= e.from_bank < banks and 0 <= e.from_slot < capacity else 2
            put(e.from_bank, e.from_slot, 0)
            put(e.to_bank, e.to_slot, state or 2)
    return grid


def _bin_columns(grid: list[list[int]], max_cols: int) -> tuple[list[list[int]], int]:
    cols = len(grid[0]) if grid else 0
    width = max(1, math.ceil(cols / max_cols))
    if width == 1:
        return grid, 1
    return [[max(row[i : i + width]) for i in range(0, cols, width)] for row in grid], width


def banks_figure(result: SimResult) -> go.Figure | None:
    ev = result.events
    snaps = [e for e in ev if isinstance(e, BanksEvent)]
    pages = [e for e in ev if isinstance(e, PageAllocEvent | PageFreeEvent | PageEvictEvent | PageMigrateEvent)]
    if not snaps and not pages:
        return None
    banks = len(snaps[-1].used) if snaps else result.spec.banks
    capacity = snaps[-1].capacity if snaps else 1 + max(s for e in pages for s in _slots(e))
    moments = key_moments(result)
    crc_bad = sorted({b for e in ev if isinstance(e, CrcEvent) for b in e.bad_banks})
    fig = make_subplots(rows=1, cols=len(moments), subplot_titles=[m[0] for m in moments], shared_yaxes=True)
    n = len(PAGE_STATES)
    scale = [[v, c] for i, c in enumerate(PAGE_COLOURS) for v in (i / n, (i + 1) / n)]
    width = 1
    for col, (label, t) in enumerate(moments, start=1):
        grid, width = _bin_columns(bank_grid(pages, t, banks, capacity), MAX_BANK_COLUMNS)
        fig.add_trace(go.Heatmap(
            z=grid, zmin=-0.5, zmax=n - 0.5, colorscale=scale, showscale=col == len(moments),
            colorbar={"tickvals": list(range(n)), "ticktext": PAGE_STATES},
            hovertemplate="bank %{y}, slot bin %{x}: %{z}<extra>" + html.escape(label) + "</extra>",
        ), row=1, col=col)  # fmt: skip
    binned = f"; each column bins {width} slots" if width > 1 else ""
    crc = f"; CRC mismatch in banks {', '.join(map(str, crc_bad))}" if crc_bad else ""
    fig.update_layout(title=f"KV cache banks x pages ({banks} banks of {capacity} pages{binned}){crc}")
    fig.update_yaxes(title_text="bank", row=1, col=1)
    return fig


def _slots(e: Any) -> list[int]:
    if isinstance(e, PageMigrateEvent):
        return [e.from_slot, e.to_slot]
    return list(e.slots) or [0]


def experts_figure(result: SimResult) -> go.Figure | None:
    ex = [e for e in result.events if isinstance(e, ExpertsEvent)]
    if not ex:
        return None
    labels = [f"chunk {e.chunk}" if e.chunk is not None else f"step {e.step}" for e in ex]
    fig = go.Figure(go.Heatmap(z=[e.counts for e in ex], y=labels, colorscale="Blues", colorbar={"title": "tokens"}))
    fig.update_layout(
        title=f"Tokens routed per expert (scaled numpy router, {ex[0].scaled_model}); "
        f"full size assumes {ex[0].assumed} routing",
        xaxis_title="expert",
    )
    return fig


def numerics_figure(result: SimResult) -> go.Figure | None:
    """Relative error of the scaled numpy layer against its clean reference, with fault events marked."""
    nums = [e for e in result.events if isinstance(e, NumericsEvent)]
    if not nums:
        return None
    finite = [(e.t_us / 1e3, e.rel_error) for e in nums if math.isfinite(e.rel_error)]
    broken = [e.t_us / 1e3 for e in nums if not math.isfinite(e.rel_error) or e.nan_count or e.inf_count]
    fig = go.Figure(go.Scatter(x=[t for t, _ in finite], y=[max(v, 1e-12) for _, v in finite], mode="lines+markers",
                               name="relative error vs clean run"))  # fmt: skip
    if broken:
        fig.add_trace(go.Scatter(x=broken, y=[1.0] * len(broken), mode="markers", name="NaN / inf in output",
                                 marker={"color": _P["series"]["sla"], "symbol": "x", "size": 10}))  # fmt: skip
    for f in (e for e in result.events if isinstance(e, FaultEvent)):
        fig.add_vline(x=f.t_us / 1e3, line_dash="dot", line_color=_P["series"]["threshold"],
                      annotation_text=f"{f.fault} {f.action}", annotation_textangle=-90,
                      annotation_position="top left" if f.action == "injected" else "top right")  # fmt: skip
    fig.update_layout(title=f"Numerics: the scaled layer ({nums[0].scaled_model}) against a clean run",
                      xaxis_title="simulated time (ms)", yaxis_title="relative error", yaxis_type="log")  # fmt: skip
    return fig


# -- serving runs ------------------------------------------------------------------------------------
# the dashboard's lane colours: waiting in the other-tenant grey (the empty-cell grey is invisible on white)
LANE_COLOURS = {"waiting": _P["cell"]["tenant"], "prefill": _P["phase"]["prefill"], "decode": _P["phase"]["decode"]}
MAX_LANES = 256  # request rows drawn; a longer run shows its first 256 requests (the file stays small)


def _serving_runs(result: SimResult) -> list[tuple[int, str, SimResult]]:
    return [(i, label, run) for i, (label, run) in enumerate(_runs(result))
            if any(isinstance(e, StepEvent) for e in run.events)]


def _one_row_per_run(runs: list[tuple[int, str, SimResult]]) -> go.Figure:
    return make_subplots(rows=len(runs), cols=1, subplot_titles=[f"run {'AB'[i]}: {label}" for i, label, _ in runs],
                         vertical_spacing=0.14)


def requests_figure(result: SimResult) -> go.Figure | None:
    """One row per request and run: waiting (arrival to admission), prefill (to the first token), decode (to
    finished), and its preemptions, in whole-model seconds."""
    runs = _serving_runs(result)
    if not runs:
        return None
    fig = _one_row_per_run(runs)
    marked = False  # the preemption marks' legend entry, once
    for row, (_, _, run) in enumerate(runs, start=1):
        spans: dict[str, list[tuple[int, float, float]]] = {k: [] for k in LANE_COLOURS}
        marks: list[tuple[int, float]] = []
        open_at: dict[int, tuple[str, float]] = {}
        for e in run.events:
            if not isinstance(e, RequestEvent) or e.request_id >= MAX_LANES:
                continue
            state = {"arrive": "waiting", "scheduled": "prefill", "first_token": "decode", "preempted": "waiting"}
            if e.request_id in open_at:
                was, t0 = open_at.pop(e.request_id)
                spans[was].append((e.request_id, t0, e.t_us))
            if e.what == "preempted":
                marks.append((e.request_id, e.t_us))
            if e.what in state:
                open_at[e.request_id] = (state[e.what], e.t_us)
        for name, colour in LANE_COLOURS.items():
            rows = spans[name]
            fig.add_trace(go.Bar(
                orientation="h", name=name, legendgroup=name, showlegend=row == 1, marker_color=colour,
                base=[t0 / 1e6 for _, t0, _ in rows], x=[(t1 - t0) / 1e6 for _, t0, t1 in rows],
                y=[rid for rid, _, _ in rows], marker_line_width=0,
                hovertemplate=f"request %{{y}}: {name} %{{x:.3f}} s<extra></extra>",
            ), row=row, col=1)  # fmt: skip
        if marks:
            fig.add_trace(go.Scatter(
                x=[t / 1e6 for _, t in marks], y=[rid for rid, _ in marks], mode="markers", name="preempted",
                legendgroup="preempted", showlegend=not marked,
                marker={"symbol": "x", "color": _P["series"]["sla"], "size": 8},
            ), row=row, col=1)  # fmt: skip
            marked = True
        fig.update_yaxes(title_text="request", autorange="reversed", row=row, col=1)
        fig.update_xaxes(title_text="time (s, whole model)", row=row, col=1)
    fig.update_layout(barmode="overlay", title="Request lanes", height=320 * len(runs))
    return fig


def stepmix_figure(result: SimResult) -> go.Figure | None:
    """Per engine step: prefill tokens stacked on decode tokens against the token budget, per run."""
    runs = _serving_runs(result)
    if not runs:
        return None
    fig = _one_row_per_run(runs)
    for row, (_, _, run) in enumerate(runs, start=1):
        steps = [e for e in run.events if isinstance(e, StepEvent)]
        x = [s.index for s in steps]
        for name, values, colour in (("decode tokens", [s.decode_tokens for s in steps], _P["phase"]["decode"]),
                                     ("prefill tokens", [s.prefill_tokens for s in steps], _P["phase"]["prefill"])):
            fig.add_trace(go.Bar(x=x, y=values, name=name, legendgroup=name, showlegend=row == 1,
                                 marker_color=colour, marker_line_width=0), row=row, col=1)  # fmt: skip
        fig.add_trace(go.Scatter(x=x, y=[s.token_budget for s in steps], name="token budget", mode="lines",
                                 legendgroup="budget", showlegend=row == 1,
                                 line={"color": _P["series"]["threshold"], "dash": "dash"}),
                      row=row, col=1)  # fmt: skip
        fig.update_yaxes(title_text="tokens", row=row, col=1)
        fig.update_xaxes(title_text="engine step", row=row, col=1)
    fig.update_layout(barmode="stack", title="Step composition", height=300 * len(runs))
    return fig


def latency_samples(events: Sequence[Any]) -> dict[str, list[float]]:
    """TTFT, TPOT and ITL of the finished requests in ms, as vllm bench serve defines them (the summary's replay)."""
    samples = ServingMetrics().feed(events).samples()
    return {name.upper(): list(samples[name]) for name in ("ttft", "tpot", "itl")}


def latency_dist_figure(result: SimResult) -> go.Figure | None:
    """Histograms of TTFT, TPOT and ITL per run, p50 and p99 marked, the SLA on TPOT and ITL."""
    runs = _serving_runs(result)
    if not runs:
        return None
    names = ("TTFT", "TPOT", "ITL")
    fig = make_subplots(rows=1, cols=3, subplot_titles=[f"{n} (ms, whole model)" for n in names])
    for i, label, run in runs:
        samples = latency_samples(run.events)
        for col, name in enumerate(names, start=1):
            values = sorted(samples[name])
            if not values:
                continue
            fig.add_trace(go.Histogram(x=values, name=f"run {'AB'[i]}: {label}", legendgroup=str(i),
                                       showlegend=col == 1, marker_color=_run_colour(i), opacity=0.6,
                                       nbinsx=40), row=1, col=col)  # fmt: skip
            for q, dash in ((0.5, "dot"), (0.99, "dash")):
                fig.add_vline(x=_quantile(values, q), line_dash=dash, line_color=_run_colour(i), row=1, col=col,
                              annotation_text=f"{'AB'[i]} p{round(q * 100)}", annotation_font_size=10)
    for col in (2, 3):
        fig.add_vline(x=result.spec.sla_ms, line_color=_P["series"]["sla"], row=1, col=col, annotation_text="SLA")
    fig.update_yaxes(title_text="count", row=1, col=1)
    fig.update_layout(barmode="overlay", title="Latency distributions (finished requests)")
    return fig


def _deployment_html(result: SimResult) -> str:
    """Per run: what one GPU holds and the KV cache that leaves, as vLLM's startup log prints it."""
    parts = []
    for i, (label, run) in enumerate(_runs(result)):
        placement = scenario_placement(run.spec) if run.spec.deployment is not None else None
        if placement is None:
            continue
        d = run.spec.deployment
        head = (f"run {'AB'[i]}: {label}: {placement.num_gpus} x {placement.gpu}, tp {d.tp}, ep {d.ep}, "
                f"{d.weight_dtype} weights, {d.kv_dtype} KV, gpu_memory_utilization {d.gpu_memory_utilization:g}")
        rows = [(k, v) for k, v in placement.per_gpu().items()]
        log = "<br>".join(html.escape(line) for line in placement.log_lines())
        parts.append(f"<h3>{html.escape(head)}</h3>{_table(('per GPU', 'value'), rows)}<pre>{log}</pre>")
    return "".join(parts)


def figures(result: SimResult) -> list[tuple[str, str, go.Figure]]:
    """(id, caption, figure) in report order; figures a run cannot show (no events of theirs) are left out."""
    candidates: list[tuple[str, str, Any]] = [
        ("requests", "Each request's wait, prefill and decode, and its preemptions.", requests_figure),
        ("step-mix", "What each engine step carried against its token budget.", stepmix_figure),
        ("latency-dist", "TTFT, TPOT and ITL of the finished requests, p50 and p99 marked.", latency_dist_figure),
        ("timeline", "Kernels of one layer on the simulated GPU time axis.", timeline_figure),
        ("memory", "HBM used, free and the largest free run (fragmentation).", memory_figure),
        ("latency", "Whole-model decode step latency against the SLA.", latency_figure),
        ("stages", "Where a layer's time goes, per phase.", stages_figure),
        ("banks", "The bank map at key moments.", banks_figure),
        ("experts", "Expert routing per step.", experts_figure),
        ("numerics", "How far the numbers drift, and when faults strike.", numerics_figure),
    ]
    out = []
    for fid, caption, make in candidates:
        fig = make(result)
        if fig is not None and fig.data:
            out.append((fid, caption, fig))
    return out


# -- helpers -------------------------------------------------------------------------------------------
def _runs(result: SimResult) -> list[tuple[str, SimResult]]:
    """(label, run) for the run and its compare run; the main run is labelled by the settings the pair varies."""
    spec = result.spec
    if result.compare is None or spec.compare is None:
        return [(spec.name, result)]
    return [(main_label(spec), result), (spec.compare.label, result.compare)]


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return html.escape(f"{v:.4g}")
    return html.escape(format_value(v))


def _settings_html(result: SimResult) -> str:
    data = result.spec.model_dump(exclude={"tour", "description", "title"})
    rows = [(k, v if not isinstance(v, list | dict) else str(v)) for k, v in data.items()]
    compare = ""
    if result.compare is not None and result.spec.compare is not None:
        compare = f"<p>Compared with: <b>{html.escape(result.spec.compare.label)}</b>, overrides " + html.escape(
            str(result.spec.compare.set)
        ) + "</p>"  # fmt: skip
    return _table(("setting", "value"), rows, "settings") + compare


def _summary_html(result: SimResult) -> str:
    runs = _runs(result)
    keys = list(dict.fromkeys(k for _, r in runs for k in r.summary))
    header = ["figure", *(label for label, _ in runs)]
    return _table(header, ([k, *(r.summary.get(k) for _, r in runs)] for k in keys), "summary")


def _tour_html(result: SimResult) -> str:
    if not result.spec.tour:
        return "<p>This scenario has no guided tour.</p>"
    items = []
    for step, row in zip(result.spec.tour, tour_results(result), strict=True):
        at = f"at {row['t_us'] / 1e3:.3f} ms" if row["t_us"] is not None else "any time"
        trigger = f" ({html.escape(step.at_event)})" if step.at_event else ""
        panels = ", ".join(step.highlight) or "-"
        if row["metric"]:
            verdict = "passed" if row["passed"] else "FAILED"
            check = (
                f'<div class="check {verdict.lower()}">check: <code>{html.escape(row["metric"])} {row["op"]} '
                f"{_cell(row['expected'])}</code>; this run: {_cell(row['actual'])} &rarr; {verdict}"
                + (f" ({html.escape(row['error'])})" if row["error"] else "")
                + "</div>"
            )
        else:
            check = ""
        items.append(
            f"<li><h3>{html.escape(step.title)}</h3><div class=meta>{at}{trigger}; panels: {html.escape(panels)}</div>"
            f"<p>{html.escape(step.text)}</p>{check}</li>"
        )
    return "<ol class=tour>" + "".join(items) + "</ol>"


def _claims_html(result: SimResult) -> str:
    """The claims that concern the run, the rest folded under a <details> (as the dashboard's panel), after a
    serving run's SLO figures."""
    rows = build_claims(result)
    header = ("claim", "stated", "simulated", "this run", "unit", "verdict", "setting", "explanation")

    def table(chosen: list[dict[str, Any]]) -> str:
        body = []
        for r in chosen:
            cls = {"consistent": "ok", "off": "off"}.get(r["verdict"], "na")
            verdict = r["verdict"] + (f" ({r['factor']:.3g}x)" if r.get("factor") else "")
            cells = [r["claim"], r["stated"], r["simulated"], r.get("run"), r["unit"], verdict, r.get("setting", ""),
                     r["explanation"]]
            body.append(f'<tr class="{cls}">' + "".join(f"<td>{_cell(c)}</td>" for c in cells) + "</tr>")
        head = "".join(f"<th>{h}</th>" for h in header)
        return f'<table class="claims"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'

    mine = [r for r in rows if r.get("concerns", True)]
    rest = [r for r in rows if not r.get("concerns", True)]
    out = _slo_html(result)
    out += table(mine) if mine else "<p>None of the article's figures concerns this run.</p>"
    if rest:
        out += f"<details><summary>{len(rest)} claims this run does not exercise</summary>{table(rest)}</details>"
    return out


SLO = (("ttft", "TTFT", False), ("tpot", "TPOT", True), ("itl", "ITL", True))


def _slo_html(result: SimResult) -> str:
    """A serving run's TTFT, TPOT and ITL p50 / p99 (ms, whole model) of each run against sla_ms (TPOT, ITL)."""
    runs = [(label, run) for label, run in _runs(result) if "median_ttft_ms" in run.summary]
    if not runs:
        return ""
    sla = result.spec.sla_ms
    header = ["ms", *(f"{label}: {q}" for label, _ in runs for q in ("p50", "p99")), "SLA"]
    rows = []
    for key, name, bound in SLO:
        cells: list[Any] = [name]
        for _, run in runs:
            cells += [run.summary.get(f"median_{key}_ms"), run.summary.get(f"p99_{key}_ms")]
        cells.append(f"<= {sla:g}" if bound else "-")
        rows.append(cells)
    return "<h3>SLO figures (whole model, simulated at full size)</h3>" + _table(header, rows, "slo")


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:.2em} .note{color:#555} table{border-collapse:collapse;margin:1em 0;font-size:.9em}
td,th{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top} th{background:#f4f5f7}
tr.ok td:nth-child(5){color:#2a7d2a;font-weight:600} tr.off td:nth-child(5){color:#b3261e;font-weight:600}
tr.na td:nth-child(5){color:#777} .tour li{margin-bottom:1em} .tour h3{margin:.2em 0} .meta{color:#666;font-size:.85em}
.check{font-size:.9em} .check.passed{color:#2a7d2a} .check.failed{color:#b3261e} .figure{margin:1.5em 0}
"""


def _sizes_note(result: SimResult) -> str:
    s = result.spec
    numerics = (
        f"numeric errors come from the numpy layer run at the scaled size {s.numerics_model}"
        if s.numerics
        else "the numpy layer is off in this run (no numeric errors measured on its schedule)"
    )
    return html.escape(
        f"Scenario {s.name}, LayerScope {__version__}. Timings, bytes and memory are simulated at the full size of "
        f"{s.model} on {s.gpu} ({s.runtime} runtime); {numerics}."
    )


def build_report(result: SimResult) -> str:
    """One self-contained HTML document for a run (and its compare run, if any)."""
    spec = result.spec
    plotly_js = get_plotlyjs().replace("</script", "<\\/script")
    deployment = _deployment_html(result)
    figs = []
    for fid, caption, fig in figures(result):
        fig.update_layout(template="plotly_white")
        if fig.layout.height is None:
            fig.update_layout(height=420 if fid != "banks" else 460)
        div = pio.to_html(fig, include_plotlyjs=False, full_html=False, config=PLOT_CONFIG, div_id=f"fig-{fid}")
        figs.append(f'<section class="figure" id="{fid}"><h3>{html.escape(caption)}</h3>{div}</section>')
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>LayerScope report: {html.escape(spec.title)}</title>
<style>{_CSS}</style><script>{plotly_js}</script></head>
<body>
<h1>{html.escape(spec.title)}</h1>
<p class="note">{_sizes_note(result)}</p>
<p>{html.escape(spec.description)}</p>
<h2>Guided tour</h2>{_tour_html(result)}
<h2>Claims: the article's figures beside this run</h2>{_claims_html(result)}
<h2>Figures</h2>{"".join(figs)}
{f"<h2>Deployment</h2>{deployment}" if deployment else ""}
<h2>Settings</h2>{_settings_html(result)}
<h2>Summary figures</h2>{_summary_html(result)}
</body></html>
"""
