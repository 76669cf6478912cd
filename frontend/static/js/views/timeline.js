// Nsight-style kernel timeline: one row per stream, one bar per launch coloured by stage kind,
// chunk ids on prefill attention launches, phase bands behind, a "now" line. Zoom/pan via Plotly.

import { PHASE, PLOT_CONFIG, plotLayout, stageColor } from "../colors.js";
import { bytes, flops, pct, us } from "../format.js";
import { relayoutRange } from "./cursor.js";

const STREAM_ORDER = ["compute", "decode_fused", "comm", "copy"];
const MAX_STEP_LINES = 300; // engine step boundaries drawn when at most this many steps are in view // rows top to bottom, as in the Perfetto export

function hover(k) {
  const where = k.chunk !== null && k.chunk !== undefined ? `chunk ${k.chunk}` : k.step !== null && k.step !== undefined ? `step ${k.step}` : "";
  return (
    `<b>${k.name}</b><br>${k.stage} · ${k.stage_kind} · ${k.phase} ${where}<br>` +
    `start ${us(k.start_us)}, ${us(k.dur_us)}<br>${k.shapes || ""}<br>` +
    `${flops(k.flops)} · ${bytes(k.bytes)} · ${k.bound}-bound<br>HBM ${pct(k.hbm_util)} · L2 hit ${pct(k.l2_hit)}` +
    `<br><i>simulated at full size</i>`
  );
}

export class TimelineView {
  constructor(el, store, info) {
    this.el = el;
    this.store = store;
    this.info = info;
    this.drawn = "";
    this.onRange = null; // linked axes: called with [x0, x1] or null when the user zooms
    this.inited = false;
  }

  stamp() {
    return this.store.stamp(["kernels", "phase", "steps"]);
  }

  traces() {
    const s = this.store;
    const [r0, r1] = this.range || [0, s.duration || 1];
    const pxUs = (r1 - r0) / Math.max(this.el.clientWidth - 90, 100); // simulated µs per screen pixel
    const minDur = pxUs * 1.5; // a launch is drawn at least 1.5 px wide (hover keeps the true duration)
    // Decimation: per stream, launches starting in the same screen pixel share one bar, coloured by the
    // longest of them. Zoomed in, every launch is its own bar; zoomed out, a long run stays a few thousand.
    const byKind = new Map();
    const emit = (seg) => {
      const k = seg.rep;
      let t = byKind.get(k.stage_kind);
      if (!t) {
        t = { x: [], y: [], text: [], launches: 0 };
        byKind.set(k.stage_kind, t);
      }
      const end = Math.max(seg.end, seg.start + minDur);
      let h = k._hover || (k._hover = hover(k)); // built once per launch, not per redraw
      if (seg.n > 1) h += `<br><b>+${seg.n - 1} more launches in this pixel: zoom in</b>`;
      t.x.push(seg.start, (seg.start + end) / 2, end, null);
      t.y.push(k.stream, k.stream, k.stream, null);
      t.text.push(h, h, h, null);
      t.launches += seg.n;
    };
    const open = new Map(); // stream -> the bar being built
    let offscreen = 0;
    for (const k of s.kernels) {
      const end = k.start_us + k.dur_us;
      if (end < r0 || k.start_us > r1) {
        offscreen += 1;
        continue;
      }
      const px = Math.floor(k.start_us / pxUs);
      const cur = open.get(k.stream);
      if (cur && cur.px === px) {
        cur.n += 1;
        cur.end = Math.max(cur.end, end);
        if (k.dur_us > cur.rep.dur_us) cur.rep = k;
        continue;
      }
      if (cur) emit(cur);
      open.set(k.stream, { px, rep: k, start: k.start_us, end, n: 1 });
    }
    for (const seg of open.values()) emit(seg);
    const labels = { x: [], y: [], text: [] };
    for (const k of s.kernels) {
      if (k.stage_kind === "attention" && k.phase === "prefill" && k.chunk !== null && k.chunk !== undefined) {
        labels.x.push(k.start_us + k.dur_us / 2);
        labels.y.push(k.stream);
        labels.text.push(`c${k.chunk}`);
      }
    }
    const out = [];
    for (const [kind, t] of byKind) {
      out.push({
        type: "scatter",
        mode: "lines",
        name: kind,
        meta: { launches: t.launches },
        x: t.x,
        y: t.y,
        text: t.text,
        line: { color: stageColor(kind), width: 18 },
        hovertemplate: "%{text}<extra></extra>",
        connectgaps: false,
      });
    }
    out.push({
      type: "scatter",
      mode: "text",
      name: "chunk ids",
      meta: "chunk-labels",
      x: labels.x,
      y: labels.y,
      text: labels.text,
      textposition: "top center",
      textfont: { color: "#c0caf5", size: 11 },
      hoverinfo: "skip",
      cliponaxis: false,
    });
    this.offscreen = offscreen;
    return out;
  }

