// Latency distributions, as `vllm bench serve` reports them: TTFT, TPOT (first token excluded) and ITL
// histograms in whole-model milliseconds, p50 and p99 marked, growing as requests finish. Drawn from the whole
// run (the overview), the bins are the whole run's and fixed; before play and once the run ended they hold every
// request, while it plays (or is paused, or seeked) only the requests finished at or before the cursor: `live`
// recounts the bins (at most LIVE_MS apart) and moves them with one Plotly.update of y and the marks, never a
// re-plot. Fed frame by frame (no overview) they hold what has finished so far. The SLA (sla_ms, a
// per-token latency target) drawn on TPOT and ITL. When the run ends, the server's summary figures appear beside
// the ones computed here from the events (they should agree).

import { PHASE, PLOT_CONFIG, SERIES, STAGE_KIND, THEME, plotLayout } from "../colors.js";

const PANES = [
  { key: "ttft", title: "TTFT", color: () => PHASE.prefill, summary: "median_ttft_ms" },
  { key: "tpot", title: "TPOT", color: () => PHASE.decode, summary: "median_tpot_ms", sla: true },
  { key: "itl", title: "ITL", color: () => STAGE_KIND.memory, summary: "median_itl_ms", sla: true },
];
const BINS = 30;
const LIVE_MS = 250; // at most 4 histogram updates a second while the cursor moves
const fmt = (v) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toPrecision(3)) : "–");

export class LatencyDistView {
  constructor(el, store, serving, info) {
    this.el = el;
    this.store = store;
    this.serving = serving;
    this.info = info;
    this.drawn = "";
    this.bins = []; // per pane: {lo, size, top} from the whole run's values
    this.liveAt = -Infinity;
    this.liveKey = "";
  }

  // The latencies shown now: every recorded one (fed frame by frame, before play, at the end), or, for a whole
  // run being played, those of the requests finished at or before the cursor.
  current() {
    const sv = this.serving;
    const s = this.store;
    const all = !sv.whole || s.ended || (s.frames === 0 && s.t === 0);
    if (all) return { all: true, n: sv.finishedCount, ttft: sv.lat.ttft, tpot: sv.lat.tpot, itl: sv.lat.itl };
    return { all: false, ...sv.finishedBy(s.t) };
  }

  // Fixed bins from every recorded value of a pane: BINS wide over [min, max], the axis ending a little past p99
  // (and the SLA) so a few stalls far out do not squeeze the body into one bin.
  binsOf(st, sla) {
    const top = Math.max(st.p99 * 1.4, sla ? sla * 1.2 : 0);
    const shown = st.sorted.filter((v) => v <= top);
    const lo = shown.length ? shown[0] : 0;
    const hi = shown.length ? shown[shown.length - 1] : 1;
    const size = hi > lo ? (hi - lo) / BINS : Math.max(Math.abs(lo) * 0.05, 1e-3);
    return { lo: hi > lo ? lo : lo - size / 2, size, top, beyond: st.sorted.length - shown.length };
  }

  counts(b, values) {
    const y = new Array(BINS).fill(0);
    let beyond = 0;
    for (const v of values) {
      if (v > b.top) beyond += 1;
      else y[Math.max(0, Math.min(BINS - 1, Math.floor((v - b.lo) / b.size)))] += 1;
    }
    return { y, beyond };
  }

