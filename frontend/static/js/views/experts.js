// MoE routing: a heatmap of tokens per expert per step (numpy router at scaled size), the number of
// distinct experts whose weights a step reads (at full size), and routed vs assumed distribution.

import { PHASE, PLOT_CONFIG, RUN, plotLayout } from "../colors.js";

const MAX_COLS = 160; // heatmap columns: the run's steps, evenly thinned to this many

export class ExpertsView {
  constructor(el, store, info) {
    this.el = el;
    this.store = store;
    this.info = info;
    this.drawn = "";
  }

  // the track interface (store.js): render(store, axis) -> true when it drew; force redraws regardless
  render(store = this.store, axis = store.axis, force = false) {
    const stamp = this.store.stamp(["axis", "theme"]);
    if (!force && stamp === this.drawn) return false;
    this.drawn = stamp;
    // the whole run's routing (loaded.overview): the run that routes through experts (in article-vs-real,
    // the compare run: the real MoE model; the article's layer is dense)
    const src = this.store.runs.find((r) => r.experts && r.experts.length);
    const all = src ? src.experts : [];
    const stride = Math.max(1, Math.ceil(all.length / MAX_COLS));
    const rows = all.filter((_, i) => i % stride === 0);
    if (!all.length) {
      const moe = this.store.topology && ["prefill", "decode"].some((p) => this.store.topology[p].nodes.some((n) => n.kind === "moe"));
      const why = moe ? "MoE layer: routing appears as the run reaches the router" : "This run's layer is dense (no experts): nothing is routed.";
      this.info.textContent = "";
      Plotly.purge(this.el);
      this.el.innerHTML = `<p class="empty">${why}</p>`;
      this.blank = true;
      return true;
    }
    if (this.blank) {
      this.el.innerHTML = "";
      this.blank = false;
    }
    const nExp = Math.max(...rows.map((e) => e.counts.length));
    const label = (e) => (e.step !== null && e.step !== undefined ? `step ${e.step}` : `chunk ${e.chunk}`);
    const x = rows.map((e, i) => i);
    // share of each step's routed tokens (a prefill chunk routes thousands, a decode step a handful)
    const totals = rows.map((e) => e.counts.reduce((a, b) => a + b, 0) || 1);
    const z = [];
    for (let j = 0; j < nExp; j++) z.push(rows.map((e, i) => (e.counts[j] || 0) / totals[i]));
    // routed distribution over the whole run, sorted, against the assumed one
    const tot = new Array(nExp).fill(0);
    for (const e of all) e.counts.forEach((c, j) => (tot[j] += c));
    const sum = tot.reduce((a, b) => a + b, 0) || 1;
    const sorted = tot.map((c) => c / sum).sort((a, b) => b - a);
    const last = all[all.length - 1];
    const assumed = last.assumed === "balanced" ? sorted.map(() => 1 / nExp) : sorted.map((_, i) => (1 / (i + 1)) / harmonic(nExp));
    const traces = [
      {
        type: "heatmap", z, x, y: [...Array(nExp).keys()], colorscale: "Cividis", showscale: false, zmin: 0,
        hovertemplate: "expert %{y}: %{z:.0%} of column %{x}'s tokens<extra>numpy router at scaled size</extra>",
      },
      {
        type: "scatter", mode: "lines", x, y: rows.map((e) => e.distinct_full), xaxis: "x", yaxis: "y2",
        line: { color: RUN.main, width: 1.5 }, text: rows.map(label),
        hovertemplate: "%{text}: %{y:.1f} distinct experts read<extra>simulated at full size</extra>",
      },
      {
        type: "bar", x: sorted.map((_, i) => i), y: sorted, xaxis: "x3", yaxis: "y3", marker: { color: PHASE.decode },
        hovertemplate: "rank %{x}: %{y:.1%} of tokens<extra>routed (numpy, scaled)</extra>",
      },
      {
        type: "scatter", mode: "lines", x: sorted.map((_, i) => i), y: assumed, xaxis: "x3", yaxis: "y3",
        line: { color: RUN.main, dash: "dot" }, hovertemplate: `assumed ${last.assumed}: %{y:.1%}<extra>full size</extra>`,
      },
    ];
    const layout = plotLayout({
      margin: { l: 40, r: 8, t: 6, b: 24 },
      grid: null,
      xaxis: { domain: [0, 0.68], showticklabels: false },
      yaxis: { domain: [0.36, 1], title: { text: "expert" } },
      yaxis2: { domain: [0, 0.28], title: { text: "distinct" }, rangemode: "tozero" },
      xaxis3: { domain: [0.76, 1], anchor: "y3", title: { text: "expert rank", standoff: 2 } },
      yaxis3: { domain: [0, 1], anchor: "x3", tickformat: ".0%" },
    });
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    const top = (sorted[0] * 100).toFixed(1);
    this.info.textContent = (this.store.runs.length > 1 ? `${src.label}: ` : "") +
      `${all.length} routing events · router (${last.scaled_model}, scaled): top expert ${top}% of tokens; ` +
      `assumed at full size: ${last.assumed} (${(100 / nExp).toFixed(1)}% each if balanced)`;
    return true;
  }
}

function harmonic(n) {
  let h = 0;
  for (let i = 1; i <= n; i++) h += 1 / i;
  return h;
}
