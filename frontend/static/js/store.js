// The one timeline of events and the one time axis. Frames from the server land here; views read from here
// and are told what changed through version counters (`stamp`). Long histories are decimated so a long run
// stays cheap to draw.
//
// The view interface. A track is {id, title, render(store, axis) -> bool (true when it drew)}:
//   - it reads events from the store (store.kernels: slim, see kernelRecord; store.memory, ...; or the whole run from
//     store.runs: [{role: "main"|"compare", label, summary, kernel: [...], memory: [...], ...}], decoded
//     from loaded.overview) and never removes anything from the store (read logs by index, as the bank map does);
//   - it reads the time axis from store.axis (js/axis.js: extent, range, cursor, units, toX, xaxis()) and keeps
//     no copy of the range: a user's zoom goes back through store.setRange(range) (null = the run's extent),
//     the "one layer / whole model" switch through store.setUnits(units); both bump the "axis" counter;
//   - it redraws when store.stamp([...keys, "axis"]) moved since it last drew;
//   - main.js's render loop calls render(store, store.axis) on every track of its `plots` list, at most one
//     Plotly redraw per animation frame; a new panel is its view (panels/track.js holds a time track's preamble)
//     and one entry in panels/index.js, from which the page and that list are built.

import { TimeAxis, oneOffSpans } from "./axis.js";

const MAX_SERIES = 4000; // points kept per time series before older points are thinned
const KEEP_RECENT = 800; // the most recent points are never thinned

export function num(v) {
  return typeof v === "string" ? Number(v) : v; // the server sends inf/nan as "Infinity"/"NaN"
}

function thin(arrays) {
  // Drop every other point of the older part of parallel arrays (keeps the staircase's shape coarse).
  const n = arrays[0].length;
  if (n <= MAX_SERIES) return;
  const cut = n - KEEP_RECENT;
  for (const a of arrays) {
    const old = a.slice(0, cut).filter((_, i) => i % 2 === 0);
    a.splice(0, cut, ...old);
  }
}

// loaded.overview's column tables -> arrays of plain objects (strings restored from each column's dict). Each row
// starts as a copy of one object holding every column, so it has its final shape at once instead of growing one
// property at a time: 1.6-3x faster on the first screen's path (a 61k-launch kernel table, cold code). A table with
// `shared` rows (server/overview.py SHARED: a launch's priced fields) keeps those columns there: a row's last cell
// indexes one, and the row starts as a copy of that shared row's object (its own cells then set).
export function decodeTable(tab) {
  const cols = tab.cols;
  const dict = tab.dict || {};
  const shape = {};
  for (const c of cols) shape[c] = null;
  const shared = tab.shared || null;
  const own = shared ? cols.filter((c) => !shared.cols.includes(c)) : cols;
  const starts = shared ? shared.rows.map((r) => cellsInto({ ...shape }, shared.cols, r, dict)) : null;
  const m = own.length;
  const dicts = own.map((c) => dict[c] || null);
  const rows = tab.rows;
  const out = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    const o = starts ? { ...starts[r[m]] } : { ...shape };
    for (let j = 0; j < m; j++) {
      const d = dicts[j];
      o[own[j]] = d ? d[r[j]] : r[j];
    }
    out[i] = o;
  }
  return out;
}

function cellsInto(o, cols, r, dict) {
  for (let j = 0; j < cols.length; j++) {
    const d = dict[cols[j]];
    o[cols[j]] = d ? d[r[j]] : r[j];
  }
  return o;
}

export function decodeRun(run) {
  const out = { role: run.role, label: run.label, summary: run.summary, clock: run.clock || "layer" };
  for (const [kind, tab] of Object.entries(run.tables || {})) out[kind] = decodeTable(tab);
  for (const k of ["kernel", "phase", "chunk", "memory", "decode_step", "crc", "fault", "numerics", "page_alloc", "request", "step"]) out[k] = out[k] || [];
  return out;
}

// The last moment of a run: its latest kernel end or decode step. A loop, not Math.max(...spread): a 60k-launch run
// passed 60k arguments (the first screen's path), and past ~120k a spread throws RangeError.
function runEnd(r) {
  let end = 0;
  for (const k of r.kernel) end = Math.max(end, k.start_us + k.dur_us);
  for (const e of r.decode_step) end = Math.max(end, e.t_us);
  return end;
}

export class Store {
  // A track redraws when its stamp moved, when forced, or when cursor.js cleared its element's axisDrawn mark
  // (Plotly moved the range itself); it records what it drew.
  redrawDue(view, stamp, force = false) {
    if (!force && stamp === view.drawn && view.el.dataset.axisDrawn) return false;
    view.drawn = stamp;
    view.el.dataset.axisDrawn = "1";
    return true;
  }

  constructor() {
    this.ver = {}; // a counter per kind of change; a view redraws when the counters it reads moved
    this.listeners = [];
    this.axis = new TimeAxis();
    this.reset(null);
  }

