// Latency distributions, as `vllm bench serve` reports them: TTFT, TPOT (first token excluded) and ITL
// histograms in whole-model milliseconds, p50 and p99 marked: the whole run's (drawn on load from the overview),
// or growing as requests finish when fed frame by frame; the SLA (sla_ms, a
// per-token latency target) drawn on TPOT and ITL. When the run ends, the server's summary figures appear beside
// the ones computed here from the events (they should agree).

import { PHASE, PLOT_CONFIG, SERIES, STAGE_KIND, THEME, plotLayout } from "../colors.js";

const PANES = [
  { key: "ttft", title: "TTFT", color: () => PHASE.prefill, summary: "median_ttft_ms" },
  { key: "tpot", title: "TPOT", color: () => PHASE.decode, summary: "median_tpot_ms", sla: true },
  { key: "itl", title: "ITL", color: () => STAGE_KIND.memory, summary: "median_itl_ms", sla: true },
];
const fmt = (v) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toPrecision(3)) : "–");

export class LatencyDistView {
  constructor(el, store, serving, info) {
    this.el = el;
    this.store = store;
    this.serving = serving;
    this.info = info;
    this.drawn = "";
  }

  // the track interface: render(store, axis) (main.js); a third argument forces a redraw
  render(_store = this.store, _axis = this.store.axis, force = false) {
    const stamp = this.store.stamp(["requests", "theme"]) + (this.store.ended ? ":end" : "");
    if (!force && stamp === this.drawn) return false;
    this.drawn = stamp;
    const s = this.store;
    const narrow = this.el.clientWidth < 520; // a phone: the three panes stack
    const gap = 0.06;
    const dom = (i) => (narrow ? [0, 1] : [i * (1 / 3) + (i ? gap / 2 : 0), (i + 1) * (1 / 3) - (i < 2 ? gap / 2 : 0)]);
    const ydom = (i) => (narrow ? [1 - (i + 1) / 3 + 0.09, 1 - i / 3 - 0.06] : [0, 0.86]);
    const sla = s.scenario && s.scenario.sla_ms;
    const traces = [];
    const shapes = [];
    const annotations = [];
    const layout = plotLayout({ margin: { l: 40, r: 8, t: 20, b: 30 }, bargap: 0.05, hovermode: "closest" });
    const summary = s.ended || this.serving.whole ? s.summary || (s.main && s.main.summary) || {} : {};
    const info = [];
    PANES.forEach((p, i) => {
      const ax = i ? `${i + 1}` : "";
      const st = this.serving.stats(p.key);
      // the axis ends a little past p99 (and the SLA): a few stalls far out would squeeze the body to one bin
      const top = Math.max(st.p99 * 1.4, p.sla && sla ? sla * 1.2 : 0);
      const beyond = st.sorted.filter((v) => v > top).length;
      const shown = beyond ? st.sorted.filter((v) => v <= top) : st.sorted;
      traces.push({
        type: "histogram", name: p.title, meta: p.key, x: shown, nbinsx: 30, xaxis: `x${ax}`, yaxis: `y${ax}`,
        marker: { color: p.color(), line: { color: THEME.paper, width: 0.5 } },
        hovertemplate: `${p.title} %{x} ms: %{y} ${p.key === "itl" ? "gaps" : "requests"}<extra>whole model, simulated</extra>`,
      });
      layout[`xaxis${ax}`] = { domain: dom(i), anchor: `y${ax}`, gridcolor: THEME.grid, zeroline: false, title: { text: narrow ? "" : `${p.title} (ms)`, standoff: 2 }, rangemode: "tozero" };
      if (beyond) {
        layout[`xaxis${ax}`].range = [0, top];
        annotations.push({
          xref: `x${ax} domain`, yref: `y${ax} domain`, x: 1, y: 0.5, xanchor: "right", showarrow: false, bgcolor: THEME.panel,
          text: `+${beyond} beyond →<br>max ${fmt(st.sorted[st.sorted.length - 1])}`, font: { size: 10, color: THEME.text },
        });
      }
      layout[`yaxis${ax}`] = { domain: ydom(i), anchor: `x${ax}`, gridcolor: THEME.grid, rangemode: "tozero" };
      const mark = (v, color, dash, label, y) => {
        if (!Number.isFinite(v)) return;
        shapes.push({ type: "line", xref: `x${ax}`, yref: `y${ax} domain`, x0: v, x1: v, y0: 0, y1: 1, line: { color, width: 1.5, dash } });
        annotations.push({ xref: `x${ax}`, yref: `y${ax} domain`, x: v, y, text: label, showarrow: false, xanchor: "left", font: { size: 10, color }, bgcolor: THEME.panel });
      };
      mark(st.p50, THEME.bright, "solid", `p50 ${fmt(st.p50)}`, 0.98);
      mark(st.p99, SERIES.error, "dot", `p99 ${fmt(st.p99)}`, 0.84);
      if (p.sla && sla) mark(sla, SERIES.sla, "dash", `SLA ${sla}`, 0.7);
      annotations.push({
        xref: `x${ax} domain`, yref: `y${ax} domain`, x: 0, y: 1.02, yanchor: "bottom", xanchor: "left", showarrow: false,
        text: `<b>${p.title}</b>${narrow ? " (ms)" : ""} n=${st.n}`,
        font: { size: 10, color: THEME.text },
      });
      info.push(`${p.title} p50 ${fmt(st.p50)} / p99 ${fmt(st.p99)} ms` +
        (summary[p.summary] !== undefined ? ` (server median ${fmt(summary[p.summary])})` : ""));
    });
    layout.shapes = shapes;
    layout.annotations = annotations;
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    this.info.textContent = `${info.join(" · ")} · ${this.serving.whole ? "every request of the run, " : ""}whole model, simulated at full size`;
    return true;
  }
}
