// Serving state: what the request, step and deployment events say, kept beside the store (which stays the one
// timeline of events). It listens to the store's frames, rebuilds itself on a reset (load, seek), and bumps the
// store's counters "requests", "steps" and "deployment" so views redraw through store.stamp() like any other.
//
// The dashboard builds it once from the whole run (loadRun: loaded.overview's request, step, banks and deployment
// tables, in the run's order), so the lanes, step mix and histograms are drawn whole before play and never redrawn
// per frame; fed frame by frame (a run without an overview, tests/frontend) it grows as the run plays.
//
// Times: a step lasts dur_us for one layer and model_dur_us for the whole model (what a client sees). The engine
// places steps on the event clock either a whole-model step apart (the next step starts model_dur_us later:
// the clock already is the client's) or one layer apart (the clock is one layer's). `toModelUs` maps event time
// to whole-model time, stretching a step to its model duration only in the second case (gaps between steps,
// when the engine idles waiting for arrivals, stay as they are), so TTFT / TPOT / ITL here are what
// `vllm bench serve` would measure either way.

import { regroupLane } from "./poolgroups.js";
import { insertLane } from "./replicagroups.js";

// Where a step ends on the event clock: a whole-model step after its start, or one layer after it when the
// engine spaces steps one layer apart (known once the next step arrives; until then, as the step before).
export function stepEnd(s) {
  if (s.next !== undefined) return s.start + Math.min(s.next, s.mdur);
  return s.start + (s.stretch ? s.dur : s.mdur);
}

const MAX_POINTS = 4000; // KV block series kept (the latest)
const STATES = ["waiting", "prefill", "kv_wait", "transfer", "decode", "preempted", "recompute"];

export class Request {
  constructor(e) {
    this.id = e.request_id;
    this.input_len = e.input_len;
    this.output_len = e.output_len;
    this.arrive = e.t_us;
    this.instance = e.instance || 0; // the replica that served it (deployment.replicas; replicagroups.js)
    this.frontMs = (e.frontend_us || 0) / 1e3; // tokenizer, HTTP, SSE: the client sees every token this much later
    this.firstToken = null; // timeline µs
    this.finished = null;
    this.preemptions = 0;
    this.preemptAt = new Set(); // event times of its preemptions (the bank map tells a preemption's frees by them)
    this.state = "waiting";
    this.since = e.t_us; // start of the open segment
    this.segments = []; // closed: {state, t0, t1}
    this.tokens = []; // each output token: {t} (an event's time) or {step} (produced when that step ends)
  }

  close(t) {
    if (t >= this.since) this.segments.push({ state: this.state, t0: this.since, t1: t });
  }

  open(state, t) {
    this.close(t);
    this.state = state;
    this.since = t;
  }
}

export function percentile(sorted, q) {
  // linear interpolation between closest ranks (numpy's default, which vLLM's benchmark uses)
  if (!sorted.length) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

// Two ascending arrays merged into a new ascending one.
function mergeSorted(a, b) {
  const out = new Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) out[k++] = a[i] <= b[j] ? a[i++] : b[j++];
  while (i < a.length) out[k++] = a[i++];
  while (j < b.length) out[k++] = b[j++];
  return out;
}

export class ServingState {
  // live: false for a comparison's run B, built only from the whole run (loadRun) and never fed frames (one clock
  // streams one run: run A's)
  constructor(store, live = true) {
    this.store = store;
    this.clear();
    this.lastReset = store.ver.reset || 0;
    if (live) store.listeners.push((frame) => this.onFrame(frame));
  }

  clear() {
    this.requests = new Map(); // id -> Request
    this.order = []; // ids in arrival order (one lane each)
    this.steps = []; // step events, by start time (every instance's: a DP group's ranks share each start)
    this.lastStep = new Map(); // instance -> its latest step (each engine's steps chain on its own clock)
    this.stepsOf = new Map(); // instance -> its steps, by start time
    this.deployment = null;
    this.whole = false; // true when built from the whole run (loadRun)
    this.finishedCount = 0;
    this.preemptions = 0;
    this.stepOf = null; // cache for stepAt
    this.lat = { ttft: [], tpot: [], itl: [], e2el: [] }; // whole-model ms, appended as requests finish
    this.latFirst = new Set(); // ids whose TTFT was recorded
    this.byFinish = null; // finishOrder()'s cache, dropped when a request finishes
    this.kv = { t: [], used: [], free: [], cachedT: [], cached: [] }; // KV blocks over time (banks snapshots, steps)
  }

