// Wiring: one connection, one store (events + the shared time axis), the views, and one render loop that
// coalesces every update into at most one redraw per animation frame. The time plots draw the whole run
// (loaded.overview) and redraw only when the axis, units or theme change; during playback only the cursor
// (a canvas over each time plot), the serving views' overlays, the bank map, the topology and the log move, so
// playback stays cheap.

import { CELL, PHASE, setTheme } from "./colors.js";
import { Controls, MOMENT_KEYS } from "./controls.js";
import { Exporter, addPanelButtons } from "./export.js";
import { PANELS, mount, servingRun } from "./panels/index.js";
import { ServingState } from "./serving.js";
import { Store } from "./store.js";
import { renderClaims } from "./views/claims.js";
import { TimeCursor } from "./views/cursor.js";
import { DetailPane } from "./views/detail.js";
import { deltaLine, storyLine } from "./views/story.js";
import { TimelineSketch } from "./views/sketch.js";
import { fillLegend } from "./views/timeline.js";
import { Connection } from "./ws.js";

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

// The page's panels, from the registry (panels/index.js): every section first (views may reach into another's)
const sections = new Map(PANELS.map((p) => [p, mount(p, $("panels"), $("side"))]));

const badTheme = query.has("theme") && !["dark", "light"].includes(query.get("theme"));
applyTheme(query.get("theme") || document.documentElement.dataset.theme || "dark");

let controls = null;
const serving = new ServingState(store); // request, step and deployment events as they play, beside the store
const servingB = new ServingState(store, false); // a comparison's run B, from its whole run (drawn beside A's)
const detail = new DetailPane($("detail"), store, (t) => controls.seek(t));
// what the panels may ask of the controls (created below, with the connection)
const app = {
  seek: (t) => controls.seek(t),
  play: () => controls.play(),
  pause: () => controls.pause(),
  loadWith: (set) => controls.loadWith(set),
  choose: (name, set) => controls.choose(name, set),
  scenario: () => controls.select.value,
  currentSet: () => controls.currentSet || {},
};
const ctx = { store, serving, servingB, detail, app };
const views = {}; // by name, as each panel's create names them
const plots = []; // Plotly views, at most one redrawn per frame, in page order
const timePlots = []; // those on the time axis: a cursor over each
const frameViews = []; // drawn every frame
const servingPlots = new Map(); // serving runs' Plotly views -> when each may draw next
for (const [p, el] of sections) {
  for (const [name, v] of Object.entries(p.create(el, ctx))) {
    views[name] = v;
    const plot = p.kind === "time" || p.kind === "plot";
    if (plot) plots.push(v);
    if (p.kind === "time") timePlots.push(v);
    if (p.kind === "frame") frameViews.push(v);
    if (plot && (v.servingOnly ?? p.serving)) servingPlots.set(v, 0);
  }
}
const { timeline, stages, requests, latdist, banks, deployment, sweep, tour } = views;
const cursors = timePlots.map((v) => new TimeCursor(v.el));
const sketch = new TimelineSketch(timeline.el);
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
controls.onPreloaded = (msg) => onMessage(msg); // the first run's `loaded`, over HTTP (controls.fromPreload)
controls.extraQuery = () => extraQuery();
controls.saveMoment = () => keepMoment(performance.now(), true);
controls.onKernelKey = (dir) => walkKernel(dir);

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

// A refused URL's reason stays on the story line in front of the default preset's story that replaced it (the
// toast alone goes away), until the next run is loaded.
// Why the page fell back to this run (an unknown preset, a refused value), kept before its story line: the line is
// drawn again when the details come, and the note with it (finishLoad clears it for the next run).
let storyNote = null;

function keepFallbackNote() {
  if (controls.fallbackNote) [storyNote, controls.fallbackNote] = [controls.fallbackNote, null];
  const why = storyNote;
  if (!why) return;
  const line = $("story-line");
  line.classList.remove("error");
  const note = document.createElement("span");
  note.className = "story-error";
  note.textContent = `${why}. `;
  line.prepend(note);
}

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

