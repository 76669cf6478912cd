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
const detail = new DetailPane($("detail"), store, (t) => controls.seek(t));
const timeline = new TimelineView($("timeline-plot"), store, $("timeline-info"), (run, k) => detail.pin(run, k));
const memory = new MemoryView($("memory-plot"), store, $("memory-legend"));
const latency = new LatencyView($("latency-plot"), store, $("latency-legend"));
const numerics = new NumericsView($("numerics-plot"), store);
const experts = new ExpertsView($("experts-plot"), store, $("experts-info"));
const stages = new StagesView($("stages-plot"), store);
const requests = new RequestsView($("requests-plot"), store, serving, $("requests-info"));
fillRequestLegend($("requests-legend"));
const stepmix = new StepMixView($("stepmix-plot"), store, serving, $("stepmix-info"));
const latdist = new LatencyDistView($("latdist-plot"), store, serving, $("latdist-info"));
const kvblocks = new KvBlocksView($("kvblocks-plot"), store, serving);
const servingPanels = [$("requests"), $("step-mix"), $("latency-dist")];
const servingPlots = new Map([requests, stepmix, latdist, kvblocks].map((v) => [v, 0])); // view -> when it may draw next
const plots = [timeline, memory, latency, stages, numerics, experts, requests, stepmix, latdist, kvblocks];
const timePlots = [timeline, memory, latency, numerics, requests, stepmix, kvblocks];
const banks = new BanksView($("banks-canvas"), store, $("banks-info"), $("banks-legend"), serving);
const topology = new TopologyView($("topology-svg"), store, $("topo-phase"), [...document.querySelectorAll("#topology .tabs button")]);
const log = new LogView($("events-log"), store);
const cursors = timePlots.map((v) => new TimeCursor(v.el));
const exporter = new Exporter(store, stats);

const conn = new Connection(onMessage, (status) => {
  $("status").textContent = status;
  $("status").dataset.state = status === "live" ? "live" : "down";
});
conn.resume = () => ({ t_us: store.t, playing: controls ? controls.playing : false });
controls = new Controls(conn, store);
controls.toast = (text, kind) => toast(text, kind);
controls.extraQuery = () => extraQuery();
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

function applyUnits(units) {
  store.setUnits(units);
  for (const b of document.querySelectorAll("[data-units]")) {
    const on = b.dataset.units === store.axis.units;
    b.classList.toggle("on", on);
    b.setAttribute("aria-pressed", String(on));
  }
}

// settings that live in the URL beside the scenario's: theme and units
function extraQuery() {
  const q = {};
  if (document.documentElement.dataset.theme === "light") q.theme = "light";
  if (store.axis.units === "model") q.units = "model";
  return q;
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
      applyUnits(store.axis.units);
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
      controls.onError(msg);
      deployment.onError(msg);
      toast(`${msg.field ? `${msg.field}: ` : ""}${msg.message}`, "error");
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
  requestAnimationFrame(loop);
}

window.__layerscope = { store, stats, cursors, conn, exporter, tour, palette: { cell: CELL, phase: PHASE }, serving, views: { timeline, memory, latency, banks, topology, stages, numerics, experts, detail, requests, stepmix, latdist, kvblocks, deployment, sweep } };
if (query.get("units") === "model") applyUnits("model");
if (badTheme) toast(`theme: unknown theme '${query.get("theme")}', use dark or light; showing dark`, "error");
controls.init(document.body.dataset.defaultScenario).catch((e) => toast(`could not list scenarios: ${e}`, "error"));
requestAnimationFrame(loop);
