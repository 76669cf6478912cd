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
)
from layerscope.export.palette import palette
from layerscope.tour import SimResultLike, format_value, tour_results

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


def timeline_figure(result: SimResultLike) -> go.Figure:
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


def memory_figure(result: SimResultLike) -> go.Figure:
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


def latency_figure(result: SimResultLike) -> go.Figure:
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


def stages_figure(result: SimResultLike) -> go.Figure:
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
def key_moments(result: SimResultLike) -> list[tuple[str, float]]:
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


def banks_figure(result: SimResultLike) -> go.Figure | None:
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


def experts_figure(result: SimResultLike) -> go.Figure | None:
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


def numerics_figure(result: SimResultLike) -> go.Figure | None:
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


def figures(result: SimResultLike) -> list[tuple[str, str, go.Figure]]:
    """(id, caption, figure) in report order; figures a run cannot show are left out."""
    out = [
        ("timeline", "Kernels of one layer on the simulated GPU time axis.", timeline_figure(result)),
        ("memory", "HBM used, free and the largest free run (fragmentation).", memory_figure(result)),
        ("latency", "Whole-model decode step latency against the SLA.", latency_figure(result)),
        ("stages", "Where a layer's time goes, per phase.", stages_figure(result)),
    ]
    banks = banks_figure(result)
    if banks is not None:
        out.append(("banks", "The bank map at key moments.", banks))
    experts = experts_figure(result)
    if experts is not None:
        out.append(("experts", "Expert routing per step.", experts))
    numerics = numerics_figure(result)
    if numerics is not None:
        out.append(("numerics", "How far the numbers drift, and when faults strike.", numerics))
    return out


# -- helpers -------------------------------------------------------------------------------------------
def _runs(result: SimResultLike) -> list[tuple[str, SimResultLike]]:
    """(label, run) for the run and its compare run; the main run is labelled by the settings the pair varies."""
    spec = result.spec
    if result.compare is None or spec.compare is None:
        return [(spec.name, result)]
    varied = ", ".join(f"{k}={getattr(spec, k)}" for k in spec.compare.set) or spec.name
    return [(varied, result), (spec.compare.label, result.compare)]


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return html.escape(f"{v:.4g}")
    return html.escape(format_value(v))


def _settings_html(result: SimResultLike) -> str:
    data = result.spec.model_dump(exclude={"tour", "description", "title"})
    rows = [(k, v if not isinstance(v, list | dict) else str(v)) for k, v in data.items()]
    compare = ""
    if result.compare is not None and result.spec.compare is not None:
        compare = f"<p>Compared with: <b>{html.escape(result.spec.compare.label)}</b>, overrides " + html.escape(
            str(result.spec.compare.set)
        ) + "</p>"  # fmt: skip
    return _table(("setting", "value"), rows, "settings") + compare


def _summary_html(result: SimResultLike) -> str:
    runs = _runs(result)
    keys = list(dict.fromkeys(k for _, r in runs for k in r.summary))
    header = ["figure", *(label for label, _ in runs)]
    return _table(header, ([k, *(r.summary.get(k) for _, r in runs)] for k in keys), "summary")


def _tour_html(result: SimResultLike) -> str:
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


def _claims_html(result: SimResultLike) -> str:
    rows = build_claims(result)
    header = ("claim", "stated", "simulated", "this run", "unit", "verdict", "setting", "explanation")
    body = []
    for r in rows:
        cls = {"consistent": "ok", "off": "off"}.get(r["verdict"], "na")
        verdict = r["verdict"] + (f" ({r['factor']:.3g}x)" if r.get("factor") else "")
        cells = [r["claim"], r["stated"], r["simulated"], r.get("run"), r["unit"], verdict, r.get("setting", ""),
                 r["explanation"]]
        body.append(f'<tr class="{cls}">' + "".join(f"<td>{_cell(c)}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in header)
    return f'<table class="claims"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:.2em} .note{color:#555} table{border-collapse:collapse;margin:1em 0;font-size:.9em}
td,th{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top} th{background:#f4f5f7}
tr.ok td:nth-child(5){color:#2a7d2a;font-weight:600} tr.off td:nth-child(5){color:#b3261e;font-weight:600}
tr.na td:nth-child(5){color:#777} .tour li{margin-bottom:1em} .tour h3{margin:.2em 0} .meta{color:#666;font-size:.85em}
.check{font-size:.9em} .check.passed{color:#2a7d2a} .check.failed{color:#b3261e} .figure{margin:1.5em 0}
"""


def _sizes_note(result: SimResultLike) -> str:
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


def build_report(result: SimResultLike) -> str:
    """One self-contained HTML document for a run (and its compare run, if any)."""
    spec = result.spec
    plotly_js = get_plotlyjs().replace("</script", "<\\/script")
    figs = []
    for fid, caption, fig in figures(result):
        fig.update_layout(template="plotly_white", height=420 if fid != "banks" else 460)
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
<h2>Settings</h2>{_settings_html(result)}
<h2>Summary figures</h2>{_summary_html(result)}
</body></html>
"""
