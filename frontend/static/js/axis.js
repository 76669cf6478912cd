// The one time axis every time view shares (held by the store: store.axis).
//
//   axis.extent  [t0, t1]   the run's extent, simulated µs of one layer (what the events carry)
//   axis.range   [t0, t1] | null   the zoom, in the same µs; null means "the whole extent"
//   axis.cursor  t          playback time (store.t), simulated µs
//   axis.units   "layer" | "model"   one decoder layer as simulated, or the whole model (x num_layers)
//   axis.clock   "layer" | "model"   what the run's event clock counts (loaded.overview's run.clock): one layer
//                (one-request runs), or the whole model (serving runs: steps a whole-model step apart)
//
// A view never stores its own copy of the range: it asks the axis for x values (toX), the shown
// range (shown()), tick values and texts (ticks()), and hands a user's zoom back (store.setRange).
// The mapping from simulated µs to the x a plot draws is piecewise linear:
//   - units "model": every span of per-layer work lasts num_layers times as long; a whole-model one-off
//     cost (a kernel with scope "model", or stage "switch_over" from older runs) keeps its own length;
//   - units "layer": a one-off cost longer than BREAK_SHARE of the run is squeezed into a broken-axis
//     gap of BREAK_SHARE of the width, labelled with its true length (breaks()), so it cannot squeeze the run.
// On a whole-model clock (serving runs) units "model" is the clock itself (slope 1), and units "layer" shows each
// step as one layer runs it: its first dur_us (where the timeline draws its layer's kernels) at slope 1, the rest
// of the step (the other layers, lm_head, sampling, host time) squeezed out, idle time between steps divided
// by the layer count like the per-layer share of it.
// Plots show ms or µs (unit()), with ticks at 1/2/5 steps of that unit placed through the mapping.

const BREAK_SHARE = 0.04; // a squeezed one-off cost takes 4% of the axis: visible, never dominant
const BREAKS_MAX = 0.2; // all squeezed costs together take at most 20% of the axis
const SQUEEZED = 1e-9;
const NEAR_SHARE = 0.01; // one-off spans closer than 1% of the run make one break (one label, not a stack) // slope of a squeezed stretch: no width, but still a strictly increasing map

export function isOneOff(k) {
  return k.scope ? k.scope === "model" : k.stage === "switch_over";
}

