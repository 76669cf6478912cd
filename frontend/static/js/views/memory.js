// HBM over simulated time: used (staircase), free, largest contiguous free run, KV cache.

import { applyRange, listenRange } from "./cursor.js";
import { PLOT_CONFIG, SERIES, plotLayout } from "../colors.js";

const GIB = 1024 ** 3;
const gib = (a) => a.map((v) => v / GIB);

export class MemoryView {
  constructor(el, store) {
    this.el = el;
    this.store = store;
    this.drawn = "";
    this.range = null;
    this.onRange = null; // linked axes
  }

  render(force = false) {
    const stamp = this.store.stamp(["memory"]);
    if (!force && stamp === this.drawn) return false;
    this.drawn = stamp;
    const m = this.store.memory;
    const line = (name, y, color, extra = {}) => ({
      type: "scatter", mode: "lines", name, x: m.t, y: gib(y), line: { color, width: 1.6, shape: "hv" },
      hovertemplate: `${name}: %{y:.2f} GiB<br>t = %{x:.1f} µs<extra>simulated at full size</extra>`, ...extra,
    });
    const traces = [
      line("HBM used", m.used, SERIES.used, { fill: "tozeroy", fillcolor: "rgba(255,158,100,0.15)" }),
      line("HBM free", m.free, SERIES.free),
      line("largest free run", m.largest, SERIES.largest, { line: { color: SERIES.largest, width: 1.2, dash: "dot", shape: "hv" } }),
      line("KV cache", m.kv, SERIES.kv, { line: { color: SERIES.kv, width: 1.2, shape: "hv" } }),
    ];
    const layout = plotLayout({
      uirevision: this.store.scenario ? this.store.scenario.name : "",
      showlegend: true,
      legend: { orientation: "h", x: 0, y: 1.12, font: { size: 10 } },
      margin: { l: 50, r: 10, t: 22, b: 30 },
      xaxis: { range: this.range || [0, this.store.duration || 1], gridcolor: "#2a2e42", zeroline: false, title: { text: "µs", standoff: 2 } },
      yaxis: { title: { text: "GiB" }, gridcolor: "#2a2e42", rangemode: "tozero" },
    });
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    listenRange(this);
    return true;
  }

  setRange(range) {
    applyRange(this, range);
  }
}
