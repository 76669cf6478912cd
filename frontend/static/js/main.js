// Wiring: one connection, one store (events + the shared time axis), the views, and one render loop that
// coalesces every update into at most one redraw per animation frame. The time plots draw the whole run
// (loaded.overview) and redraw only when the axis, units or theme change; during playback only the cursor
// (a canvas over each time plot), the serving views' overlays, the bank map, the topology and the log move, so
// playback stays cheap.

import { CELL, PHASE, setTheme } from "./colors.js";
import { Controls } from "./controls.js";
import { Exporter, addPanelButtons } from "./export.js";
import { Store } from "./store.js";
import { BanksView } from "./views/banks.js";
import { renderClaims } from "./views/claims.js";
import { TimeCursor } from "./views/cursor.js";
import { DetailPane } from "./views/detail.js";
import { ExpertsView } from "./views/experts.js";
import { LatencyView } from "./views/latency.js";
import { LogView } from "./views/log.js";
import { MemoryView } from "./views/memory.js";
import { NumericsView, hasNumerics } from "./views/numerics.js";
import { StagesView } from "./views/stages.js";
import { deltaLine, storyLine } from "./views/story.js";
import { TimelineView, fillLegend } from "./views/timeline.js";
import { TopologyView } from "./views/topology.js";
import { Tour } from "./views/tour.js";
import { Connection } from "./ws.js";
import { ServingState } from "./serving.js";
import { DeploymentView } from "./views/deployment.js";
import { KvBlocksView } from "./views/kvblocks.js";
import { LatencyDistView } from "./views/latencydist.js";
import { RequestsView, fillRequestLegend } from "./views/requests.js";
import { StepMixView } from "./views/stepmix.js";
import { SweepView } from "./views/sweep.js";
import { DPRanksView } from "./views/dpranks.js";

const $ = (id) => document.getElementById(id);
// Serving views are drawn from the whole run (serving.loadRun) like the time plots; only a run without an overview
// grows them with playback (requests finish, steps arrive). While playing they take turns: one serving redraw at most every SERVING_GAP_MS (longer after a slow one: a redraw of X ms
// waits X / SERVING_BUDGET), each view at most every SERVING_VIEW_MS, so they take a small share of the main
// thread and the animation keeps its frame rate (bench/README.md).
const SERVING_GAP_MS = 400;
const SERVING_VIEW_MS = 1200;
const SERVING_BUDGET = 0.2;
let servingFreeAt = 0;
const query = new URLSearchParams(location.search);

const store = new Store();
// read by tests and benchmarks: animation frames, messages, Plotly redraws and their cost, frame delivery
// delay (server created_ms to arrival, last 1000 frames), the longest main-thread task, exports
const stats = { liveDraws: 0, raf: 0, messages: 0, frames: 0, plotDraws: 0, drawsBy: {}, errors: [], renderMs: {}, delayMs: [], longestTaskMs: 0, exports: [] };
if (window.PerformanceObserver && PerformanceObserver.supportedEntryTypes.includes("longtask")) {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) stats.longestTaskMs = Math.max(stats.longestTaskMs, e.duration);
  }).observe({ type: "longtask", buffered: true });
}

const badTheme = query.has("theme") && !["dark", "light"].includes(query.get("theme"));
applyTheme(query.get("theme") || document.documentElement.dataset.theme || "dark");

let controls = null;
const serving = new ServingState(store); // request, step and deployment events as they play, beside the store
const servingB = new ServingState(store, false); // a comparison's run B, from its whole run (drawn beside A's)
const detail = new DetailPane($("detail"), store, (t) => controls.seek(t));
const timeline = new TimelineView($("timeline-plot"), store, $("timeline-info"), (run, k) => detail.pin(run, k));
const memory = new MemoryView($("memory-plot"), store, $("memory-legend"));
const latency = new LatencyView($("latency-plot"), store, $("latency-legend"));
const numerics = new NumericsView($("numerics-plot"), store);
const experts = new ExpertsView($("experts-plot"), store, $("experts-info"));
const stages = new StagesView($("stages-plot"), store);
const requests = new RequestsView($("requests-plot"), store, serving, $("requests-info"), servingB);
fillRequestLegend($("requests-legend"));
const stepmix = new StepMixView($("stepmix-plot"), store, serving, $("stepmix-info"), servingB);
const dpranks = new DPRanksView($("dpranks-plot"), store, $("dpranks-info")); // DP ranks in lockstep (issue 20)
const latdist = new LatencyDistView($("latdist-plot"), store, serving, $("latdist-info"), servingB);
const kvblocks = new KvBlocksView($("kvblocks-plot"), store, serving);
const servingPanels = [$("requests"), $("step-mix"), $("latency-dist")];
const servingPlots = new Map([requests, stepmix, latdist, kvblocks].map((v) => [v, 0])); // view -> when it may draw next
const plots = [timeline, memory, latency, stages, numerics, experts, requests, stepmix, latdist, kvblocks, dpranks];
const timePlots = [timeline, memory, latency, numerics, requests, stepmix, kvblocks, dpranks];
const banks = new BanksView($("banks-canvas"), store, $("banks-info"), $("banks-legend"), serving);
const topology = new TopologyView($("topology-svg"), store, $("topo-phase"), [...document.querySelectorAll("#topology .tabs button")]);
const log = new LogView($("events-log"), store);
const cursors = timePlots.map((v) => new TimeCursor(v.el));
const exporter = new Exporter(store, stats);