  shapes() {
    const s = this.store;
    const shapes = [];
    for (let i = 0; i < s.phases.length; i++) {
      const p = s.phases[i];
      const end = i + 1 < s.phases.length ? s.phases[i + 1].t : s.duration;
      shapes.push({
        type: "rect", xref: "x", yref: "paper", x0: p.t, x1: end, y0: 0, y1: 1, layer: "below",
        fillcolor: PHASE[p.phase] || "#333", opacity: 0.07, line: { width: 0 },
      });
    }
    // engine step boundaries (serving runs): a thin line where each step starts, when zoomed in enough to see them
    const steps = this.serving ? this.serving.steps : [];
    const [r0, r1] = this.range || [0, s.duration || 1];
    const inView = steps.filter((st) => st.start >= r0 && st.start <= r1);
    if (inView.length && inView.length <= MAX_STEP_LINES) {
      for (const st of inView) {
        shapes.push({ type: "line", xref: "x", yref: "paper", x0: st.start, x1: st.start, y0: 0, y1: 1, layer: "below", line: { color: "rgba(192,202,245,0.28)", width: 1, dash: "dot" } });
      }
    }
    return shapes;
  }

  render(force = false) {
    const stamp = this.stamp();
    if (!force && stamp === this.drawn) return false;
    this.drawn = stamp;
    const s = this.store;
    const seen = new Set(s.kernels.map((k) => k.stream));
    const streams = [...STREAM_ORDER.filter((x) => seen.has(x)), ...[...seen].filter((x) => !STREAM_ORDER.includes(x)).sort()];
    const layout = plotLayout({
      margin: { l: 70, r: 12, t: 18, b: 30 },
      uirevision: `${s.scenario ? s.scenario.name : ""}:${s.duration}`,
      xaxis: { range: this.range || [0, s.duration || 1], title: { text: "simulated time (µs)", standoff: 4 }, gridcolor: "#2a2e42", ticksuffix: "", zeroline: false },
      yaxis: {
        type: "category", categoryorder: "array", categoryarray: streams.length ? streams : ["compute"],
        range: [Math.max(streams.length, 1) - 0.5, -0.5], gridcolor: "#2a2e42", fixedrange: true, automargin: true,
      },
      shapes: this.shapes(),
      dragmode: "zoom",
      hovermode: "closest",
    });
    Plotly.react(this.el, this.traces(), layout, PLOT_CONFIG);
    if (!this.inited) {
      this.inited = true;
      this.el.on("plotly_relayout", (ev) => {
        const r = relayoutRange(ev);
        if (r !== undefined) this.zoomed(r);
      });
    }
    const attn = s.kernels.filter((k) => k.stage_kind === "attention" && k.phase === "prefill").length;
    let comm = 0;
    let busy = 0;
    for (const k of s.kernels) {
      busy += k.dur_us;
      if (k.stage_kind === "collective") comm += k.dur_us;
    }
    const steps = this.serving ? this.serving.steps.length : 0;
    this.info.textContent = `${s.kernels.length} launches · ${steps ? `${steps} steps` : `${s.chunks.length} chunks · ${attn} prefill attention launches`}` +
      (comm ? ` · communication ${((100 * comm) / busy).toFixed(1)}% of kernel time (one GPU of the group)` : "");
    return true;
  }

  zoomed(range) {
    if (this.syncing) return;
    this.range = range;
    this.drawn = ""; // redraw: thin launches get their minimum width at the new zoom
    if (this.onRange) this.onRange(range);
  }

  setRange(range) {
    if (!this.inited) return;
    this.range = range;
    this.drawn = "";
    this.syncing = true;
    Plotly.relayout(this.el, { "xaxis.range": range || [0, this.store.duration || 1] });
    this.syncing = false;
  }
}

const KIND_HELP = {
  norm: "RMSNorm: per-token normalisation, reads and writes activations (memory-bound)",
  gemm: "Matrix multiplies (QKV, output projection, dense FFN), with any fused dequantisation",
  attention: "Attention over the KV cache (flash attention in prefill, paged reads in decode)",
  moe: "Mixture of experts: router and the fused expert GEMMs",
  elementwise: "Element-wise kernels: RoPE, activation, residual adds",
  memory: "Copies and KV cache traffic: page writes, re-fetches, migrations",
  overhead: "Launch and switch-over costs that do no arithmetic",
  collective: "Communication between the GPUs of the group (all-reduce after attention and MoE, EP dispatch/combine) on the comm stream",
};

export function fillLegend(el) {
  for (const [kind, help] of Object.entries(KIND_HELP)) {
    const span = document.createElement("span");
    span.className = "key";
    span.title = help;
    const sw = document.createElement("i");
    sw.style.background = stageColor(kind);
    span.append(sw, document.createTextNode(kind));
    el.append(span);
  }
}
