// Decode step latency for the whole run (and its compare run, in its own colour, at its own clock) on the
// shared time axis. Units follow the "one layer / whole model" switch: one layer's step in µs, or the whole
// model's step in ms against the SLA (the SLA is a whole-model figure, so its line is drawn only there).
// Lines break between runs of steps (null between segments), a jitter band follows each run.

import { isOneOff } from "../axis.js";
import { RUN, SERIES, runColor } from "../colors.js";
import { us } from "../format.js";
import { TimeTrack } from "../panels/track.js";
import { gapped, htmlLegend } from "./series.js";

const BAND = 16; // steps in the rolling window of the jitter band

function band(d, ys) {
  // over the last BAND steps: the largest deviation above and below the running median
  const hi = [];
  const lo = [];
  for (let i = 0; i < d.length; i++) {
    const w = ys.slice(Math.max(0, i - BAND + 1), i + 1).sort((a, b) => a - b);
    hi.push(w[w.length - 1]);
    lo.push(w[0]);
  }
  return [lo, hi];
}

export class LatencyView extends TimeTrack {
  constructor(el, store, legend) {
    super(el, store, { id: "latency", title: "decode latency" });
    this.legend = legend;
  }

  figure(ax, { shapes, annotations }) {
    const s = this.store;
    const model = ax.units === "model";
    const unit = model ? "ms" : "µs";
    // one layer: a step's own work; a whole-model one-off cost (the switch-over of step 0) is shown apart
    const oneOff = (run) => {
      const m = new Map();
      // the step's own whole-model kernels (switch-over, embedding lookup), not re-fetches on the copy stream
      for (const k of run.kernel) if (isOneOff(k) && k.step !== null && k.step !== undefined && k.stream !== "copy") m.set(k.step, (m.get(k.step) || 0) + k.dur_us);
      return m;
    };
    const traces = [];
    let sla = null;
    let top = 0; // the tallest step of every run: the plot's y extent (rangemode tozero)
    for (const run of s.runs) {
      const d = run.decode_step;
      if (!d.length) continue;
      const color = runColor(run.role);
      const tag = s.runs.length > 1 ? ` · ${run.label}` : "";
      const once = oneOff(run);
      const val = (e) => (model ? e.model_latency_us / 1e3 : Math.max(0, e.latency_us - (once.get(e.step) || 0)));
      const rx = ax.of(run); // a run on another clock has its own mapping (axis.js)
      const x = d.map((e) => rx.toX(e.t_us));
      const y = d.map(val);
      top = Math.max(top, ...y);
      if (!model) for (const [step, extra] of [...once].filter(([, v]) => v > 0.2 * Math.max(...y)).slice(0, 1)) {
        const i = d.findIndex((e) => e.step === step);
        if (i < 0 || run.role !== "main") continue;
        const [v0, v1] = ax.shown();
        const right = (x[i] - v0) / Math.max(v1 - v0, 1e-9) > 0.55; // keep the label inside the plot
        annotations.push({
          x: x[i], y: y[i], ax: right ? -40 : 40, ay: -30, oneOff: true, // above the point: never over the axis ticks
          xanchor: right ? "right" : "left", text: `step ${step}: +${us(extra)} one-off, not drawn`,
          hovertext: "a whole-model one-off cost (the prefill→decode switch-over), shown apart so it does not squeeze the steps", font: { size: 10, color: RUN.main }, arrowcolor: RUN.main, arrowsize: 0.6,
        });
      }
      const [lo, hi] = band(d, y);
      const [gx, gy] = gapped(x, y);
      traces.push({ type: "scatter", mode: "lines", x: gapped(x, lo)[0], y: gapped(x, lo)[1], line: { width: 0 }, hoverinfo: "skip", showlegend: false, connectgaps: false });
      traces.push({
        type: "scatter", mode: "lines", x: gx, y: gapped(x, hi)[1], fill: "tonexty", connectgaps: false, showlegend: false,
        fillcolor: run.role === "compare" ? SERIES.band_compare : SERIES.band, line: { width: 0 }, hoverinfo: "skip",
      });
      traces.push({
        type: "scatter", mode: d.length > 300 ? "lines" : "lines+markers", name: `step latency${tag}`, x: gx, y: gy, connectgaps: false,
        customdata: d.map((e) => [e.step, e.context_len, e.jitter_us, e.cross_bank_reads, e.refetched_pages, e.latency_us, e.model_latency_us / 1e3]),
        line: { color, width: run.role === "main" && s.runs.length > 1 ? 3.4 : 1.6 }, marker: { size: 3, color },
        hovertemplate:
          `<b>${run.label}</b><br>step %{customdata[0]} (context %{customdata[1]} tokens)<br>%{customdata[5]:.1f} µs one layer · %{customdata[6]:.3f} ms whole model` +
          "<br>jitter %{customdata[2]:.1f} µs<br>cross-bank reads %{customdata[3]}, re-fetched pages %{customdata[4]}" +
          "<extra>simulated at full size</extra>",
      });
      if (model) {
        const over = d.filter((e) => e.over_sla);
        if (over.length) traces.push({
          type: "scatter", mode: "markers", name: `over SLA${tag}`, x: over.map((e) => rx.toX(e.t_us)), y: over.map(val), showlegend: false,
          marker: { color: SERIES.sla, size: 6, symbol: "x-thin", line: { width: 1.5, color: SERIES.sla } }, hovertemplate: "over SLA: %{y:.3f} ms<extra></extra>",
        });
      }
      sla = d[0].sla_us / 1e3;
    }
    // a one-off's label goes below a point in the top of the plot (above it, it would be cut off by the plot's edge)
    for (const a of annotations) if (a.oneOff && a.y > 0.7 * top) a.ay = 30;
    if (model && sla !== null) {
      shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, y0: sla, y1: sla, line: { color: SERIES.sla, dash: "dash", width: 1.2 } });
      annotations.push({ xref: "paper", x: 0, xanchor: "left", y: sla, yanchor: "bottom", showarrow: false, text: `SLA ${sla} ms (whole model)`, font: { size: 10, color: SERIES.sla } });
    }
    if (!traces.length) annotations.push({ text: "no decode steps in this run", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 });
    const layout = {
      margin: { l: 56, r: 10, t: ax.gaps.length ? 22 : 12, b: 40 }, // room above for the broken axis's labels
      yaxis: { title: { text: `${unit} / step` }, rangemode: "tozero" },
      shapes,
      annotations,
    };
    const items = s.runs.filter((r) => r.decode_step.length).map((r) => ({ color: runColor(r.role), text: `${s.runs.length > 1 ? `${r.role === "compare" ? "B" : "A"} ${r.label}` : "step latency"}` }));
    if (model) items.push({ color: SERIES.sla, dash: "dash", text: "SLA (whole model)" });
    else if (sla !== null) items.push({ color: SERIES.sla, dash: "dot", text: `one layer's step; the ${sla} ms SLA is a whole-model figure: see "whole model"` });
    htmlLegend(this.legend, items);
    return { traces, layout };
  }
}
