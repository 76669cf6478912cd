// KV blocks over simulated time: in use and free in the pool (from the bank snapshots), and the prefix-cache
// blocks each step's newly admitted requests reused instead of computing (the step's cached_blocks). Same time
// axis as the timeline.

import { PHASE, PLOT_CONFIG, STEP_MIX, legendAbove } from "../colors.js";
import { TimeTrack } from "../panels/track.js";

export class KvBlocksView extends TimeTrack {
  constructor(el, store, serving) {
    super(el, store, { id: "kv-blocks", title: "KV blocks", keys: ["kvblocks"] });
    this.serving = serving;
  }

  figure(ax, { shapes }) {
    const k = this.serving.kv;
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
    const layout = {
      uirevision: "kv-blocks",
      showlegend: true,
      legend: legendAbove(),
      margin: { l: 50, r: 10, t: 24, b: 26 },
      xaxis: ax.xaxis({ title: { text: "" } }),
      shapes,
      yaxis: { title: { text: "KV blocks" }, gridcolor: "#2a2e42", rangemode: "tozero" },
    };
    return { traces, layout, config: PLOT_CONFIG };
  }
}