  // y of each pane's bars, and the marks (p50, p99, SLA, n, values beyond the axis) of the values shown now
  figure(cur) {
    const sla = this.store.scenario && this.store.scenario.sla_ms;
    const narrow = this.el.clientWidth < 520;
    const ys = [];
    const shapes = [];
    const annotations = [];
    const info = [];
    const summary = this.store.ended || this.serving.whole ? this.store.summary || (this.store.main && this.store.main.summary) || {} : {};
    PANES.forEach((p, i) => {
      const ax = i ? `${i + 1}` : "";
      const st = this.serving.stats(p.key, cur[p.key]);
      const { y, beyond } = this.counts(this.bins[i], st.sorted);
      ys.push(y);
      if (beyond) {
        annotations.push({
          xref: `x${ax} domain`, yref: `y${ax} domain`, x: 1, y: 0.5, xanchor: "right", showarrow: false, bgcolor: THEME.panel,
          text: `+${beyond} beyond →<br>max ${fmt(st.sorted[st.sorted.length - 1])}`, font: { size: 10, color: THEME.text },
        });
      }
      const mark = (v, color, dash, label, yy) => {
        if (!Number.isFinite(v)) return;
        shapes.push({ type: "line", xref: `x${ax}`, yref: `y${ax} domain`, x0: v, x1: v, y0: 0, y1: 1, line: { color, width: 1.5, dash } });
        annotations.push({ xref: `x${ax}`, yref: `y${ax} domain`, x: v, y: yy, text: label, showarrow: false, xanchor: "left", font: { size: 10, color }, bgcolor: THEME.panel });
      };
      mark(st.p50, THEME.bright, "solid", `p50 ${fmt(st.p50)}`, 0.98);
      mark(st.p99, SERIES.error, "dot", `p99 ${fmt(st.p99)}`, 0.84);
      if (p.sla && sla) mark(sla, SERIES.sla, "dash", `SLA ${sla}`, 0.7);
      annotations.push({
        xref: `x${ax} domain`, yref: `y${ax} domain`, x: 0, y: 1.02, yanchor: "bottom", xanchor: "left", showarrow: false,
        text: `<b>${p.title}</b>${narrow ? " (ms)" : ""} n=${st.n}`, font: { size: 10, color: THEME.text },
      });
      info.push(`${p.title} p50 ${fmt(st.p50)} / p99 ${fmt(st.p99)} ms` +
        (cur.all && summary[p.summary] !== undefined ? ` (server median ${fmt(summary[p.summary])})` : ""));
    });
    const which = !this.serving.whole ? "" : cur.all ? "every request of the run, " : `${cur.n} requests finished by the cursor, `;
    return { ys, shapes, annotations, info: `${info.join(" · ")} · ${which}whole model, simulated at full size` };
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
    const layout = plotLayout({ margin: { l: 40, r: 8, t: 20, b: 30 }, bargap: 0.05, hovermode: "closest" });
    this.bins = PANES.map((p) => this.binsOf(this.serving.stats(p.key), p.sla && sla));
    const cur = this.current();
    const fig = this.figure(cur);
    const traces = PANES.map((p, i) => {
      const ax = i ? `${i + 1}` : "";
      const b = this.bins[i];
      const x = fig.ys[i].map((_, k) => b.lo + (k + 0.5) * b.size);
      layout[`xaxis${ax}`] = { domain: dom(i), anchor: `y${ax}`, gridcolor: THEME.grid, zeroline: false, title: { text: narrow ? "" : `${p.title} (ms)`, standoff: 2 }, rangemode: "tozero" };
      if (b.beyond) layout[`xaxis${ax}`].range = [0, b.top];
      layout[`yaxis${ax}`] = { domain: ydom(i), anchor: `x${ax}`, gridcolor: THEME.grid, rangemode: "tozero" };
      return {
        type: "bar", name: p.title, meta: p.key, x, y: fig.ys[i], width: b.size * 0.95, xaxis: `x${ax}`, yaxis: `y${ax}`,
        customdata: x.map((c) => `${fmt(c - b.size / 2)}–${fmt(c + b.size / 2)}`),
        marker: { color: p.color(), line: { color: THEME.paper, width: 0.5 } },
        hovertemplate: `${p.title} %{customdata} ms: %{y} ${p.key === "itl" ? "gaps" : "requests"}<extra>whole model, simulated</extra>`,
      };
    });
    layout.shapes = fig.shapes;
    layout.annotations = fig.annotations;
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    this.info.textContent = fig.info;
    this.liveKey = this.keyOf(cur);
    return true;
  }

  keyOf(cur) {
    return `${cur.all}:${cur.n}`;
  }

  // A whole run's histograms follow the cursor: called every animation frame (main.js), it recounts the bins
  // at most every LIVE_MS and only when the set of finished requests changed. True when it updated the plot.
  live(now) {
    if (!this.serving.whole || !this.el._fullLayout || now - this.liveAt < LIVE_MS) return false;
    const cur = this.current();
    const key = this.keyOf(cur);
    if (key === this.liveKey) return false;
    this.liveAt = now;
    this.liveKey = key;
    const fig = this.figure(cur);
    Plotly.update(this.el, { y: fig.ys }, { shapes: fig.shapes, annotations: fig.annotations }, [0, 1, 2]);
    this.info.textContent = fig.info;
    return true;
  }
}
