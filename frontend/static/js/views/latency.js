// Decode step latency (whole model) against the SLA, with a jitter band around the running median.

import { applyRange, listenRange } from "./cursor.js";
import { PLOT_CONFIG, SERIES, plotLayout } from "../colors.js";

const BAND = 16; // steps in the rolling window of the jitter band

export class LatencyView {
  constructor(el, store) {
    this.el = el;
    this.store = store;
    this.drawn = "";
    this.range = null;
    this.onRange = null; // linked axes
  }

  render(force = false) {
    const stamp = this.store.stamp(["latency"]);
    if (!force && stamp === this.drawn) return false;
    this.drawn = stamp;
    const s = this.store;
    const d = s.decode;
    const t = d.map((e) => e.t_us);
    const ms = d.map((e) => e.model_latency_us / 1e3);
    const median = d.map((e) => (e.model_latency_us - e.jitter_us) / 1e3);
    const hi = [];
    const lo = [];
    for (let i = 0; i < d.length; i++) {
      // over the last BAND steps: the largest deviation above and below the running median
      let up = 0;
      let down = 0;
      for (let k = Math.max(0, i - BAND + 1); k <= i; k++) {
        up = Math.max(up, d[k].jitter_us);
        down = Math.max(down, -d[k].jitter_us);
      }
      hi.push(median[i] + up / 1e3);
      lo.push(Math.max(0, median[i] - down / 1e3));
    }
    const sla = d.length ? d[0].sla_us / 1e3 : s.scenario ? s.scenario.sla_ms : 0;
    const over = d.filter((e) => e.over_sla);
    const traces = [
      { type: "scatter", mode: "lines", x: t, y: lo, line: { width: 0 }, hoverinfo: "skip", name: "band lo", showlegend: false },
      {
        type: "scatter", mode: "lines", x: t, y: hi, fill: "tonexty", fillcolor: SERIES.band, line: { width: 0 },
        hoverinfo: "skip", name: "jitter band",
      },
      {
        type: "scatter", mode: "lines+markers", name: "step latency", x: t, y: ms,
        customdata: d.map((e) => [e.step, e.context_len, e.jitter_us, e.cross_bank_reads, e.refetched_pages]),
        line: { color: SERIES.latency, width: 1.5 }, marker: { size: 3 },
        hovertemplate:
          "step %{customdata[0]} (context %{customdata[1]} tokens)<br>%{y:.3f} ms whole model" +
          "<br>jitter %{customdata[2]:.1f} µs<br>cross-bank reads %{customdata[3]}, re-fetched pages %{customdata[4]}" +
          "<extra>simulated at full size</extra>",
      },
      {
        type: "scatter", mode: "markers", name: "over SLA", x: over.map((e) => e.t_us), y: over.map((e) => e.model_latency_us / 1e3),
        marker: { color: SERIES.sla, size: 5, symbol: "x-thin", line: { width: 1.5, color: SERIES.sla } }, hovertemplate: "over SLA: %{y:.3f} ms<extra></extra>",
      },
      {
        type: "scatter", mode: "lines", name: "SLA", x: [0, s.duration || 1], y: [sla, sla],
        line: { color: SERIES.sla, dash: "dash", width: 1 }, hovertemplate: `SLA ${sla} ms<extra></extra>`,
      },
    ];
    const cmp = s.loaded && s.loaded.compare;
    if (cmp && cmp.decode_latency_us && cmp.decode_latency_us.length) {
      const tOf = new Map(d.map((e) => [e.step, e.t_us]));
      const rows = cmp.decode_latency_us.filter((r) => tOf.has(r[1]));
      traces.push({
        type: "scatter", mode: "lines", name: cmp.label, x: rows.map((r) => tOf.get(r[1])), y: rows.map((r) => r[2] / 1e3),
        line: { color: SERIES.compare, width: 1.2, dash: "dot" },
        hovertemplate: `${cmp.label}: %{y:.3f} ms<extra>compare run</extra>`,
      });
    }
    const layout = plotLayout({
      uirevision: s.scenario ? s.scenario.name : "",
      margin: { l: 50, r: 10, t: cmp ? 22 : 10, b: 30 },
      showlegend: Boolean(cmp), // with a compare run, say which line is which
      legend: { orientation: "h", x: 0, y: 1.12, font: { size: 10 } },
      // unzoomed it shows the decode part of the run (decode steps only exist there); zooms stay linked
      xaxis: { range: this.range || [d.length ? Math.max(0, d[0].t_us - (s.duration - d[0].t_us) * 0.03) : 0, s.duration || 1], gridcolor: "#2a2e42", zeroline: false, title: { text: "µs", standoff: 2 } },
      yaxis: { title: { text: "ms / step" }, gridcolor: "#2a2e42", rangemode: "tozero" },
    });
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    listenRange(this);
    return true;
  }

  setRange(range) {
    applyRange(this, range);
  }
}
