// Data-parallel ranks (deployment.dp > 1, issue 20): one row per DP rank and one per GPU's experts, on the run's
// time axis. Top: each rank's busy share of every lockstep step (1 = the slowest rank, which sets the step; the
// rest of the step the rank idles), with the all-to-all's share of the step as a line. Bottom: the token-expert
// rows each GPU's experts computed per layer (the MoE load heat map; the busiest GPU sets the MoE's time).
// From the run's `dp_step` events (runtime/dp_group.py), simulated at full size.

import { PLOT_CONFIG, STAGE_KIND, THEME, plotLayout } from "../colors.js";
import { bindZoom } from "./cursor.js";

const MAX_COLS = 400; // steps drawn: the run's, evenly thinned to this many

export class DPRanksView {
  constructor(el, store, info) {
    this.el = el;
    this.store = store;
    this.info = info;
    this.id = "dp-ranks";
    this.title = "DP ranks";
    this.drawn = "";
  }

  steps() {
    const run = this.store.main;
    return (run && run.dp_step) || [];
  }

  // the track interface (store.js): render(store, axis) -> true when it drew; force redraws regardless
  render(store = this.store, axis = store.axis, force = false) {
    const stamp = this.store.stamp(["axis", "theme"]);
    if (!this.store.redrawDue(this, stamp, force)) return false;
    const all = this.steps();
    const panel = this.el.closest("section");
    if (panel) panel.dataset.empty = all.length ? "false" : "true"; // shown for a data-parallel run only
    if (!all.length) {
      Plotly.purge(this.el);
      this.info.textContent = "";
      return true;
    }
    const stride = Math.max(1, Math.ceil(all.length / MAX_COLS));
    const rows = all.filter((_, i) => i % stride === 0);
    const x = rows.map((st) => axis.toX(st.start_us));
    const ranks = rows[0].busy_us.length;
    const gpus = rows[0].expert_rows.length;
    const busy = [];
    for (let r = 0; r < ranks; r++) busy.push(rows.map((st) => st.busy_us[r] / st.dur_us));
    const load = [];
    for (let g = 0; g < gpus; g++) load.push(rows.map((st) => st.expert_rows[g]));
    const a2a = rows.map((st) => st.a2a_us / st.dur_us);
    const custom = rows.map((st) => [st.index, st.dur_us / 1e3, st.slowest_rank, st.a2a_kernels]);
    const traces = [
      { type: "heatmap", name: "busy share", meta: "busy", x, y: [...Array(ranks).keys()], z: busy, zmin: 0, zmax: 1,
        colorscale: [[0, THEME.panel], [1, STAGE_KIND.attention]], showscale: false, yaxis: "y", customdata: [custom],
        hovertemplate: "rank %{y}: busy %{z:.0%} of the step<extra>simulated at full size</extra>" },
      { type: "scatter", mode: "lines", name: "all-to-all share of the step", meta: "a2a", x, y: a2a, yaxis: "y2",
        line: { color: STAGE_KIND.collective, width: 1.5 }, customdata: custom,
        hovertemplate: "step %{customdata[0]}: all-to-all %{y:.0%} of %{customdata[1]:.2f} ms (%{customdata[3]}); slowest rank %{customdata[2]}<extra>simulated at full size</extra>" },
      { type: "heatmap", name: "expert rows", meta: "experts", x, y: [...Array(gpus).keys()], z: load,
        colorscale: [[0, THEME.panel], [1, STAGE_KIND.moe]], showscale: false, yaxis: "y3",
        hovertemplate: "GPU %{y}: %{z:.1f} token-expert rows per layer<extra>routing's expected load, simulated</extra>" },
    ];
    const layout = plotLayout({
      uirevision: "dp-ranks",
      showlegend: false,
      margin: { l: 50, r: 50, t: 10, b: 40 },
      xaxis: axis.xaxis({ anchor: "y3" }),
      yaxis: { title: { text: "DP rank" }, domain: [0.55, 1], autorange: "reversed", dtick: ranks > 8 ? 2 : 1 },
      yaxis2: { title: { text: "all-to-all" }, overlaying: "y", side: "right", range: [0, 1], tickformat: ".0%", showgrid: false, color: STAGE_KIND.collective },
      yaxis3: { title: { text: "experts of GPU" }, domain: [0, 0.45], autorange: "reversed", dtick: gpus > 8 ? 2 : 1 },
    });
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    bindZoom(this.el, this.store);
    const dur = all.reduce((a, st) => a + st.dur_us, 0) || 1;
    const idle = all.reduce((a, st) => a + st.busy_us.reduce((b, u) => b + (st.dur_us - u), 0), 0) / (dur * ranks);
    const share = all.reduce((a, st) => a + st.a2a_us, 0) / dur;
    this.info.textContent = `${ranks} ranks · ${all.length} lockstep steps · idle ${(100 * idle).toFixed(1)}% · all-to-all ${(100 * share).toFixed(1)}% of the step`;
    return true;
  }
}