// Hover links entities across panels (one entity, one mark everywhere): a stage in the stages panel or a node of
// the topology marks the same stage in the other; a request's lane marks its pages in the bank map, a page its lane.
// body.dataset.linked says what is linked now (tests).
function linkStage(id) {
  for (const n of document.querySelectorAll("#topology-svg g.node")) n.classList.toggle("linked", id !== null && n.dataset.stage === id);
  stages.link(id);
  document.body.dataset.linked = id === null ? "" : `stage:${id}`;
}
function linkRequest(role, id) {
  const on = id !== null && id !== undefined;
  banks.link(role, on ? id : null);
  requests.link(role, on ? id : null);
  document.body.dataset.linked = on ? `request:${role === "compare" ? "B" : "A"}:${id}` : "";
}
stages.onHover = linkStage;
$("topology-svg").addEventListener("mouseover", (ev) => {
  const n = ev.target.closest && ev.target.closest("g.node");
  linkStage(n ? n.dataset.stage : null);
});
$("topology-svg").addEventListener("mouseleave", () => linkStage(null));
requests.onHover = (role, id) => linkRequest(role, id ?? null);
banks.onHover = (role, id) => linkRequest(role, id ?? null);

const conn = new Connection(onMessage, (status) => {
  $("status").textContent = status;
  $("status").dataset.state = status === "live" ? "live" : "down";
});
conn.resume = () => ({ t_us: store.t, playing: controls ? controls.playing : false });
controls = new Controls(conn, store);
controls.toast = (text, kind) => toast(text, kind);
controls.extraQuery = () => extraQuery();
controls.onKernelKey = (dir) => walkKernel(dir);
const deployment = new DeploymentView($("deployment"), store, serving, (set) => controls.loadWith(set));
const sweep = new SweepView($("sweep"), store, {
  scenario: () => controls.select.value,
  currentSet: () => controls.currentSet || {},
  load: (name, set) => controls.choose(name, set),
});
const tour = new Tour($("tour"), store, {
  play: () => controls.play(),
  pause: () => controls.pause(),
  seek: (t) => controls.seek(t),
});

// [ and ]: pin run A's previous / next launch (from the pinned one, else from the playback time), move the playback
// there and keep it in view: every kernel is reachable from the keyboard.
function walkKernel(dir) {
  const run = store.main;
  if (!run || !run.kernel.length) return;
  const order = walkKernel.order && walkKernel.order.run === run ? walkKernel.order.rows
    : (walkKernel.order = { run, rows: run.kernel.map((_, i) => i).sort((x, y) => run.kernel[x].start_us - run.kernel[y].start_us || x - y) }).rows;
  const p = detail.pinned && detail.pinned.run === run ? order.indexOf(run.kernel.indexOf(detail.pinned.k)) : -1;
  let i;
  if (p >= 0) i = Math.max(0, Math.min(order.length - 1, p + dir));
  else {
    i = order.findIndex((r) => run.kernel[r].start_us >= store.t - 1e-6);
    if (i < 0) i = order.length - 1;
    if (dir < 0 && i > 0 && run.kernel[order[i]].start_us > store.t) i -= 1;
  }
  const k = run.kernel[order[i]];
  detail.pin(run, k);
  controls.pause();
  controls.seek(k.start_us);
  const r = store.axis.range;
  if (r && (k.start_us < r[0] || k.start_us + k.dur_us > r[1])) {
    const w = r[1] - r[0];
    store.setRange([k.start_us - w / 2, k.start_us + w / 2]);
  }
  $("status").dataset.kernel = `${order[i]}`; // read by tests
}