  onBanks(e) {
    const used = e.used.reduce((a, b) => a + b, 0);
    const k = this.kv;
    k.t.push(e.t_us);
    k.used.push(used);
    k.free.push(e.capacity * e.used.length - used);
    if (k.t.length > MAX_POINTS) for (const a of [k.t, k.used, k.free]) a.splice(0, a.length - MAX_POINTS);
  }

  // The whole run at once, from a decoded overview run (store.main). False when the run has no serving events.
  loadRun(run) {
    this.clear();
    this.whole = false;
    this.lastReset = this.store.ver.reset || 0;
    const evs = [];
    for (const kind of ["request", "step", "banks", "deployment"]) for (const e of (run && run[kind]) || []) evs.push({ ...e, kind });
    if (!evs.some((e) => e.kind === "request" || e.kind === "step")) return false;
    evs.sort((a, b) => a.seq - b.seq); // the run's own order (ties in time matter)
    this.ingest(evs);
    this.whole = true;
    for (const k of ["requests", "steps", "kvblocks", "deployment"]) this.store.bump(k);
    return true;
  }

  onFrame(frame) {
    if (this.whole) return; // drawn from the whole run: frames add nothing
    const reset = this.store.ver.reset || 0;
    if (frame.reset || reset !== this.lastReset) {
      this.lastReset = reset;
      this.clear();
      this.store.bump("requests");
      this.store.bump("steps");
      this.store.bump("kvblocks");
    }
    const { req, step, kv } = this.ingest(frame.events);
    if (req || step) this.store.bump("requests");
    if (step) this.store.bump("steps");
    if (kv || step) this.store.bump("kvblocks");
  }

  ingest(events) {
    let req = false;
    let step = false;
    let kv = false;
    for (const e of events) {
      if (e.kind === "request") {
        this.onRequest(e);
        req = true;
      } else if (e.kind === "step") {
        this.onStep(e);
        step = true;
      } else if (e.kind === "banks") {
        this.onBanks(e);
        kv = true;
      } else if (e.kind === "deployment") {
        this.deployment = e;
        this.store.bump("deployment");
      }
    }
    return { req, step, kv };
  }

  get active() {
    return this.order.length > 0 || this.steps.length > 0;
  }

  onRequest(e) {
    let r = this.requests.get(e.request_id);
    if (!r) {
      r = new Request(e);
      this.requests.set(e.request_id, r);
      insertLane(this.order, this.requests, r); // grouped by replica, arrival order within each
    }
    const t = e.t_us;
    switch (e.what) {
      case "arrive":
        break;
      case "scheduled":
        if (r.preemptions) r.open("recompute", t); // its prompt and generated tokens again
        else r.open("prefill", t);
        break;
      case "transfer_start": // disaggregated: a decode engine (this event's instance) has its blocks; the KV leaves
        r.decodeInstance = e.instance || 0;
        r.transferAt = t;
        r.open("transfer", t);
        regroupLane(this.order, this.requests, r); // its lane joins its prefill -> decode pair (poolgroups.js)
        break;
      case "transfer_done": // disaggregated: the first token reaches the client with the KV (docs/events.md)
        r.transferDone = t;
      // falls through: the KV in, its first token
      case "first_token":
        if (r.firstToken === null) {
          r.firstToken = t;
          r.tokens.push({ t });
          const ms = this.modelMs(r.arrive, t) + r.frontMs;
          this.lat.ttft.push(ms);
          this.latFirst.add(r.id);
        }
        r.open("decode", t);
        break;
      case "preempted":
        r.preemptions += 1;
        r.preemptAt.add(t);
        this.preemptions += 1;
        r.open("preempted", t);
        break;
      case "rejected": // longer than max_model_len: vLLM's server answered 400, it never runs
        r.open("done", t);
        break;
      case "finished":
        r.open("done", t);
        r.finished = t;
        this.finishedCount += 1;
        this.recordFinished(r);
        break;
      default:
        break;
    }
  }

