// Per-stage time, prefill vs decode (share of each phase's per-layer kernel time), with duration-weighted
// HBM bandwidth utilisation per stage. Whole-model kernels (scope "model": the embedding lookup, the article's
// switch-over) are not a layer's stage share. No L2 hit rate: L2 reuse is not modelled (docs/design.md).

import { PHASE, PLOT_CONFIG, plotLayout } from "../colors.js";
import { us } from "../format.js";

function totals(kernels, phase) {
  const by = new Map();
  let sum = 0;
  for (const k of kernels) {
    if (k.phase !== phase || k.scope === "model") continue;
    let r = by.get(k.stage);
    if (!r) {
      r = { us: 0, n: 0, hbm: 0, kind: k.stage_kind };
      by.set(k.stage, r);
    }
    r.us += k.dur_us;
    r.n += 1;
    r.hbm += k.hbm_util * k.dur_us;
    sum += k.dur_us;
  }
  return { by, sum };
}

export class StagesView {
  constructor(el, store) {
    this.el = el;
    this.store = store;
    this.drawn = "";
    this.count = 0;
  }

  render(force = false) {
    const stamp = this.store.stamp(["kernels"]);
    if (!force && stamp === this.drawn) return false;
    this.drawn = stamp;
    const ks = this.store.kernels;
    const topo = this.store.topology;
    const order = [];
    for (const ph of ["prefill", "decode"]) for (const n of topo ? topo[ph].nodes : []) if (!order.includes(n.id)) order.push(n.id);
    for (const k of ks) if (!order.includes(k.stage)) order.push(k.stage);
    const traces = [];
    for (const phase of ["prefill", "decode"]) {
      const { by, sum } = totals(ks, phase);
      const stages = order.filter((s) => by.has(s));
      const rows = stages.map((s) => by.get(s));
      traces.push({
        type: "bar", name: `${phase} share`, x: stages, y: rows.map((r) => (100 * r.us) / (sum || 1)),
        marker: { color: PHASE[phase] }, offsetgroup: phase,
        customdata: rows.map((r) => [us(r.us), r.n, us(r.us / r.n), (100 * r.hbm) / r.us]),
        hovertemplate:
          `<b>%{x}</b> (${phase})<br>%{y:.1f}% of ${phase} kernel time<br>%{customdata[0]} in %{customdata[1]} launches` +
          " (%{customdata[2]} each)<br>HBM util %{customdata[3]:.0f}%<extra>simulated at full size</extra>",
      });
      traces.push({
        type: "scatter", mode: "markers", name: `${phase} HBM util`, x: stages, y: rows.map((r) => (100 * r.hbm) / r.us), yaxis: "y2",
        marker: { symbol: "diamond", size: 8, color: PHASE[phase], line: { color: "#fff", width: 1 } },
        hovertemplate: `%{x} ${phase}: HBM bandwidth %{y:.0f}% of peak<extra></extra>`,
      });
      traces.push({
        type: "scatter", mode: "markers", name: `${phase} L2 hit`, x: stages, y: rows.map((r) => (100 * r.l2) / r.us), yaxis: "y2",
        marker: { symbol: "circle-open", size: 8, color: PHASE[phase] },
        hovertemplate: `%{x} ${phase}: L2 hit rate %{y:.0f}%<extra></extra>`,
      });
    }
    const layout = plotLayout({
      barmode: "group",
      showlegend: true,
      legend: { orientation: "h", x: 0, y: 1.18, font: { size: 9 } },
      margin: { l: 44, r: 40, t: 24, b: 62 },
      xaxis: { gridcolor: "#2a2e42", tickangle: -30, tickfont: { size: 9 } },
      yaxis: { title: { text: "% of phase time" }, gridcolor: "#2a2e42", rangemode: "tozero" },
      yaxis2: { overlaying: "y", side: "right", range: [0, 105], showgrid: false, title: { text: "HBM util / L2 hit %" }, tickvals: [0, 25, 50, 75, 100] },
    });
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    return true;
  }
}