  // shown: false while the run's views are not set up yet (main.js sketches its timeline first): `scenario` stays
  // the one on screen before (null at first) until show(loaded), so nothing (a view, a test) takes the new run as
  // shown before that.
  reset(loaded, shown = true) {
    this.loaded = loaded;
    if (shown) this.scenario = loaded ? loaded.scenario : null;
    this.topology = loaded ? loaded.topology : null;
    this.duration = loaded ? loaded.duration_us : 0;
    const ov = loaded && loaded.overview;
    this.runs = ov ? ov.runs.map(decodeRun) : [];
    this.layers = ov ? ov.num_layers : 1;
    this.main = this.runs.find((r) => r.role === "main") || null;
    this.compareRun = this.runs.find((r) => r.role === "compare") || null;
    // one axis for both runs of a comparison: each drawn at its own clock, the extent the longer of the two.
    // The main run's clock sets the axis (a serving run's is the whole model's: see axis.js); a run on another
    // clock gets its own mapping into the same x (axis.of(run)), its extent counted on its own clock.
    const end = runEnd;
    const clock = this.main ? this.main.clock : "layer";
    const same = this.runs.filter((r) => r.clock === clock);
    this.extent = Math.max(this.duration, ...same.map(end));
    this.duration = this.extent; // playback runs to the end of the longer run (server/playback.py extent_us)
    this.axis.load(this.extent, this.layers, oneOffSpans(same), clock, clock === "model" ? this.main.step : []);
    this.axis.loadOthers(this.runs.filter((r) => r.clock !== clock).map((r) => ({ role: r.role, clock: r.clock, end: end(r), spans: oneOffSpans([r]), steps: r.step || [] })));
    this.bump("axis");
    this.bump("run");
    this.clear();
  }

  show(loaded) {
    this.scenario = loaded.scenario;
  }

  // The shared zoom: [t0, t1] in simulated µs (clamped to the run), or null for the run's whole extent.
  setRange(range) {
    const [e0, e1] = this.axis.extent;
    let r = null;
    if (range) {
      const a = Math.max(e0, Math.min(range[0], range[1]));
      const b = Math.min(e1, Math.max(range[0], range[1]));
      r = b - a > 1e-6 && (a > e0 + 1e-9 || b < e1 - 1e-9) ? [a, b] : null;
    }
    if (JSON.stringify(r) === JSON.stringify(this.axis.range)) return false;
    this.axis.range = r;
    this.axis.ver += 1;
    this.bump("axis");
    return true;
  }

  resetRange() {
    return this.setRange(null);
  }

  setUnits(units) {
    if (units === this.axis.units) return;
    this.axis.setUnits(units);
    this.bump("axis");
  }

  clear() {
    this.t = 0;
    this.axis.cursor = 0;
    this.seq = 0;
    this.frames = 0;
    this.dropped = 0;
    this.phase = "idle";
    this.phases = []; // {t, phase}
    this.kernels = [];
    this.chunks = [];
    this.decode = [];
    this.experts = [];
    this.memory = { t: [], used: [], free: [], largest: [], kv: [], total: 0 };
    this.banks = null; // latest occupancy snapshot
    this.pageOps = []; // alloc/free/migrate/evict/crc/fault for the bank grid, in order; read by index, never drained
    this.log = []; // faults, crc, alloc failures, numerics
    this.numerics = [];
    this.summary = null;
    this.lastKernel = null;
    this.frameKernels = [];
    this.ended = false;
    this.bump("reset");
  }

  apply(frame) {
    if (frame.reset) {
      this.clear();
    }
    this.seq = frame.seq;
    this.frames += 1;
    this.dropped = frame.dropped_snapshots || 0;
    this.t = frame.t_us;
    this.axis.cursor = frame.t_us;
    this.frameKernels = [];
    for (const e of frame.events) this.add(e);
    this.bump("clock");
    for (const fn of this.listeners) fn(frame);
  }

  add(e) {
    switch (e.kind) {
      case "kernel":
        this.kernels.push(e);
        this.frameKernels.push(e);
        this.lastKernel = e;
        this.phase = e.phase;
        this.bump("kernels");
        break;
      case "phase":
        this.phase = e.phase;
        this.phases.push({ t: e.t_us, phase: e.phase });
        this.bump("phase");
        break;
      case "chunk":
        this.chunks.push(e);
        this.bump("kernels");
        break;
      case "memory": {
        const m = this.memory;
        m.t.push(e.t_us);
        m.used.push(e.hbm_used_bytes);
        m.free.push(e.hbm_free_bytes);
        m.largest.push(e.largest_free_run_bytes);
        m.kv.push(e.kv_bytes);
        m.total = e.hbm_total_bytes;
        thin([m.t, m.used, m.free, m.largest, m.kv]);
        this.bump("memory");
        break;
      }
      case "banks":
        this.banks = e;
        this.bump("banks");
        break;
      case "page_alloc":
      case "page_free":
      case "page_migrate":
      case "page_evict":
        this.pageOps.push(e);
        this.bump("banks");
        break;
      case "crc":
      case "alloc_fail":
      case "fault":
        this.pageOps.push(e);
        this.log.push(e);
        this.bump("banks");
        this.bump("log");
        break;
      case "decode_step":
        this.decode.push(e);
        this.bump("latency");
        break;
      case "experts":
        this.experts.push(e);
        if (this.experts.length > MAX_SERIES) this.experts.splice(0, this.experts.length - MAX_SERIES);
        this.bump("experts");
        break;
      case "numerics":
        this.numerics.push(e);
        this.log.push(e);
        this.bump("log");
        break;
      case "summary":
        this.summary = e.figures;
        break;
      default:
        break;
    }
  }

  // A streamed kernel is slim (kind, t_us, stage, phase, dur_us, row: docs/protocol.md); its full record (name,
  // bytes, bound, shapes, ...) is row `row` of the main run's kernel table in loaded.overview.
  kernelRecord(k) {
    return (this.main && this.main.kernel[k.row]) || k;
  }

  bump(key) {
    this.ver[key] = (this.ver[key] || 0) + 1;
  }

  // A stamp of the counters `keys` (plus loads): a view compares it with the one it last drew. Views drawn from
  // the whole run do not redraw when playback rebuilds its streamed state (a seek, play from the start: "reset");
  // a view that reads streamed state names "reset" among its keys.
  stamp(keys) {
    let s = `${this.ver.run || 0}`;
    for (const k of keys) s += `:${this.ver[k] || 0}`;
    return s;
  }
}