function applyTheme(name) {
  const t = setTheme(name);
  document.documentElement.dataset.theme = t;
  const btn = $("theme-toggle");
  if (btn) {
    btn.textContent = t === "light" ? "dark" : "light";
    btn.setAttribute("aria-pressed", String(t === "light"));
  }
  fillLegend($("timeline-legend"));
  store.bump("theme");
  return t;
}

// The units the user chose (the switch, or ?units= in the URL); null: each run opens in its own clock's units
// (a serving run in whole-model time, what a client measures; a one-request run in one layer's).
let chosenUnits = ["layer", "model"].includes(query.get("units")) ? query.get("units") : null;

function applyUnits(units) {
  store.setUnits(units);
  for (const b of document.querySelectorAll("[data-units]")) {
    const on = b.dataset.units === store.axis.units;
    b.classList.toggle("on", on);
    b.setAttribute("aria-pressed", String(on));
  }
  // the story line, the delta line and the clock say their times in the same units as the axes
  if (store.scenario) {
    $("story-line").innerHTML = storyLine(store);
    $("delta-line").innerHTML = deltaLine(store);
  }
}

function runUnits() {
  return chosenUnits || (store.main && store.main.clock === "model" ? "model" : "layer");
}

// settings that live in the URL beside the scenario's: theme and units
function extraQuery() {
  const q = {};
  if (document.documentElement.dataset.theme === "light") q.theme = "light";
  if (chosenUnits) q.units = chosenUnits;
  return q;
}

// A link's moment: ?t= (playback time, µs of the run's clock), &x0=&x1= (the zoom, µs), &step= (tour step, from 1),
// &kernel= (the pinned launch: its run, A or B, and its row in that run's kernel table, e.g. A12). Read once and
// applied when the link's run loads; written back as they change (never while playing), so a link is a moment.
function readMoment(q) {
  const m = {};
  const bad = [];
  for (const k of ["t", "x0", "x1"]) {
    if (!q.has(k)) continue;
    const v = Number(q.get(k));
    if (q.get(k) !== "" && Number.isFinite(v) && v >= 0) m[k] = v;
    else bad.push(`${k}=${q.get(k)}: a time in µs, 0 or more`);
  }
  if (q.has("step")) {
    const v = Number(q.get("step"));
    if (Number.isInteger(v) && v >= 1) m.step = v;
    else bad.push(`step=${q.get("step")}: a tour step, 1 or more`);
  }
  if (q.has("kernel")) {
    const r = /^([AB])(\d+)$/.exec(q.get("kernel"));
    if (r) m.kernel = { role: r[1] === "A" ? "main" : "compare", row: Number(r[2]) };
    else bad.push(`kernel=${q.get("kernel")}: a run and a launch, e.g. A12`);
  }
  return { m, bad, scenario: q.get("scenario") };
}
let moment = readMoment(query);
window.addEventListener("popstate", () => (moment = readMoment(new URLSearchParams(location.search)))); // Back: that entry's moment

function applyMoment() {
  const { m, bad, scenario } = moment;
  moment = null;
  if (scenario && store.scenario.name !== scenario) return; // the link's run was refused: its moment does not apply
  if (("x0" in m) !== ("x1" in m) || ("x0" in m && !(m.x1 > m.x0))) bad.push("x0, x1: the zoom needs both, x0 < x1");
  else if ("x0" in m) store.setRange([m.x0, m.x1]);
  if (m.kernel) {
    const run = store.runs.find((r) => r.role === m.kernel.role);
    const k = run && run.kernel[m.kernel.row];
    if (k) detail.pin(run, k);
    else bad.push(`kernel: run ${m.kernel.role === "main" ? "A" : "B"} has no launch ${m.kernel.row}`);
  }
  let t = m.t;
  if (m.step) {
    const steps = (store.scenario.tour || []).length;
    if (m.step > steps) bad.push(`step=${m.step}: this preset's tour has ${steps} steps`);
    else {
      if (t === undefined) t = tour.stepTime(m.step - 1);
      tour.arrive(m.step - 1, t);
    }
  }
  if (t !== undefined) {
    if (t > store.duration) bad.push(`t=${t}: past the end of the run (${Math.round(store.duration)} µs)`);
    else controls.seek(t);
  }
  if (bad.length) toast(`link: ${bad.join("; ")}`, "error");
}

// The moment on screen as URL parameters (see readMoment).
function momentQuery() {
  const q = {};
  if (store.t > 0) q.t = String(+store.t.toPrecision(9));
  if (store.axis.range) [q.x0, q.x1] = store.axis.range.map((v) => String(+v.toPrecision(9)));
  if (tour.index >= 0) q.step = String(tour.index + 1);
  const p = detail.pinned;
  if (p) {
    if (!p.row || p.row[0] !== p.k) p.row = [p.k, p.run.kernel.indexOf(p.k)];
    if (p.row[1] >= 0) q.kernel = `${p.run.role === "main" ? "A" : "B"}${p.row[1]}`;
  }
  return q;
}

