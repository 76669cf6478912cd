// Nsight-style kernel timeline of the whole run: one lane per stream (and, for a comparison preset, one set
// of lanes per run, labelled in the run's colour), one bar per launch coloured by stage kind, chunk ids
// where they fit without overlapping, step and chunk boundaries when zoomed in enough to tell them apart,
// phase bands behind. Time is the shared axis (store.axis); zoom and reset go back to the store.
// Clicking a launch pins it in the detail pane (views/detail.js).

import { PHASE, THEME, plotLayout, runColor, stageColor, timeConfig } from "../colors.js";
import { bytes, flops, pct, us } from "../format.js";
import { bindZoom } from "./cursor.js";

const STREAM_ORDER = ["compute", "decode_fused", "comm", "copy"]; // rows top to bottom, as in the Perfetto export
const LABEL_PX = 26; // a chunk label needs this many pixels to itself
const BOUNDARY_PX = 5; // step boundaries are drawn when steps are at least this far apart on screen

function hover(k, run, layers) {
  const where = k.chunk !== null && k.chunk !== undefined ? `chunk ${k.chunk}` : k.step !== null && k.step !== undefined ? `step ${k.step}` : "";
  const once = k.scope === "model" || (!k.scope && k.stage === "switch_over");
  return (
    `<b>${k.name}</b>${run ? ` · ${run}` : ""}<br>${k.stage} · ${k.stage_kind} · ${k.phase} ${where}<br>` +
    `start ${us(k.start_us)}, ${us(k.dur_us)}${once ? " (whole-model cost, paid once)" : ` one layer (${us(k.dur_us * layers)} for ${layers} layers)`}<br>${k.shapes || ""}<br>` +
    `${flops(k.flops)} · ${bytes(k.bytes)} · ${k.bound}-bound<br>HBM ${pct(k.hbm_util)}` +
    (k.l2_hit > 0 ? ` · ${pct(k.l2_hit)} of bytes from L2-resident data` : "") +
    "<br><i>simulated at full size · click to pin</i>"
  );
}

export function laneName(run, stream, many) {
  return many ? `${run.role === "compare" ? "B" : "A"} ${stream}` : stream;
}

// A run of several engines (replicas, or a disaggregated run's prefill and decode pools) gets one set of lanes per
// engine, named by its pool where the summary says it is disaggregated (docs/events.md: instances 0..x-1 prefill).
export function engineOf(run, k) {
  const s = run.summary;
  const i = k.instance || 0;
  if (s && s.disaggregated) return i < s.prefill_instances ? `prefill ${i}` : `decode ${i - s.prefill_instances}`;
  return `engine ${i}`;
}

export function streamKey(run, k) {
  if (run._manyEngines === undefined) run._manyEngines = run.kernel.some((x) => (x.instance || 0) !== (run.kernel[0].instance || 0));
  return run._manyEngines ? `${engineOf(run, k)} · ${k.stream}` : k.stream;
}

export class TimelineView {
  constructor(el, store, info, onPick) {
    this.el = el;
    this.store = store;
    this.info = info;
    this.onPick = onPick; // (run, kernel) when a launch is clicked
    this.id = "timeline";
    this.title = "kernel timeline";
    this.drawn = "";
  }

  lanes() {
    const s = this.store;
    const many = s.runs.length > 1;
    const out = [];
    for (const run of s.runs) {
      const seen = new Set(run.kernel.map((k) => streamKey(run, k)));
      const rank = (key) => { const st = key.split(" · ").pop(); const i = STREAM_ORDER.indexOf(st); return i < 0 ? STREAM_ORDER.length : i; };
      const engine = (key) => (key.includes(" · ") ? key.split(" · ")[0] : "");
      const streams = [...seen].sort((p, q) => engine(p).localeCompare(engine(q), undefined, { numeric: true }) || rank(p) - rank(q) || p.localeCompare(q));
      for (const st of streams) out.push({ run, stream: st, name: laneName(run, st, many) });
    }
    return out;
  }

