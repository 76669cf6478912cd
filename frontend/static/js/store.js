// The one timeline of events. Frames from the server land here; views read from here and are told
// what changed through version counters (`stamp`). Long histories are decimated so a long run stays cheap to draw.

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

export class Store {
  constructor() {
    this.ver = {}; // a counter per kind of change; a view redraws when the counters it reads moved
    this.listeners = [];
    this.reset(null);
  }

  reset(loaded) {
    this.loaded = loaded;
    this.scenario = loaded ? loaded.scenario : null;
    this.topology = loaded ? loaded.topology : null;
    this.duration = loaded ? loaded.duration_us : 0;
    this.clear();
  }

  clear() {
    this.t = 0;
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
    this.pageOps = []; // alloc/free/migrate/evict/crc for the bank grid, drained by it
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

  bump(key) {
    this.ver[key] = (this.ver[key] || 0) + 1;
  }

  // A stamp of the counters `keys` (plus resets): a view compares it with the one it last drew.
  stamp(keys) {
    let s = `${this.ver.reset || 0}`;
    for (const k of keys) s += `:${this.ver[k] || 0}`;
    return s;
  }
}