let momentAt = 0;
function keepMoment(now) {
  if (now < momentAt || !store.scenario || moment || controls.playing) return;
  momentAt = now + 400;
  const q = new URLSearchParams(location.search);
  const was = q.toString();
  for (const k of ["t", "x0", "x1", "step", "kernel"]) q.delete(k);
  for (const [k, v] of Object.entries(momentQuery())) q.set(k, v);
  if (q.toString() !== was) history.replaceState(history.state, "", `${location.pathname}?${q}`);
}

function refreshURL() {
  const q = new URLSearchParams(location.search);
  for (const k of ["theme", "units"]) q.delete(k);
  for (const [k, v] of Object.entries(extraQuery())) q.set(k, v);
  history.replaceState(null, "", `${location.pathname}?${q}`);
}

$("theme-toggle").addEventListener("click", () => {
  applyTheme(document.documentElement.dataset.theme === "light" ? "dark" : "light");
  refreshURL();
});
for (const b of document.querySelectorAll("[data-units]")) {
  b.addEventListener("click", () => {
    chosenUnits = b.dataset.units;
    applyUnits(b.dataset.units);
    refreshURL();
  });
}
$("goto-step").addEventListener("change", (ev) => {
  const n = Number(ev.target.value);
  if (!store.main || !Number.isInteger(n) || !detail.goTo(store.main, "step", n)) toast(`go to step: run A has no decode step ${ev.target.value} (0 to ${store.main ? store.main.decode_step.length - 1 : 0})`, "error");
});
$("cue-play").addEventListener("click", () => controls.play());
$("cue-tour").addEventListener("click", () => tour.next());
for (const b of document.querySelectorAll("[data-export=dashboard]")) {
  b.addEventListener("click", () => {
    $("files-menu").open = false;
    exporter.dashboard(b.dataset.format).then((n) => toast(`exported ${n}`)).catch((e) => toast(`export failed: ${e.message}`, "error"));
  });
}
addPanelButtons(exporter, (t, k) => toast(t, k));

// The message line sits in the story bar, never over a panel.
function toast(text, kind = "info") {
  const t = $("toast");
  t.textContent = text;
  t.className = `toast ${kind}`;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.add("hidden"), kind === "error" ? 12000 : 8000);
}

// Panels with nothing to show for this run collapse; the remaining ones of a row share its width.
function collapsePanels() {
  const has = {
    numerics: hasNumerics(store),
    experts: store.runs.some((r) => r.experts && r.experts.length),
    latency: store.runs.some((r) => r.decode_step.length),
  };
  for (const [id, on] of Object.entries(has)) $(id).classList.toggle("collapsed", !on);
  const row = ["stages", "numerics", "experts"].filter((id) => !$(id).classList.contains("collapsed"));
  for (const id of ["stages", "numerics", "experts"]) $(id).classList.remove("full", "third", "half");
  for (const id of row) $(id).classList.add(row.length === 1 ? "full" : row.length === 2 ? "half" : "third");
  if (!has.latency) $("memory").classList.replace("half", "full");
  else $("memory").classList.replace("full", "half");
  $("timeline").classList.toggle("two", store.runs.length > 1);
  for (const v of plots) if (v.el.offsetParent && v.el._fullLayout) Plotly.Plots.resize(v.el);
}

// Serving panels show for runs of more than one request (a one-request run keeps the classic layout).
let servingShown = null;
function showServing() {
  const w = store.scenario && store.scenario.workload;
  const on = Boolean((w && w.num_requests > 1) || serving.order.length > 1);
  if (on === servingShown) return;
  servingShown = on;
  for (const p of servingPanels) p.dataset.empty = on ? "false" : "true";
  $("kvblocks-plot").classList.toggle("hidden", !on);
  for (const v of servingPlots.keys()) v.drawn = ""; // drawn once visible, at their real size
}