  traces(lanes) {
    const s = this.store;
    const ax = s.axis;
    const [x0, x1] = ax.shown();
    const pxX = (x1 - x0) / Math.max(this.el.clientWidth - 110, 100); // drawn x per screen pixel
    const minW = pxX * 1.5; // a launch is drawn at least 1.5 px wide (hover keeps the true duration)
    const many = s.runs.length > 1;
    const byKind = new Map();
    let launches = 0;
    s.runs.forEach((run, ri) => {
      const open = new Map(); // lane -> the bar being built (launches starting in the same pixel share one)
      const emit = (seg) => {
        const k = seg.rep;
        let t = byKind.get(k.stage_kind);
        if (!t) byKind.set(k.stage_kind, (t = { x: [], y: [], text: [], cd: [] }));
        const end = Math.max(seg.end, seg.start + minW);
        let h = k._hover || (k._hover = hover(k, many ? run.label : "", s.layers));
        if (seg.n > 1) h += `<br><b>+${seg.n - 1} more launches in this pixel: zoom in</b>`;
        const lane = laneName(run, streamKey(run, k), many);
        t.x.push(seg.start, (seg.start + end) / 2, end, null);
        t.y.push(lane, lane, lane, null);
        t.text.push(h, h, h, null);
        t.cd.push([ri, seg.i], [ri, seg.i], [ri, seg.i], null);
      };
      const rx = ax.of(run); // a run on another clock than the main run has its own mapping (axis.js)
      run.kernel.forEach((k, i) => {
        const a = rx.toX(k.start_us);
        const b = rx.toX(k.start_us + k.dur_us);
        if (b < x0 || a > x1) return;
        launches += 1;
        const px = Math.floor(a / pxX);
        const key = streamKey(run, k);
        const cur = open.get(key);
        if (cur && cur.px === px) {
          cur.n += 1;
          cur.end = Math.max(cur.end, b);
          if (k.dur_us > cur.rep.dur_us) [cur.rep, cur.i] = [k, i];
          return;
        }
        if (cur) emit(cur);
        open.set(key, { px, rep: k, i, start: a, end: b, n: 1 });
      });
      for (const seg of open.values()) emit(seg);
    });
    this.launches = launches;
    const out = [];
    for (const [kind, t] of byKind) {
      out.push({
        type: "scatter", mode: "lines", name: kind, x: t.x, y: t.y, text: t.text, customdata: t.cd,
        line: { color: stageColor(kind), width: lanes.length > 4 ? 12 : 18 }, hovertemplate: "%{text}<extra></extra>", connectgaps: false,
      });
    }
    out.push(this.chunkLabels(pxX));
    out.push(this.boundaries(pxX, lanes));
    return out;
  }

  // c0, c1, ... over prefill attention launches, skipping any that would overlap its left neighbour
  chunkLabels(pxX) {
    const s = this.store;
    const ax = s.axis;
    const many = s.runs.length > 1;
    const labels = { x: [], y: [], text: [] };
    for (const run of s.runs) {
      let last = -Infinity;
      const rx = ax.of(run);
      for (const k of run.kernel) {
        if (k.stage_kind !== "attention" || k.phase !== "prefill" || k.chunk === null || k.chunk === undefined) continue;
        const x = rx.toX(k.start_us + k.dur_us / 2);
        if ((x - last) / pxX < LABEL_PX) continue;
        last = x;
        labels.x.push(x);
        labels.y.push(laneName(run, streamKey(run, k), many));
        labels.text.push(`c${k.chunk}`);
      }
    }
    return {
      type: "scatter", mode: "text", name: "chunk ids", meta: "chunk-labels", x: labels.x, y: labels.y, text: labels.text,
      textposition: "top center", textfont: { color: THEME.bright, size: 11 }, hoverinfo: "skip", cliponaxis: false, showlegend: false,
    };
  }