// whether the moment waiting is this run's (Back may set the next run's while this one's details are on their way)
function momentFits() {
  return !moment.scenario || moment.scenario === store.scenario.name;
}

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
// force: now, even while playing (the run is being left for another preset: its entry keeps where it was)
function keepMoment(now, force = false) {
  if (!store.scenario || moment || (!force && (now < momentAt || controls.playing))) return;
  momentAt = now + 400;
  const q = new URLSearchParams(location.search);
  const was = q.toString();
  for (const k of MOMENT_KEYS) q.delete(k);
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

// Panels with nothing to show for this run collapse (their registry entry's has); the remaining ones of a row share
// its width.
function collapsePanels() {
  for (const [p, el] of sections) if (p.has && !p.serving) el.classList.toggle("collapsed", !p.has(store, ctx));
  const row = ["stages", "numerics", "experts"].filter((id) => !$(id).classList.contains("collapsed"));
  for (const id of ["stages", "numerics", "experts"]) $(id).classList.remove("full", "third", "half");
  for (const id of row) $(id).classList.add(row.length === 1 ? "full" : row.length === 2 ? "half" : "third");
  if ($("latency").classList.contains("collapsed")) $("memory").classList.replace("half", "full");
  else $("memory").classList.replace("full", "half");
  $("timeline").classList.toggle("two", store.runs.length > 1);
  for (const v of plots) if (v.el.offsetParent && v.el._fullLayout) Plotly.Plots.resize(v.el);
}

// Serving panels show for runs of more than one request (a one-request run keeps the classic layout).
let servingShown = null;
function showServing() {
  const on = servingRun(store, serving);
  if (on === servingShown) return;
  servingShown = on;
  for (const [p, el] of sections) if (p.serving) el.dataset.empty = on && p.has(store, ctx) ? "false" : "true";
  $("kvblocks-plot").classList.toggle("hidden", !on);
  for (const v of servingPlots.keys()) v.drawn = ""; // drawn once visible, at their real size
}

// A `loaded` run is decoded at once and its timeline sketched in the next frame; its views are set up in the frame
// after that (finishLoad), so the first screen does not wait for them. Messages that arrive meanwhile (the `state`
// after a `loaded`) wait their turn.
let pendingLoad = null;
const heldMessages = [];

function onMessage(msg) {
  stats.messages += 1;
  handle(msg);
}

function handle(msg) {
  if (pendingLoad) {
    heldMessages.push(msg);
    return;
  }
  switch (msg.type) {
    case "loaded":
      stats.firstScreen = { loadedAt: performance.now() }; // the first screen's path, ms since navigation (bench)
      store.reset(msg, false); // a new run starts unzoomed: the shared axis shows the run's extent, cursor at 0
      store.setUnits(runUnits()); // the units the figures open in, for the sketch's axis
      $("timeline").classList.toggle("two", store.runs.length > 1); // the sketch's height
      stats.firstScreen.resetAt = performance.now();
      pendingLoad = msg;
      break;
    case "frame":
      stats.frames += 1;
      if (msg.created_ms) {
        stats.delayMs.push(Date.now() - msg.created_ms);
        if (stats.delayMs.length > 1000) stats.delayMs.shift();
      }
      store.apply(msg);
      break;
    case "details":
      applyDetails(msg);
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
      loadPlotly(); // no run to sketch: the figures load anyway
      toast(controls.errorText(msg), "error"); // before onError: a fall back to the default preset says more
      controls.onError(msg);
      deployment.onError(msg);
      break;
    default:
      break;
  }
}

function finishLoad() {
  const msg = pendingLoad;
  pendingLoad = null;
  store.show(msg);
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
  store.detailsReady = false; // claims and tour checks follow in a `details` message (or ride in this one)
  tour.load(msg.scenario, null);
  drawClaims();
  $("story-line").innerHTML = storyLine(store);
  storyNote = null; // a new run: only its own fallback note (taken from controls now) stays before its story
  keepFallbackNote();
  $("delta-line").innerHTML = deltaLine(store);
  $("cue-tour").classList.toggle("hidden", !(msg.scenario.tour || []).length);
  $("cue-tour").textContent = `start the ${(msg.scenario.tour || []).length}-step tour`;
  document.title = `LayerScope — ${msg.scenario.name}`;
  if (msg.details) applyDetails(msg.details); // GET /api/loaded of a run prepared whole, or the disk cache
  // a link's tour step needs the step's check (its moment and zoom): its moment waits for this run's details
  if (moment && (store.detailsReady || !moment.m.step || !momentFits())) applyMoment();
  stats.firstScreen.handledAt = performance.now();
  for (const m of heldMessages.splice(0)) handle(m); // a `loaded` among them holds the ones after it again
}

// The claims table, the tour's checks and the compare run's claims: the server makes them after the first screen
// (protocol.DetailsMessage); until they come the claims panel and the tour say they are being computed.
function applyDetails(d) {
  const loaded = store.loaded;
  if (!loaded) return;
  loaded.claims = d.claims || [];
  loaded.tour_results = d.tour_results || [];
  if (loaded.compare) loaded.compare.claims = d.compare_claims || [];
  store.detailsReady = true;
  stats.firstScreen.detailsAt = performance.now();
  tour.setResults(loaded.tour_results);
  drawClaims();
  $("story-line").innerHTML = storyLine(store); // both lines quote the article's figures from the claims
  keepFallbackNote();
  $("delta-line").innerHTML = deltaLine(store);
  if (moment && momentFits()) applyMoment(); // a link's moment that names a tour step (finishLoad held it)
}

function drawClaims() {
  const msg = store.loaded;
  const claims = store.detailsReady ? msg.claims : null; // null: "computing…"
  renderClaims($("claims-body"), claims, msg.compare, store.runs.map((r) => r.label), store.runs, msg.scenario.sla_ms);
}

function summaryLine(s) {
  const keys = ["prefill_layer_us", "decode_step_p50_us", "decode_model_step_ms", "over_sla_steps"].filter((k) => s && k in s);
  return keys.map((k) => `${k} ${typeof s[k] === "number" ? +s[k].toPrecision(4) : s[k]}`).join(" · ");
}

let turn = 0;
// The first frame of a run draws its timeline and nothing else, so the first screen shows the run's data as soon as
// it can: on a canvas (views/sketch.js), without waiting for Plotly; the next frame draws the interactive figure
// over it (once Plotly has run: the page loads it after the first sketch), then the other panels follow, one a
// frame (bench/README.md, "First screen").
let firstDrawn = null; // the run whose interactive timeline was drawn first
let sketched = null; // the run whose sketch is on screen
function firstScreen() {
  if (!store.main || firstDrawn === store.main) return false;
  if (sketched !== store.main) {
    sketched = store.main;
    const t0 = performance.now();
    const drew = sketch.draw(timeline, pendingLoad ? pendingLoad.scenario.name : store.scenario.name);
    Object.assign(stats.firstScreen || {}, { sketchAt: t0, sketchMs: performance.now() - t0 });
    if (drew) return true;
  }
  if (pendingLoad) return false; // the views are set up first (finishLoad)
  loadPlotly(); // from the frame after the sketch: it was painted first
  if (!window.Plotly) return false; // the sketch stays; the views that need no Plotly draw meanwhile
  firstDrawn = store.main;
  turn = 1; // the other plots after the timeline, in their list's order
  const t0 = performance.now();
  const drew = timeline.render(store, store.axis, true);
  sketch.remove();
  Object.assign(stats.firstScreen || {}, { timelineAt: t0, timelineMs: performance.now() - t0 });
  return drew;
}

// Plotly.js (1.5 MB, 0.3-0.9 s of evaluation) runs once the first screen is up: index.html only preloads it. A page
// whose run does not come (an error, a slow simulation) loads it after PLOTLY_AT_LATEST_MS all the same.
const PLOTLY_AT_LATEST_MS = 1500;
function loadPlotly() {
  if (window.Plotly || $("plotly-js")) return;
  const el = document.createElement("script");
  el.id = "plotly-js";
  el.src = document.querySelector("link[rel=preload][as=script]").href;
  document.head.append(el);
}
setTimeout(loadPlotly, PLOTLY_AT_LATEST_MS);

function loop(now) {
  stats.raf += 1;
  if (firstScreen()) {
    for (const c of cursors) c.place(store.t, store.axis);
    requestAnimationFrame(loop);
    return;
  }
  if (pendingLoad) {
    finishLoad(); // a frame of its own: nothing else is drawn from a run whose views are not set up
    requestAnimationFrame(loop);
    return;
  }
  for (const v of frameViews) {
    const t0 = performance.now();
    v.render();
    const name = v.constructor.name;
    stats.renderMs[name] = Math.max(stats.renderMs[name] || 0, performance.now() - t0);
  }
  controls.tick();
  showServing();
  // at most one Plotly redraw per animation frame (they only redraw on axis / units / theme changes); none before a
  // run is loaded (an empty figure drawn then is drawn again with the run)
  for (let i = 0; store.main && window.Plotly && i < plots.length; i++) {
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
  if (servingShown && window.Plotly) for (const v of [latdist, requests]) if (!v.el.closest(".collapsed") && v.live()) stats.liveDraws += 1;
  for (const c of cursors) c.place(store.t, store.axis);
  keepMoment(now);
  requestAnimationFrame(loop);
}

window.__layerscope = { store, stats, cursors, conn, exporter, tour, sketch, palette: { cell: CELL, phase: PHASE }, serving, servingB, views: { ...views, detail } };
if (badTheme) toast(`theme: unknown theme '${query.get("theme")}', use dark or light; showing dark`, "error");
controls.init(document.body.dataset.defaultScenario).catch((e) => toast(`could not list scenarios: ${e}`, "error"));
requestAnimationFrame(loop); // Plotly comes later (loadPlotly): until it has run, the loop draws no Plotly figure