  onStep(e) {
    const s = {
      index: e.index, start: e.start_us, dur: e.dur_us, mdur: e.model_dur_us, seqs: e.num_seqs,
      prefill: e.prefill_tokens, decode: e.decode_tokens, budget: e.token_budget,
      ids: e.request_ids, toks: e.num_tokens, sampled: e.num_sampled, cached: e.cached_blocks ?? null,
      offset: 0, // whole-model µs minus event µs at this step's start (filled below)
      stretch: false, // true when the event clock gives this step only dur_us (one layer)
      inst: e.instance || 0, // the engine that ran it (a DP rank, a replica, a pool's engine)
    };
    // the step before on the same engine: another engine's step (a DP rank stepping in lockstep starts at the same
    // time, a replica whenever its own clock says) says nothing about where this engine's steps end
    const prev = this.lastStep.get(s.inst);
    this.lastStep.set(s.inst, s);
    if (!this.stepsOf.has(s.inst)) this.stepsOf.set(s.inst, []);
    this.stepsOf.get(s.inst).push(s);
    if (prev) {
      prev.next = s.start - prev.start; // event µs to the next step
      prev.stretch = s.start - prev.start < prev.mdur * 0.999 && prev.mdur > prev.dur;
      s.stretch = prev.stretch; // until the next step says otherwise
      s.offset = prev.offset + (prev.stretch ? prev.mdur - prev.dur : 0);
    }
    this.steps.push(s);
    if (s.cached) {
      this.kv.cachedT.push(s.start);
      this.kv.cached.push(s.cached);
      if (this.kv.cachedT.length > MAX_POINTS) for (const a of [this.kv.cachedT, this.kv.cached]) a.splice(0, a.length - MAX_POINTS);
    }
    const end = stepEnd(s);
    // Which requests sampled a token is the step's own word (num_sampled, from the scheduler): never replayed here.
    // A prefill's first token comes with its first_token event; a decode's, or a recompute's last, with the step.
    for (let i = 0; i < s.ids.length; i++) {
      const r = this.requests.get(s.ids[i]);
      if (!r) continue;
      const sampled = s.sampled[i] > 0;
      if (sampled && r.state === "decode") r.tokens.push({ step: s }); // a decode token this step
      if (r.state === "prefill" || r.state === "recompute") {
        (r.chunks || (r.chunks = [])).push({ step: s, n: s.toks[i], state: r.state });
        if (r.state === "recompute" && sampled) {
          r.tokens.push({ step: s }); // the step that recomputes the last token samples the next one
          r.open("decode", end);
        }
      }
    }
  }

