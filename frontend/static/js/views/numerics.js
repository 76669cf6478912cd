// Numeric error against the clean run over time (the numpy layer at a scaled size, run clean and faulty on
// the same schedule): relative error of the layer output per chunk / step on a log axis, non-finite outputs
// (NaN/Inf) marked at the top, and the fault's injected / detected / recovered moments as labelled lines.
// Only runs with numerics on have this panel (it collapses otherwise).

import { SERIES, THEME, legendAbove, runColor } from "../colors.js";
import { TimeTrack } from "../panels/track.js";
import { num } from "../store.js";

const FLOOR = 1e-8; // an exact match (error 0) is drawn at this floor of the log axis

export function hasNumerics(store) {
  return store.runs.some((r) => r.numerics.length);
}

export class NumericsView extends TimeTrack {
  constructor(el, store) {
    super(el, store, { id: "numerics", title: "numeric error vs the clean run" });
  }

  figure(ax, { shapes }) {
    const s = this.store;
    if (!hasNumerics(s)) return null;
    const traces = [];
    const annotations = [];
    let top = FLOOR * 10;
    for (const run of s.runs) {
      const ns = run.numerics;
      const rx = ax.of(run); // a run on another clock has its own mapping (axis.js)
      if (!ns.length) continue;
      const err = ns.map((e) => num(e.rel_error));
      const finite = err.filter(Number.isFinite);
      top = Math.max(top, ...finite);
      const color = runColor(run.role);
      traces.push({
        type: "scatter", mode: "lines+markers", name: `rel. error${s.runs.length > 1 ? ` · ${run.label}` : ""}`,
        x: ns.map((e) => rx.toX(e.t_us)), y: err.map((v) => (Number.isFinite(v) ? Math.max(v, FLOOR) : null)), connectgaps: false,
        line: { color, width: 1.6, shape: "hv" }, marker: { size: 4, color },
        customdata: ns.map((e) => [e.phase, e.step ?? e.chunk, e.max_abs_error, e.nan_count, e.inf_count, e.scaled_model]),
        hovertemplate: "%{customdata[0]} %{customdata[1]}: rel. error %{y:.2e}, max abs %{customdata[2]:.2e}<br>NaN %{customdata[3]}, Inf %{customdata[4]}<extra>numpy layer at scaled size (%{customdata[5]})</extra>",
      });
      const bad = ns.filter((e, i) => !Number.isFinite(err[i]) || e.nan_count > 0 || e.inf_count > 0);
      if (bad.length) traces.push({
        type: "scatter", mode: "markers", name: "NaN / Inf in the output", x: bad.map((e) => rx.toX(e.t_us)), y: bad.map(() => 1), yaxis: "y2",
        marker: { symbol: "x", size: 9, color: SERIES.sla }, hovertemplate: "non-finite output: NaN %{customdata[0]}, Inf %{customdata[1]}<extra></extra>",
        customdata: bad.map((e) => [e.nan_count, e.inf_count]),
      });
      if (run.role === "main") {
        let lastX = -Infinity;
        for (const f of run.fault) {
          const x = rx.toX(f.t_us);
          shapes.push({ type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1, line: { color: f.action === "recovered" ? THEME.muted : SERIES.sla, dash: "dot", width: 1 } });
          const [v0, v1] = ax.shown();
          const far = (x - lastX) / Math.max(v1 - v0, 1e-9) > 0.08; // labels never overlap: one per 8% of the width
          if (far) annotations.push({ x, xref: "x", y: 1, yref: "paper", yanchor: "bottom", showarrow: false, text: f.action, font: { size: 10, color: THEME.text }, hovertext: `${f.fault} ${f.action}: ${f.detail}` });
          if (far) lastX = x;
        }
      }
    }
    const layout = {
      showlegend: true,
      legend: { ...legendAbove(), x: 1, xanchor: "right" },
      margin: { l: 56, r: 10, t: 30, b: 40 },
      yaxis: { type: "log", title: { text: "rel. error" }, range: [Math.log10(FLOOR), Math.log10(Math.max(top * 3, 1e-6))], exponentformat: "power" },
      yaxis2: { overlaying: "y", range: [0, 1.05], visible: false, fixedrange: true },
      shapes,
      annotations,
    };
    return { traces, layout };
  }
}