function onMessage(msg) {
  stats.messages += 1;
  switch (msg.type) {
    case "loaded":
      store.reset(msg); // a new run starts unzoomed: the shared axis shows the run's extent, cursor at 0
      serving.loadRun(store.main); // the serving views' whole run, drawn before play (never redrawn per frame)
      if (!servingB.loadRun(store.compareRun)) servingB.clear(); // run B beside it (empty: no B lanes, steps, bars)
      applyUnits(runUnits());
      detail.clear();
      servingShown = null;
      showServing();
      deployment.onLoaded();
      sweep.sync(servingShown);
      collapsePanels();
      controls.onLoaded(msg);
      tour.load(msg.scenario, msg.tour_results || []);
      renderClaims($("claims-body"), msg.claims, msg.compare, store.runs.map((r) => r.label), store.runs, msg.scenario.sla_ms);
      $("story-line").innerHTML = storyLine(store);
      $("delta-line").innerHTML = deltaLine(store);
      $("cue-tour").classList.toggle("hidden", !(msg.scenario.tour || []).length);
      $("cue-tour").textContent = `start the ${(msg.scenario.tour || []).length}-step tour`;
      document.title = `LayerScope — ${msg.scenario.name}`;
      if (moment) applyMoment();
      break;
    case "frame":
      stats.frames += 1;
      if (msg.created_ms) {
        stats.delayMs.push(Date.now() - msg.created_ms);
        if (stats.delayMs.length > 1000) stats.delayMs.shift();
      }
      store.apply(msg);
      break;
    case "state":
      controls.onState(msg);
      break;
    case "end":
      store.ended = true;
      store.summary = msg.summary;
      toast(`run finished: ${summaryLine(msg.summary)} · press play to watch it again`);
      break;
    case "error":
      stats.errors.push(msg);
      toast(controls.errorText(msg), "error"); // before onError: a fall back to the default preset says more
      controls.onError(msg);
      deployment.onError(msg);
      break;
    default:
      break;
  }
}

function summaryLine(s) {
  const keys = ["prefill_layer_us", "decode_step_p50_us", "decode_model_step_ms", "over_sla_steps"].filter((k) => s && k in s);
  return keys.map((k) => `${k} ${typeof s[k] === "number" ? +s[k].toPrecision(4) : s[k]}`).join(" · ");
}

let turn = 0;
function loop(now) {
  stats.raf += 1;
  const b0 = performance.now();
  banks.render();
  stats.renderMs.BanksView = Math.max(stats.renderMs.BanksView || 0, performance.now() - b0);
  topology.render();
  log.render();
  controls.tick();
  showServing();
  deployment.render();
  // at most one Plotly redraw per animation frame (they only redraw on axis / units / theme changes)
  for (let i = 0; i < plots.length; i++) {
    const v = plots[(turn + i) % plots.length];
    if (v.el.closest(".collapsed")) continue;
    const growing = servingPlots.has(v);
    if (growing && (!servingShown || (controls.playing && (now < servingPlots.get(v) || now < servingFreeAt)))) continue;
    const t0 = performance.now();
    if (v.render(store, store.axis)) {
      for (const a of v.el.querySelectorAll(".modebar-btn:not([tabindex='-1'])")) a.tabIndex = -1; // out of the tab order
      const name = v.constructor.name;
      const ms = performance.now() - t0;
      stats.renderMs[name] = Math.max(stats.renderMs[name] || 0, ms);
      stats.drawsBy[name] = (stats.drawsBy[name] || 0) + 1;
      if (growing) {
        servingPlots.set(v, now + SERVING_VIEW_MS);
        servingFreeAt = now + Math.max(SERVING_GAP_MS, ms / SERVING_BUDGET);
      }
      stats.plotDraws += 1;
      turn = (turn + i + 1) % plots.length;
      break;
    }
  }
  // what moves with the cursor in the serving views (the histograms' finished set, the step's lanes) is drawn on
  // canvases over their plots, only when it changed: no Plotly call per cursor move (bench/README.md)
  if (servingShown) for (const v of [latdist, requests]) if (!v.el.closest(".collapsed") && v.live()) stats.liveDraws += 1;
  for (const c of cursors) c.place(store.t, store.axis);
  keepMoment(now);
  requestAnimationFrame(loop);
}

window.__layerscope = { store, stats, cursors, conn, exporter, tour, palette: { cell: CELL, phase: PHASE }, serving, servingB, views: { dpranks, timeline, memory, latency, banks, topology, stages, numerics, experts, detail, requests, stepmix, latdist, kvblocks, deployment, sweep } };
if (badTheme) toast(`theme: unknown theme '${query.get("theme")}', use dark or light; showing dark`, "error");
controls.init(document.body.dataset.defaultScenario).catch((e) => toast(`could not list scenarios: ${e}`, "error"));
// Plotly is deferred after this module (index.html) and evaluates while the run loads; the first frame waits for it
if (window.Plotly) requestAnimationFrame(loop);
else document.addEventListener("DOMContentLoaded", () => requestAnimationFrame(loop), { once: true });