function union(intervals) {
  const out = [];
  for (const [a, b] of [...intervals].sort((x, y) => x[0] - y[0])) {
    const last = out[out.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

// Pieces of `intervals` (sorted, unioned) joined where only idle time of `busy` lies between them.
function joinIdle(pieces, busy) {
  const merged = [];
  let k = 0;
  for (const piece of pieces) {
    const last = merged[merged.length - 1];
    while (k < busy.length && busy[k][1] <= (last ? last[1] : -Infinity)) k++;
    if (last && !(k < busy.length && busy[k][0] < piece[0])) last[1] = piece[1];
    else merged.push([...piece]);
  }
  return merged;
}

// The stages of whole-model costs that happen once (the switch-over): a stage whose kernels come back after per-layer
// work ran (a re-fetch each step, partial-eviction-spikes' spikes, the embedding of every step) is steady: it is
// the run's own rhythm, and squeezing it would hide it.
export function oneOffStages(runs) {
  const out = new Set();
  for (const r of runs) {
    const busy = union(r.kernel.filter((k) => !isOneOff(k)).map((k) => [k.start_us, k.start_us + k.dur_us]));
    const by = new Map();
    for (const k of r.kernel) if (isOneOff(k)) (by.get(k.stage) || by.set(k.stage, []).get(k.stage)).push([k.start_us, k.start_us + k.dur_us]);
    for (const [stage, iv] of by) if (joinIdle(union(iv), busy).length === 1) out.add(stage);
  }
  return out;
}

// The spans the axis may squeeze: where a whole-model one-off cost (oneOffStages) runs and no per-layer work of any
// of the runs does. Each span carries `what`: {stage: µs of its one-off kernels inside it}, the break's label.
export function oneOffSpans(runs) {
  const stages = oneOffStages(runs);
  const onceK = runs.flatMap((r) => r.kernel.filter((k) => isOneOff(k) && stages.has(k.stage)));
  const once = union(onceK.map((k) => [k.start_us, k.start_us + k.dur_us]));
  const busy = union(runs.flatMap((r) => r.kernel.filter((k) => !isOneOff(k) || !stages.has(k.stage)).map((k) => [k.start_us, k.start_us + k.dur_us])));
  const out = [];
  let j = 0;
  for (const [a0, b] of once) {
    let a = a0;
    while (j < busy.length && busy[j][1] <= a) j++;
    for (let k = j; k < busy.length && busy[k][0] < b; k++) {
      if (busy[k][0] > a) out.push([a, busy[k][0]]);
      a = Math.max(a, busy[k][1]);
    }
    if (a < b) out.push([a, b]);
  }
  // pieces with only idle time between them (launch gaps between back-to-back one-off kernels) make one break
  const merged = joinIdle(out, busy);
  for (const span of merged) span.what = costsIn(onceK, span[0], span[1]);
  return merged;
}

// {stage: µs} of the kernels overlapping [a, b], clipped to it
function costsIn(kernels, a, b) {
  const what = {};
  for (const k of kernels) {
    const d = Math.min(b, k.start_us + k.dur_us) - Math.max(a, k.start_us);
    if (d > 0) what[k.stage] = (what[k.stage] || 0) + d;
  }
  return what;
}

// Spans closer than `near` µs join into one (their `what` summed): adjacent breaks make one break, one label.
export function joinNear(spans, near) {
  const out = [];
  for (const sp of spans) {
    const last = out[out.length - 1];
    if (last && sp[0] - last[1] < near) {
      last[1] = Math.max(last[1], sp[1]);
      for (const [k, v] of Object.entries(sp.what || {})) last.what[k] = (last.what[k] || 0) + v;
    } else {
      const c = [sp[0], sp[1]];
      c.what = { ...(sp.what || {}) };
      out.push(c);
    }
  }
  return out;
}

export class TimeAxis {
  constructor() {
    this.extent = [0, 1];
    this.range = null;
    this.cursor = 0;
    this.units = "layer";
    this.layers = 1;
    this.spans = []; // one-off spans [t0, t1], simulated µs
    this.clock = "layer";
    this.steps = []; // whole-model clock: each step's [start, start + one layer's dur, start + model dur], µs
    this.ver = 0; // bumped on every change of range, units or mapping
    this.others = new Map(); // run role -> the axis of a run on another clock (see of())
    this.parent = null; // set on such an axis: it draws in its parent's unit (ms or µs) and units
    this.build();
  }

  // The axis a run's own event times go through: this one, or, for a run on another clock than the main run
  // (a compare run whose events count one layer beside a serving run's whole-model clock, or the other way),
  // that run's own mapping into the same x (whole-model time in units "model", one layer's in units "layer").
  of(run) {
    return (run && this.others.get(run.role)) || this;
  }

  // Main-run time t as the time of run's own clock at the same x (the bank map of a run on another clock).
  timeOf(run, t) {
    const ax = this.of(run);
    return ax === this ? t : ax.fromX(this.toX(t));
  }

  // Runs on another clock than the main run: [{role, clock, end (µs of its clock), spans, steps}].
  loadOthers(runs) {
    this.others = new Map();
    for (const r of runs) {
      const ax = new TimeAxis();
      ax.parent = this;
      ax.load(r.end, this.layers, r.spans, r.clock, r.steps);
      ax.setUnits(this.units);
      this.others.set(r.role, ax);
    }
    this.ver += 1;
  }

  // Called when a run loads: its extent, its layer count, its one-off spans and its clock ("model": the steps'
  // windows [start_us, dur_us, model_dur_us] say where each layer ran).
  load(duration, layers, spans, clock = "layer", steps = []) {
    if (clock !== "layer" && clock !== "model") throw new Error(`clock must be "layer" or "model", got ${clock}`);
    this.extent = [0, Math.max(duration, 1e-3)];
    this.layers = Math.max(1, layers || 1);
    this.clock = clock;
    this.steps = clock === "model" ? steps.map((s) => [s.start_us, s.start_us + s.dur_us, s.start_us + Math.max(s.model_dur_us, s.dur_us)]) : [];
    this.spans = clock === "model" ? [] : spans || []; // on a whole-model clock a one-off cost already has its length
    this.range = null;
    this.cursor = 0;
    this.others = new Map(); // loadOthers() adds the runs on another clock
    this.build();
  }

  // One layer of a whole-model clock: segments over the steps (see the header).
  buildSteps() {
    const [e0, e1] = this.extent;
    const segs = [];
    let t = e0;
    let x = 0;
    const push = (t1, slope) => {
      t1 = Math.min(t1, e1);
      if (t1 <= t) return;
      segs.push({ t0: t, t1, x0: x, slope });
      x += (t1 - t) * slope;
      t = t1;
    };
    for (const [a, b, c] of this.steps) {
      push(a, 1 / this.layers); // idle: waiting for arrivals
      push(b, 1);
      push(c, SQUEEZED);
    }
    push(e1, 1 / this.layers);
    if (!segs.length) segs.push({ t0: e0, t1: e1, x0: 0, slope: 1 });
    this.segs = segs;
    this.gaps = [];
    this.ver += 1;
  }

  // Segments {t0, t1, x0, slope} covering the extent: x = x0 + (t - t0) * slope.
  build() {
    if (this.clock === "model" && this.units === "layer") return this.buildSteps();
    const [e0, e1] = this.extent;
    const total = e1 - e0;
    const segs = [];
    let t = e0;
    let x = 0;
    const push = (t1, slope) => {
      if (t1 <= t) return;
      segs.push({ t0: t, t1, x0: x, slope });
      x += (t1 - t) * slope;
      t = t1;
    };
    const layerSlope = this.units === "model" && this.clock === "layer" ? this.layers : 1;
    this.spans = joinNear(this.spans, NEAR_SHARE * total);
    const big = this.spans.filter(([a, b]) => b - a > BREAK_SHARE * total);
    const bigLen = big.reduce((acc, [a, b]) => acc + (b - a), 0);
    const share = Math.min(BREAK_SHARE, BREAKS_MAX / Math.max(big.length, 1));
    this.gaps = [];
    for (const [a, b] of this.spans) {
      push(Math.max(a, e0), layerSlope);
      const len = Math.min(b, e1) - Math.max(a, t);
      if (len <= 0) continue;
      if (this.units === "layer" && len > BREAK_SHARE * total) {
        const slope = (share * Math.max(total - bigLen, total * 0.05)) / len; // a gap is `share` of the rest of the run
        const x0 = x;
        push(Math.min(b, e1), slope);
        this.gaps.push({ t0: a, t1: b, x0, x1: x, what: this.spans.find((sp) => sp[0] === a)?.what || {} });
      } else push(Math.min(b, e1), 1);
    }
    push(e1, layerSlope);
    if (!segs.length) segs.push({ t0: e0, t1: e1, x0: 0, slope: layerSlope });
    this.segs = segs;
    this.ver += 1;
  }

  setUnits(units) {
    if (units !== "layer" && units !== "model") throw new Error(`units must be "layer" or "model", got ${units}`);
    if (units === this.units) return;
    this.units = units;
    this.build();
    for (const ax of this.others.values()) ax.setUnits(units);
  }

  seg(t) {
    const s = this.segs;
    let lo = 0;
    let hi = s.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (t >= s[mid].t1) lo = mid + 1;
      else hi = mid;
    }
    return s[lo];
  }

  // Simulated time t (µs of the run's clock) in the units on screen, µs: what the clock, the story line and the
  // delta line print. One layer of a layer clock and the whole model of a model clock are the clock itself; the
  // whole model of a layer clock and one layer of a model clock go through the mapping (no broken-axis gap there).
  clockUs(t) {
    if (this.units === this.clock) return t;
    const g = this.seg(t);
    return g.x0 + (t - g.t0) * g.slope;
  }

  // simulated µs -> the x a plot draws (in the shown unit: see unit())
  toX(t) {
    if (t === null || t === undefined) return null;
    const g = this.seg(t);
    return (g.x0 + (t - g.t0) * g.slope) / this.scale();
  }

  // the inverse: x drawn -> simulated µs
  fromX(x) {
    const v = x * this.scale();
    for (const g of this.segs) {
      const end = g.x0 + (g.t1 - g.t0) * g.slope;
      if (v <= end || g === this.segs[this.segs.length - 1]) return Math.min(g.t1, g.t0 + (v - g.x0) / (g.slope || 1));
    }
    return this.extent[1];
  }

  // the displayed extent in µs (drawn as ms once it passes 5 ms, as s once it passes 5 s: scale())
  lengthUs() {
    const last = this.segs[this.segs.length - 1];
    return last.x0 + (last.t1 - last.t0) * last.slope;
  }

  scale() {
    if (this.parent) return this.parent.scale();
    const len = this.lengthUs();
    return len > 5e6 ? 1e6 : len > 5000 ? 1000 : 1;
  }

  unit() {
    return { 1: "µs", 1000: "ms", 1000000: "s" }[this.scale()];
  }

  title() {
    const what = this.units === "model" ? `whole model, ${this.layers} layers` : this.clock === "model" ? "one layer of each step" : "one layer";
    return `time, ${what} (${this.unit()})` + (this.gaps.length ? " · // one-off, axis broken" : "");
  }

  // the x range to draw: the zoom, else the whole extent
  shown() {
    if (this.range) return [this.toX(this.range[0]), this.toX(this.range[1])];
    // the whole extent: the end of whichever run (on its own clock) ends last
    let end = this.toX(this.extent[1]);
    for (const ax of this.others.values()) end = Math.max(end, ax.toX(ax.extent[1]));
    return [this.toX(this.extent[0]), end];
  }

  // Tick values and texts: 1/2/5 steps in the shown unit, counted in true simulated time within each
  // segment, so ticks on each side of a break read the real clock.
  ticks(target = 7) {
    const [x0, x1] = this.shown();
    const span = Math.max(x1 - x0, 1e-9);
    const raw = span / target;
    const p = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
    const vals = [];
    const text = [];
    if (this.units === "model" || this.clock === "model") {
      // x is the whole model's clock (or one layer's time, summed over the steps): nice values of x itself
      for (let v = Math.ceil(x0 / step) * step; v <= x1 + step * 1e-6; v += step) {
        vals.push(v);
        text.push(fmtTick(v, step));
      }
      return { tickvals: vals, ticktext: text };
    }
    const sc = this.scale();
    for (const g of this.segs) {
      if (this.gaps.some((gap) => gap.t0 === g.t0)) continue; // no ticks inside a broken-axis gap
      const stepT = step * sc;
      const lo = Math.max(g.t0, this.fromX(x0));
      const hi = Math.min(g.t1, this.fromX(x1));
      for (let t = Math.ceil(lo / stepT - 1e-9) * stepT; t <= hi + stepT * 1e-6; t += stepT) {
        const v = this.toX(t);
        if (vals.length && Math.abs(v - vals[vals.length - 1]) < step * 0.5) continue; // never overlap
        vals.push(v);
        text.push(fmtTick(t / sc, step));
      }
    }
    return { tickvals: vals, ticktext: text };
  }

  // Plotly shapes + annotations marking each broken-axis gap
  // widthPx: the plot's width, so labels (about 70 px each) never overlap
  breaks(widthPx = 900) {
    const shapes = [];
    const notes = [];
    const [v0, v1] = this.shown();
    let lastLabel = -Infinity;
    for (const g of this.gaps) {
      const a = g.x0 / this.scale();
      const b = g.x1 / this.scale();
      const labelled = (((a + b) / 2 - lastLabel) / Math.max(v1 - v0, 1e-9)) * widthPx > 75; // labels never overlap
      if (labelled) lastLabel = (a + b) / 2;
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0: a, x1: b, y0: 0, y1: 1, layer: "above",
        fillcolor: "rgba(128,128,128,0.25)", line: { width: 1, dash: "dot", color: "#8b93b8" } });
      if (labelled) notes.push({ x: (a + b) / 2, xref: "x", y: 1, yref: "paper", yanchor: "bottom", showarrow: false, text: `// ${breakLabel(g)}`,
        font: { size: 10 }, hovertext: `A whole-model one-off cost, ${fmtUs(g.t1 - g.t0)} of the clock: the axis is broken here so it does not squeeze the run. ${Object.entries(g.what || {}).map(([k, v]) => `${k} ${fmtUs(v)}`).join(", ")}` });
    }
    return { shapes, annotations: notes };
  }

  // a Plotly xaxis for a time plot (range and ticks from the shared axis)
  xaxis(extra = {}) {
    return { range: this.shown(), tickmode: "array", ...this.ticks(), title: { text: this.title(), standoff: 4 }, zeroline: false, ...extra };
  }
}

function fmtTick(v, step) {
  const digits = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  return v.toFixed(Math.min(digits, 3));
}

// A break's label from its data: the one-off stages inside it and their cost ("switch_over 2.30 ms"); the span's
// length when it carries none
export function breakLabel(g) {
  const what = Object.entries(g.what || {}).sort((x, y) => y[1] - x[1]);
  if (!what.length) return fmtUs(g.t1 - g.t0);
  const total = what.reduce((acc, [, v]) => acc + v, 0);
  const names = what.length > 2 ? `${what[0][0]} + ${what.length - 1} more` : what.map(([k]) => k).join(" + ");
  return `${names} ${fmtUs(total)}`;
}

function fmtUs(v) {
  return v >= 1000 ? `${(v / 1000).toFixed(2)} ms` : `${v.toFixed(1)} µs`;
}
