// HBM over simulated time for the whole run (and its compare run, in its own colour): free memory, the
// largest contiguous free run and the KV cache. The line style is the series, the colour is the run;
// thresholds (the chunk scheduler's low-memory line) are drawn where the run comes near them.

import { SERIES, THEME, runColor } from "../colors.js";
import { TimeTrack } from "../panels/track.js";
import { htmlLegend } from "./series.js";

const GIB = 1024 ** 3;
const STYLE = { "HBM free": "solid", "largest free run": "dot", "KV cache": "dashdot" };

export class MemoryView extends TimeTrack {
  constructor(el, store, legend) {
    super(el, store, { id: "memory", title: "HBM memory" });
    this.legend = legend;
  }

  figure(ax, { shapes, annotations }) {
    const s = this.store;
    const traces = [];
    let minFree = Infinity;
    for (const run of s.runs) {
      const m = run.memory;
      const rx = ax.of(run); // a run on another clock has its own mapping (axis.js)
      const x = m.map((e) => rx.toX(e.t_us));
      const color = runColor(run.role);
      const tag = s.runs.length > 1 ? ` · ${run.label}` : "";
      for (const [name, key] of [["HBM free", "hbm_free_bytes"], ["largest free run", "largest_free_run_bytes"], ["KV cache", "kv_bytes"]]) {
        const y = m.map((e) => e[key] / GIB);
        if (key === "hbm_free_bytes") minFree = Math.min(minFree, ...y);
        traces.push({
          type: "scatter", mode: "lines", name: `${name}${tag}`, x, y,
          // run A drawn wider underneath, so where the runs agree both stay visible
          line: { color, width: (name === "HBM free" ? 2 : 1.4) * (run.role === "main" && s.runs.length > 1 ? 2 : 1), dash: STYLE[name], shape: "hv" },
          hovertemplate: `${name}${tag}: %{y:.2f} GiB<extra>simulated at full size</extra>`,
        });
      }
    }
    const thr = s.scenario && s.scenario.low_mem_threshold_gib;
    if (thr && minFree < 2 * thr) {
      // the chunk scheduler shrinks chunks when free HBM falls below this (scenario low_mem_threshold_gib)
      shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, y0: thr, y1: thr, line: { color: SERIES.threshold, dash: "dash", width: 1.2 } });
      annotations.push({ xref: "paper", x: 1, xanchor: "right", y: thr, yanchor: "bottom", showarrow: false, text: `low-memory threshold ${thr} GiB: chunks shrink below it`, font: { size: 10, color: SERIES.threshold } });
    }
    const layout = {
      margin: { l: 50, r: 10, t: ax.gaps.length ? 22 : 10, b: 40 }, // room above for the broken axis's labels
      yaxis: { title: { text: "GiB" }, rangemode: "tozero" },
      shapes,
      annotations,
    };
    if (!s.runs.length) layout.annotations = [{ text: "no run loaded", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5, font: { color: THEME.muted } }];
    const items = Object.entries(STYLE).map(([text, dash]) => ({ color: THEME.text, dash, text }));
    for (const run of s.runs.length > 1 ? s.runs : []) items.push({ color: runColor(run.role), text: `${run.role === "compare" ? "B" : "A"} ${run.label}` });
    htmlLegend(this.legend, items);
    return { traces, layout };
  }
}
