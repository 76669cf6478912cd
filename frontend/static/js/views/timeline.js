// Nsight-style kernel timeline of the whole run: one lane per stream (and, for a comparison preset, one set
// of lanes per run, labelled in the run's colour), one bar per launch coloured by stage kind, chunk ids
// where they fit without overlapping, step and chunk boundaries when zoomed in enough to tell them apart,
// phase bands behind. Time is the shared axis (store.axis); zoom and reset go back to the store.
// Clicking a launch pins it in the detail pane (views/detail.js).

import { PHASE, STEP_MIX, THEME, plotLayout, runColor, stageColor, timeConfig } from "../colors.js";
import { bytes, flops, pct, us } from "../format.js";
import { busyByEngine, engineKind, engineLabel, keptEngines } from "../instances.js";
import { bindZoom } from "./cursor.js";

const STREAM_ORDER = ["steps", "compute", "decode_fused", "comm", "copy"]; // rows top to bottom, as in the Perfetto export ("steps": replicas, below)
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

// A run of several engines (DP ranks, replicas, or a disaggregated run's prefill and decode pools) gets one set of
// lanes per engine, named as instances.js names them (rank N, replica N, prefill N / decode N).
export function engineOf(run, k) {
  return engineLabel(run.summary, k.instance || 0);
}

// Replicas record their steps, but only replica 0 its kernels (runtime/replicas.py: every replica's launches would
// triple the run's events): each replica then gets a "steps" lane, its engine steps as bars, beside replica 0's
// kernel lanes.
export function stepLanes(run) {
  if (run._stepLanes === undefined) {
    run._stepLanes = engineKind(run.summary) === "replica" && run.kernel.every((k) => !k.instance) &&
      (run.step || []).some((e) => e.instance);
  }
  return run._stepLanes;
}

function manyEngines(run) {
  if (run._manyEngines === undefined) {
    run._manyEngines = stepLanes(run) || run.kernel.some((x) => (x.instance || 0) !== (run.kernel[0].instance || 0));
  }
  return run._manyEngines;
}

export function streamKey(run, k) {
  return manyEngines(run) ? `${engineOf(run, k)} · ${k.stream}` : k.stream;
}

// The engines of a run whose lanes are drawn: all, or with four or more DP ranks or replicas and the view folded,
// the slowest and the median (by busy time, engineBusy; instances.js keptEngines); {kept: Set | null (all), folded: n, tags}
export function shownEngines(run, unfold) {
  const kind = engineKind(run.summary);
  if (unfold || (kind !== "rank" && kind !== "replica") || !manyEngines(run)) return { kept: null, folded: 0, tags: {} };
  if (!run._kept) {
    const busy = engineBusy(run);
    const kept = keptEngines(busy);
    if (stepLanes(run) && !kept.includes(0)) kept.unshift(0); // the one replica whose kernels are recorded stays
    const total = Object.keys(busy).length;
    const byBusy = Object.keys(busy).map(Number).sort((a, b) => busy[b] - busy[a] || a - b);
    const tags = {};
    if (kept.length < total) {
      tags[byBusy[0]] = "slowest";
      const med = byBusy[Math.floor(byBusy.length / 2)];
      if (med !== byBusy[0]) tags[med] = "median";
    }
    run._kept = { kept: kept.length < total ? new Set(kept) : null, folded: total - kept.length, tags, kind };
  }
  return run._kept;
}

// busy µs per engine, what folding ranks them by: a DP group's per-rank busy time of every lockstep step (its dp_step
// events: the slowest rank sets the step), replicas' step time where only replica 0 has kernels, else kernel time
function engineBusy(run) {
  if ((run.dp_step || []).length) {
    const busy = {};
    for (const e of run.dp_step) (e.busy_us || []).forEach((b, r) => { busy[r] = (busy[r] || 0) + b; });
    return busy;
  }
  if (stepLanes(run)) return busyByEngine(run.step.map((e) => ({ instance: e.instance, dur_us: e.model_dur_us })));
  return busyByEngine(run.kernel);
}

const shown = (engines, k) => !engines.kept || engines.kept.has(k.instance || 0);

export class TimelineView {
  constructor(el, store, info, onPick) {
    this.el = el;
    this.store = store;
    this.info = info;
    this.onPick = onPick; // (run, kernel) when a launch is clicked
    this.id = "timeline";
    this.title = "kernel timeline";
    this.drawn = "";
    this.unfold = false; // every DP rank's / replica's lanes (else the slowest and the median, the rest folded)
    this.foldButton = document.createElement("button");
    this.foldButton.type = "button";
    this.foldButton.className = "fold hidden";
    this.foldButton.dataset.testid = "timeline-unfold";
    this.foldButton.title = "Show every engine's lanes, or only the slowest and the median engine's (the rest folded)";
    this.foldButton.addEventListener("click", () => this.setUnfold(!this.unfold));
    if (info) info.after(this.foldButton);
  }

  setUnfold(on) {
    this.unfold = Boolean(on);
    this.render(this.store, this.store.axis, true);
  }