  // thin vertical lines where each decode step (and prefill chunk) starts, once they are far enough apart
  boundaries(pxX, lanes) {
    const s = this.store;
    const ax = s.axis;
    const x = [];
    const y = [];
    const text = [];
    const top = lanes.length ? lanes[0].name : "compute";
    const bottom = lanes.length ? lanes[lanes.length - 1].name : "compute";
    for (const run of s.runs) {
      // serving runs: every engine step (its batch); one-request runs: decode steps and prefill chunks
      const steps = run.step || [];
      const marks = steps.length
        ? steps.map((e) => [e.t_us, `engine step ${e.index}: ${e.num_seqs} sequences, ${e.prefill_tokens} prefill + ${e.decode_tokens} decode tokens`])
        : [...run.decode_step.map((e) => [e.t_us, `step ${e.step} starts`]), ...run.chunk.map((c) => [c.t_us, `chunk ${c.chunk} starts (${c.chunk_size} tokens, ${c.reason})`])];
      const rx = ax.of(run);
      const xs = marks.map((m) => rx.toX(m[0]));
      const [v0, v1] = ax.shown();
      const visible = xs.filter((v) => v >= v0 && v <= v1).length;
      if (!visible || (v1 - v0) / pxX / visible < BOUNDARY_PX) continue;
      marks.forEach((m, i) => {
        if (xs[i] < v0 || xs[i] > v1) return;
        x.push(xs[i], xs[i], null);
        y.push(top, bottom, null);
        text.push(m[1], m[1], null);
      });
    }
    return {
      type: "scatter", mode: "lines", name: "step boundaries", meta: "boundaries", x, y, text, connectgaps: false, showlegend: false,
      line: { color: THEME.muted, width: 1, dash: "dot" }, opacity: 0.6, hovertemplate: "%{text}<extra></extra>",
    };
  }

  shapes() {
    const s = this.store;
    const ax = s.axis;
    const shapes = [...ax.breaks(this.el.clientWidth).shapes];
    const main = s.main;
    const ph = main ? main.phase : [];
    for (let i = 0; i < ph.length; i++) {
      const end = i + 1 < ph.length ? ph[i + 1].t_us : s.extent;
      shapes.push({
        type: "rect", xref: "x", yref: "paper", x0: ax.toX(ph[i].t_us), x1: ax.toX(end), y0: 0, y1: 1, layer: "below",
        fillcolor: PHASE[ph[i].phase] || THEME.muted, opacity: 0.07, line: { width: 0 },
      });
    }
    return shapes;
  }

  // the track interface (store.js): render(store, axis) -> true when it drew; force redraws regardless
  render(store = this.store, axis = store.axis, force = false) {
    const s = this.store;
    const stamp = s.stamp(["axis", "theme"]);
    if (!this.store.redrawDue(this, stamp, force)) return false;
    const lanes = this.lanes();
    const names = lanes.map((l) => l.name);
    const ax = s.axis;
    const tickColor = (l) => runColor(l.run.role);
    const layout = plotLayout({
      margin: { l: 100, r: 12, t: 22, b: 40 },
      xaxis: ax.xaxis(),
      yaxis: {
        type: "category", categoryorder: "array", categoryarray: names.length ? names : ["compute"], fixedrange: true, automargin: true,
        range: [Math.max(names.length, 1) - 0.5, -0.5], tickvals: names,
        ticktext: lanes.map((l) => (s.runs.length > 1 ? `<span style="color:${tickColor(l)}">${l.name}</span>` : l.name)),
      },
      shapes: this.shapes(),
      annotations: ax.breaks(this.el.clientWidth).annotations,
      dragmode: "zoom",
      hovermode: "closest",
    });
    Plotly.react(this.el, this.traces(lanes), layout, timeConfig(() => s.resetRange()));
    bindZoom(this.el, s);
    if (!this.clickBound) {
      this.clickBound = true;
      this.el.on("plotly_click", (ev) => {
        const p = ev.points && ev.points.find((q) => Array.isArray(q.customdata));
        if (!p || !this.onPick) return;
        const [ri, ki] = p.customdata;
        const run = s.runs[ri];
        if (run) this.onPick(run, run.kernel[ki]);
      });
    }
    const main = s.main;
    if (main) {
      const attn = main.kernel.filter((k) => k.stage_kind === "attention" && k.phase === "prefill").length;
      let comm = 0;
      let busy = 0;
      for (const k of main.kernel) {
        busy += k.dur_us;
        if (k.stage_kind === "collective") comm += k.dur_us;
      }
      const steps = (main.step || []).length;
      this.info.textContent = `${main.kernel.length} launches · ${steps ? `${steps} engine steps` : `${main.chunk.length} chunks · ${attn} prefill attention launches`}` +
        (comm ? ` · communication ${((100 * comm) / busy).toFixed(1)}% of kernel time (one GPU of the group)` : "") +
        (s.compareRun ? ` · B (${s.compareRun.label}): ${s.compareRun.kernel.length} launches, ${s.compareRun.chunk.length} chunks` : "");
    }
    return true;
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
  collective: "Communication between the GPUs of the group (all-reduce after attention and MoE, EP dispatch/combine), on the comm stream",
};

export function fillLegend(el) {
  el.replaceChildren();
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
