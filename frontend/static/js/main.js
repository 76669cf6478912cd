// Wiring: one connection, one store, the views, and one render loop that coalesces every update into
// at most one redraw per animation frame (Plotly views take turns, at most one per frame).

import { Controls } from "./controls.js";
import { Store } from "./store.js";
import { BanksView } from "./views/banks.js";
import { renderClaims } from "./views/claims.js";
import { TimeCursor } from "./views/cursor.js";
import { ExpertsView } from "./views/experts.js";
import { LatencyView } from "./views/latency.js";
import { LogView } from "./views/log.js";
import { MemoryView } from "./views/memory.js";
import { StagesView } from "./views/stages.js";
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

const PLOT_INTERVAL_MS = 250; // a Plotly view redraws at most this often while playing
const PLOT_BUDGET = 0.3; // while playing, Plotly redraws take at most ~30% of the main thread
const $ = (id) => document.getElementById(id);

const store = new Store();
// read by tests and benchmarks: animation frames, messages, Plotly redraws and their cost, frame delivery
// delay (server created_ms to arrival, last 1000 frames), the longest main-thread task
const stats = { raf: 0, messages: 0, frames: 0, plotDraws: 0, errors: [], renderMs: {}, delayMs: [], longestTaskMs: 0 };
if (window.PerformanceObserver && PerformanceObserver.supportedEntryTypes.includes("longtask")) {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) stats.longestTaskMs = Math.max(stats.longestTaskMs, e.duration);
  }).observe({ type: "longtask", buffered: true });
}

const serving = new ServingState(store); // request, step and deployment events, beside the store
const timeline = new TimelineView($("timeline-plot"), store, $("timeline-info"));
timeline.serving = serving; // step boundaries
fillLegend($("timeline-legend"));
const memory = new MemoryView($("memory-plot"), store);
const latency = new LatencyView($("latency-plot"), store);
const requests = new RequestsView($("requests-plot"), store, serving, $("requests-info"));
fillRequestLegend($("requests-legend"));
const stepmix = new StepMixView($("stepmix-plot"), store, serving, $("stepmix-info"));
const latdist = new LatencyDistView($("latdist-plot"), store, serving, $("latdist-info"));
const kvblocks = new KvBlocksView($("kvblocks-plot"), store, serving);
const servingPanels = [$("requests"), $("step-mix"), $("latency-dist")];
const servingPlots = new Set([requests, stepmix, latdist, kvblocks]);
const timeViews = [timeline, memory, latency, requests, stepmix, kvblocks]; // one linked time axis
const plots = [timeline, memory, latency, requests, stepmix, latdist, kvblocks, new StagesView($("stages-plot"), store), new ExpertsView($("experts-plot"), store, $("experts-info"))];
const lastDraw = new Map(plots.map((p) => [p, 0]));
const banks = new BanksView($("banks-canvas"), store, $("banks-info"), $("banks-legend"), serving);
const topology = new TopologyView($("topology-svg"), store, $("topo-phase"), [...document.querySelectorAll("#topology .tabs button")]);
const log = new LogView($("events-log"), store);
const cursors = timeViews.map((v) => new TimeCursor(v.el));

let controls = null;
const conn = new Connection(onMessage, (status) => {
  $("status").textContent = status;
  $("status").dataset.state = status === "live" ? "live" : "down";
});
conn.resume = () => ({ t_us: store.t, playing: controls ? controls.playing : false });
controls = new Controls(conn, store);
controls.toast = (text, kind) => toast(text, kind);
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

// Serving panels show for runs of more than one request (a one-request run keeps the classic layout).
let servingShown = null;
function showServing() {
  const w = store.scenario && store.scenario.workload;
  const on = Boolean((w && w.num_requests > 1) || serving.order.length > 1);
  if (on === servingShown) return;
  servingShown = on;
  for (const p of servingPanels) p.dataset.empty = on ? "false" : "true";
  $("kvblocks-plot").classList.toggle("hidden", !on);
  for (const v of servingPlots) v.drawn = ""; // drawn once visible, at their real size
}

function toast(text, kind = "info") {
  const t = $("toast");
  t.textContent = text;
  t.className = `toast ${kind}`;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.add("hidden"), 5000);
}

function onMessage(msg) {
  stats.messages += 1;
  switch (msg.type) {
    case "loaded":
      store.reset(msg); // a new run starts unzoomed: the shared axis shows the run's extent
      controls.onLoaded(msg);
      tour.load(msg.scenario, msg.tour_results || []);
      renderClaims($("claims-body"), msg.claims);
      deployment.onLoaded();
      servingShown = null;
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
      toast(`run finished: ${summaryLine(msg.summary)}`);
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
  const keys = Object.keys(s || {}).slice(0, 4);
  return keys.map((k) => `${k} ${typeof s[k] === "number" ? +s[k].toPrecision(4) : s[k]}`).join(" · ");
}

let turn = 0;
let plotsFreeAt = 0; // after a redraw of X ms, the next one waits X / PLOT_BUDGET
function loop(now) {
  stats.raf += 1;
  const b0 = performance.now();
  banks.render();
  stats.renderMs.BanksView = Math.max(stats.renderMs.BanksView || 0, performance.now() - b0);
  topology.render();
  log.render();
  showServing();
  deployment.render();
  controls.tick();
  const interval = controls.playing ? PLOT_INTERVAL_MS : 0;
  for (let i = 0; i < plots.length && (now >= plotsFreeAt || !controls.playing); i++) {
    const v = plots[(turn + i) % plots.length];
    if (now - lastDraw.get(v) < interval || (servingPlots.has(v) && !servingShown)) continue;
    const t0 = performance.now();
    if (v.render()) {
      const ms = performance.now() - t0;
      const name = v.constructor.name;
      stats.renderMs[name] = Math.max(stats.renderMs[name] || 0, ms);
      plotsFreeAt = now + ms / PLOT_BUDGET;
      lastDraw.set(v, now);
      stats.plotDraws += 1;
      turn = (turn + i + 1) % plots.length;
      break;
    }
  }
  for (const c of cursors) c.place(store.t, store.axis);
  requestAnimationFrame(loop);
}

window.__layerscope = { store, stats, conn, serving, views: { timeline, memory, latency, banks, topology, requests, stepmix, latdist, kvblocks, deployment, sweep } };
controls.init(document.body.dataset.defaultScenario).catch((e) => toast(`could not list scenarios: ${e}`, "error"));
requestAnimationFrame(loop);
