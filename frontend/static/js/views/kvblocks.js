// KV blocks over simulated time: in use and free in the pool (from the bank snapshots), and the prefix-cache
// blocks each step's newly admitted requests reused instead of computing (the step's cached_blocks). Same time
// axis as the timeline.

import { PHASE, PLOT_CONFIG, STEP_MIX, legendAbove, plotLayout } from "../colors.js";
import { bindZoom } from "./cursor.js";

export class KvBlocksView {
  constructor(el, store, serving) {
    this.el = el;
    this.store = store;
    this.serving = serving;
    this.id = "kv-blocks";
    this.title = "KV blocks";
    this.drawn = "";
  }

  // the track interface: render(store, axis) (main.js); a third argument forces a redraw
  render(_store = this.store, _axis = this.store.axis, force = false) {
    const s = this.store;
    const stamp = s.stamp(["kvblocks", "axis", "theme"]);
    if (!this.store.redrawDue(this, stamp, force)) return false;
    const k = this.serving.kv;
    const ax = s.axis;
    const X = (ts) => ts.map((t) => ax.toX(t)); // new arrays: Plotly.react sees an array mutated in place as unchanged
    const line = (name, x, y, color, extra = {}) => ({
      type: "scatter", mode: "lines", name, meta: name, x, y, line: { color, width: 1.5, shape: "hv" },
      hovertemplate: `${name}: %{y} blocks<extra>simulated at full size</extra>`, ...extra,
    });
    const traces = [
      line("in use", X(k.t), k.used.slice(), PHASE.prefill, { fill: "tozeroy" }),
      line("free", X(k.t), k.free.slice(), PHASE.decode),
      {
        type: "scatter", mode: "markers", name: "prefix-cache hits", meta: "cached", x: X(k.cachedT), y: k.cached.slice(),
        marker: { color: STEP_MIX.cached, size: 5, symbol: "diamond" },
        hovertemplate: "%{y} cached blocks reused by requests admitted this step<extra>prefix cache</extra>",
      },
    ];
    const layout = plotLayout({
      uirevision: "kv-blocks",
      showlegend: true,
      legend: legendAbove(),
      margin: { l: 50, r: 10, t: 24, b: 26 },
      xaxis: ax.xaxis({ title: { text: "" } }),
      shapes: ax.breaks().shapes,
      yaxis: { title: { text: "KV blocks" }, gridcolor: "#2a2e42", rangemode: "tozero" },
    });
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    bindZoom(this.el, s);
    return true;
  }
}