  lanes() {
    const s = this.store;
    const many = s.runs.length > 1;
    const out = [];
    for (const run of s.runs) {
      const seen = new Set(run.kernel.map((k) => streamKey(run, k)));
      const engines = shownEngines(run, this.unfold);
      if (stepLanes(run)) for (const i of new Set(run.step.map((e) => e.instance || 0))) seen.add(`${engineLabel(run.summary, i)} · steps`);
      if (engines.kept) for (const k of [...run.kernel, ...(stepLanes(run) ? run.step : [])]) if (!shown(engines, k)) seen.delete(k.stream ? streamKey(run, k) : `${engineLabel(run.summary, k.instance || 0)} · steps`);
      const rank = (key) => { const st = key.split(" · ").pop(); const i = STREAM_ORDER.indexOf(st); return i < 0 ? STREAM_ORDER.length : i; };
      const engine = (key) => (key.includes(" · ") ? key.split(" · ")[0] : "");
      const streams = [...seen].sort((p, q) => engine(p).localeCompare(engine(q), undefined, { numeric: true }) || rank(p) - rank(q) || p.localeCompare(q));
      for (const st of streams) {
        const tag = Object.entries(engines.tags).find(([i]) => st.startsWith(`${engineLabel(run.summary, Number(i))} · `));
        out.push({ run, stream: st, name: laneName(run, st, many), tag: tag ? tag[1] : "" });
      }
      if (engines.folded) {
        const st = `${engines.folded} ${engines.kind}${engines.folded > 1 ? "s" : ""} folded`;
        out.push({ run, stream: st, name: laneName(run, st, many), tag: "", folded: true });
      }
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
      const engines = shownEngines(run, this.unfold);
      run.kernel.forEach((k, i) => {
        if (engines.kept && !shown(engines, k)) return;
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
    const out = this.stepTraces(pxX, minW);
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

  // each replica's engine steps on its "steps" lane (a run whose replicas past the first keep no kernels): one bar
  // per step, from its start for its whole-model duration, prefill steps and decode-only steps in their colours
  stepTraces(pxX, minW) {
    const s = this.store;
    const many = s.runs.length > 1;
    const [x0, x1] = s.axis.shown();
    const bars = { prefill: { x: [], y: [], text: [] }, decode: { x: [], y: [], text: [] } };
    for (const run of s.runs) {
      if (!stepLanes(run)) continue;
      const rx = s.axis.of(run);
      const engines = shownEngines(run, this.unfold);
      const last = new Map(); // lane -> the pixel its last bar started in (one bar a pixel)
      for (const e of run.step) {
        if (engines.kept && !shown(engines, e)) continue;
        const a = rx.toX(e.start_us);
        const b = rx.toX(e.start_us + e.model_dur_us);
        if (b < x0 || a > x1) continue;
        const name = `${engineLabel(run.summary, e.instance || 0)} · steps`;
        const px = Math.floor(a / pxX);
        if (last.get(name) === px) continue;
        last.set(name, px);
        const lane = laneName(run, name, many);
        const t = bars[e.prefill_tokens > 0 ? "prefill" : "decode"];
        const h = `<b>${engineLabel(run.summary, e.instance || 0)}, engine step ${e.index}</b>${many ? ` · ${run.label}` : ""}<br>` +
          `${e.num_seqs} sequences: ${e.prefill_tokens} prefill + ${e.decode_tokens} decode tokens<br>${us(e.model_dur_us)} whole model` +
          "<br><i>its kernels are recorded for replica 0 only · simulated at full size</i>";
        t.x.push(a, Math.max(b, a + minW), null);
        t.y.push(lane, lane, null);
        t.text.push(h, h, null);
      }
    }
    return Object.entries(bars).filter(([, t]) => t.x.length).map(([kind, t]) => ({
      type: "scatter", mode: "lines", name: `${kind} step`, meta: `${kind}-steps`, x: t.x, y: t.y, text: t.text, connectgaps: false,
      line: { color: STEP_MIX[kind], width: 10 }, hovertemplate: "%{text}<extra></extra>",
    }));
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
      const engines = shownEngines(run, this.unfold);
      for (const k of run.kernel) {
        if (k.stage_kind !== "attention" || k.phase !== "prefill" || k.chunk === null || k.chunk === undefined) continue;
        if (engines.kept && !shown(engines, k)) continue;
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
        ticktext: lanes.map((l) => {
          const text = l.folded ? `<i>${l.name}</i>` : l.tag ? `${l.name} (${l.tag})` : l.name;
          return s.runs.length > 1 ? `<span style="color:${tickColor(l)}">${text}</span>` : text;
        }),
      },
      shapes: this.shapes(),
      annotations: ax.breaks(this.el.clientWidth).annotations,
      dragmode: "zoom",
      hovermode: "closest",
    });
    const tall = lanes.length > 8 ? `${Math.min(900, 60 + 18 * lanes.length)}px` : ""; // unfolded ranks: 18 px a lane
    if (this.el.style.height !== tall) this.el.style.height = tall;
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
    this.showFold();
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

  // the fold control: shown when a run has four or more DP ranks or replicas; says what it would do. A run with
  // replicas' step lanes adds their two colours to the legend.
  showFold() {
    const legend = document.getElementById("timeline-legend");
    const steps = this.store.runs.some(stepLanes);
    if (legend && !steps) for (const k of legend.querySelectorAll("[data-key=steps]")) k.remove();
    if (legend && !legend.querySelector("[data-key=steps]") && steps) {
      for (const [kind, help] of [["prefill", "An engine step with prefill tokens in it (a replica's steps lane)"],
        ["decode", "An engine step of decode tokens only (a replica's steps lane)"]]) {
        const span = document.createElement("span");
        span.className = "key";
        span.dataset.key = "steps";
        span.title = help;
        const sw = document.createElement("i");
        sw.style.background = STEP_MIX[kind];
        span.append(sw, document.createTextNode(`${kind} step`));
        legend.append(span);
      }
    }
    const kinds = this.store.runs.map((run) => shownEngines(run, false)).filter((e) => e.folded);
    this.foldButton.classList.toggle("hidden", !kinds.length);
    if (!kinds.length) return;
    const what = kinds[0].kind === "rank" ? "ranks" : "replicas";
    this.foldButton.textContent = this.unfold ? `fold ${what}` : `unfold ${what}`;
    this.foldButton.setAttribute("aria-pressed", String(this.unfold));
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
