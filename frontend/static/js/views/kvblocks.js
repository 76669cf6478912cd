// KV blocks over simulated time: in use and free in the pool (from the bank snapshots), and the prefix-cache
// blocks each step's newly admitted requests reused instead of computing (the step's cached_blocks). Same time
// axis as the timeline.

import { PLOT_CONFIG, STEP_MIX, SERIES, plotLayout } from "../colors.js";
import { applyRange, listenRange } from "./cursor.js";

export class KvBlocksView {
  constructor(el, store, serving) {
    this.el = el;
    this.store = store;
    this.serving = serving;
    this.drawn = "";
    this.range = null;
    this.onRange = null;
  }

  render(force = false) {
    const stamp = this.store.stamp(["kvblocks"]);
    if (!force && stamp === this.drawn) return false;
    this.drawn = stamp;
    const k = this.serving.kv;
    const line = (name, x, y, color, extra = {}) => ({
      type: "scatter", mode: "lines", name, meta: name, x, y, line: { color, width: 1.5, shape: "hv" },
      hovertemplate: `${name}: %{y} blocks<br>t = %{x:.1f} µs<extra>simulated at full size</extra>`, ...extra,
    });
    const traces = [ // copies: Plotly.react sees an array mutated in place as unchanged
      line("in use", k.t.slice(), k.used.slice(), SERIES.used, { fill: "tozeroy", fillcolor: "rgba(255,158,100,0.15)" }),
      line("free", k.t.slice(), k.free.slice(), SERIES.free),
      {
        type: "scatter", mode: "markers", name: "prefix-cache hits", meta: "cached", x: k.cachedT.slice(), y: k.cached.slice(),
        marker: { color: STEP_MIX.cached, size: 5, symbol: "diamond" },
        hovertemplate: "%{y} cached blocks reused by requests admitted this step<br>t = %{x:.1f} µs<extra>prefix cache</extra>",
      },
    ];
    const layout = plotLayout({
      uirevision: this.store.scenario ? this.store.scenario.name : "",
      showlegend: true,
      legend: { orientation: "h", x: 0, y: 1.2, font: { size: 10 } },
      margin: { l: 50, r: 10, t: 20, b: 26 },
      xaxis: { range: this.range || [0, this.store.duration || 1], gridcolor: "#2a2e42", zeroline: false },
      yaxis: { title: { text: "KV blocks" }, gridcolor: "#2a2e42", rangemode: "tozero" },
    });
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    listenRange(this);
    return true;
  }

  setRange(range) {
    applyRange(this, range);
  }
}