  // Timeline µs -> whole-model µs (see the header).
  toModelUs(t) {
    const st = this.steps;
    if (!st.length) return t;
    let lo = 0;
    let hi = st.length - 1;
    if (t < st[0].start) return t;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (st[mid].start <= t) lo = mid;
      else hi = mid - 1;
    }
    const s = st[lo];
    if (!s.stretch) return t + s.offset;
    const inStep = Math.min(t - s.start, s.dur);
    return s.start + s.offset + inStep * (s.mdur / s.dur) + Math.max(0, t - s.start - s.dur);
  }

  // Whole-model µs at which a token reached the client: its event's time, or the end of its step.
  tokenUs(tok) {
    return tok.step ? this.toModelUs(tok.step.start) + tok.step.mdur : this.toModelUs(tok.t);
  }

  modelMs(t0, t1) {
    return (this.toModelUs(t1) - this.toModelUs(t0)) / 1e3;
  }

  recordFinished(r) {
    const ttft = r.firstToken !== null ? this.modelMs(r.arrive, r.firstToken) + r.frontMs : NaN;
    const e2el = this.modelMs(r.arrive, r.finished) + r.frontMs;
    r.ttftMs = ttft;
    r.e2elMs = e2el;
    // vLLM: TPOT = (e2el - ttft) / (output_len - 1), excluding the first token; ITL = every gap between tokens
    r.tpotMs = r.output_len > 1 ? (e2el - ttft) / (r.output_len - 1) : NaN;
    if (Number.isFinite(r.tpotMs)) this.lat.tpot.push(r.tpotMs);
    this.lat.e2el.push(e2el);
    r.itlMs = [];
    for (let i = 1; i < r.tokens.length; i++) r.itlMs.push((this.tokenUs(r.tokens[i]) - this.tokenUs(r.tokens[i - 1])) / 1e3);
    for (const v of r.itlMs) this.lat.itl.push(v);
    this.byFinish = null;
  }

  // The finished requests in finish order, for latency figures that grow with the cursor (computed once):
  //   t[k]             the k-th finish, timeline µs (finishedBy(t) = how many finished at or before t)
  //   values[key]      TTFT / TPOT / ITL values (whole-model ms) in finish order, a request's values together
  //   ends[key][k]     how many of values[key] belong to the first k finished requests
  //   p50[key][k], p99[key][k]   their percentiles (NaN for none), exact, built by merging request by request
  finishOrder() {
    if (this.byFinish) return this.byFinish;
    const done = [...this.requests.values()].filter((r) => r.finished !== null).sort((a, b) => a.finished - b.finished);
    const out = { t: done.map((r) => r.finished), values: {}, ends: {}, p50: {}, p99: {} };
    const of = { ttft: (r) => [r.ttftMs], tpot: (r) => [r.tpotMs], itl: (r) => r.itlMs || [] };
    for (const [key, get] of Object.entries(of)) {
      const values = [];
      const ends = [0];
      const p50 = [NaN];
      const p99 = [NaN];
      let sorted = [];
      for (const r of done) {
        const mine = get(r).filter(Number.isFinite);
        for (const v of mine) values.push(v);
        ends.push(values.length);
        sorted = mergeSorted(sorted, mine.sort((a, b) => a - b));
        p50.push(percentile(sorted, 0.5));
        p99.push(percentile(sorted, 0.99));
      }
      out.values[key] = values;
      out.ends[key] = ends;
      out.p50[key] = p50;
      out.p99[key] = p99;
    }
    this.byFinish = out;
    return out;
  }

  // How many requests finished at or before timeline time t (a binary search of finishOrder().t).
  finishedBy(t) {
    const ft = this.finishOrder().t;
    let lo = 0;
    let hi = ft.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (ft[mid] <= t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  // The engines whose steps this run has, in order (one: [0]).
  instances() {
    return [...this.lastStep.keys()].sort((a, b) => a - b);
  }

  // Every engine's step running at timeline time t (started at or before t, not yet ended), in engine order.
  stepsAt(t) {
    const out = [];
    for (const i of this.instances()) {
      const s = this.stepAt(t, this.stepsOf.get(i));
      if (s && t <= stepEnd(s) * 1.000001) out.push(s);
    }
    return out;
  }

  // The step running at timeline time t (its start <= t), or null; of one engine's `st`, or of any engine's.
  stepAt(t, st = this.steps) {
    if (!st.length || t < st[0].start) return null;
    let lo = 0;
    let hi = st.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (st[mid].start <= t) lo = mid;
      else hi = mid - 1;
    }
    return st[lo];
  }

  // Distribution figures of one latency list: n, p50, p99, mean (whole-model ms).
  stats(name) {
    const v = [...this.lat[name]].sort((a, b) => a - b);
    const mean = v.length ? v.reduce((a, b) => a + b, 0) / v.length : NaN;
    return { n: v.length, p50: percentile(v, 0.5), p99: percentile(v, 0.99), mean, sorted: v };
  }

  // A disaggregated request's prefill end (its last chunk's step end), or null (no transfer, or no chunk seen).
  prefillEndUs(r) {
    if (r.transferAt === undefined || !r.chunks || !r.chunks.length) return null;
    return stepEnd(r.chunks[r.chunks.length - 1].step);
  }

  // Lane segments of request r up to timeline time `now` (the open one included).
  lanes(r, now) {
    const out = r.segments.filter((s) => s.state !== "prefill" && s.state !== "recompute");
    if (r.chunks) for (const c of r.chunks) out.push({ state: c.state, t0: c.step.start, t1: stepEnd(c.step), n: c.n });
    const end = this.prefillEndUs(r);
    if (end !== null && r.transferAt > end) out.push({ state: "kv_wait", t0: end, t1: r.transferAt }); // back-pressure
    if (r.state !== "done" && r.state !== "prefill" && r.state !== "recompute") out.push({ state: r.state, t0: r.since, t1: Math.max(now, r.since) });
    return out;
  }
}

export { STATES };
