// The dashboard's panels, one entry each, in page order: the page's sections (mount) and main.js's views are built
// from this list. An entry: {id (the section's id, data-panel and data-testid), title, kind, create(el, ctx), has(store)}
//   kind:   "time"  Plotly tracks on the shared time axis (a time cursor over each; views/track.js's base),
//           "plot"  other Plotly views (redrawn on axis, units or theme changes, one a frame),
//           "frame" views drawn every animation frame (canvas, SVG, text), "text" views driven by messages;
//   create: the panel's views by name ({timeline: view}), given its mounted section and ctx {store, serving,
//           servingB, detail, app (controls' commands: seek, play, pause, loadWith, choose, scenario, currentSet)};
//   has:    whether the run on screen has anything for it (else the panel collapses; a serving panel stays empty);
//   size "wide" / "half" in the grid, or area "side"; serving: only for runs of more than one request;
//   help, head, body: its header's tooltip and content, and what follows the header.
// A new panel over existing data is its view module and one entry here.

import { BanksView } from "../views/banks.js";
import { DeploymentView } from "../views/deployment.js";
import { DPRanksView } from "../views/dpranks.js";
import { ExpertsView } from "../views/experts.js";
import { KvBlocksView } from "../views/kvblocks.js";
import { LatencyView } from "../views/latency.js";
import { LatencyDistView } from "../views/latencydist.js";
import { LogView } from "../views/log.js";
import { MemoryView } from "../views/memory.js";
import { NumericsView, hasNumerics } from "../views/numerics.js";
import { RequestsView, fillRequestLegend } from "../views/requests.js";
import { StagesView } from "../views/stages.js";
import { StepMixView } from "../views/stepmix.js";
import { SweepView } from "../views/sweep.js";
import { TimelineView } from "../views/timeline.js";
import { TopologyView } from "../views/topology.js";
import { Tour } from "../views/tour.js";

const byId = (id) => document.getElementById(id);

// A serving run: more than one request (a one-request run keeps the classic layout).
export function servingRun(store, serving = null) {
  const w = store.scenario && store.scenario.workload;
  return Boolean((w && w.num_requests > 1) || (serving && serving.order.length > 1));
}

export const PANELS = [
  {
    id: "timeline",
    title: "Kernel timeline",
    kind: "time",
    size: "wide",
    help: "Kernel launches, one row per stream (Nsight-style), a group of rows per engine where a run has several (DP ranks, replicas, pools; with four or more ranks or replicas the slowest and the median, the rest folded: unfold in the header). Drag to zoom, double-click to reset to the whole run; every time plot follows the same axis. Click a launch to pin its details",
    head: `kernel timeline <span class="sub" id="timeline-info"></span>
      <label class="goto" title="Zoom every time plot to decode step N of run A and move the playback there">go to step <input type="number" id="goto-step" data-testid="goto-step" min="0" step="1" inputmode="numeric"></label>`,
    body: `    <div class="plot" id="timeline-plot" tabindex="0" role="group" aria-label="kernel timeline: [ and ] walk the launches, w and s zoom, a and d pan, 0 resets the zoom, arrows step"></div>
    <div class="legend" id="timeline-legend"></div>
    <div class="detail hidden" id="detail" data-testid="detail" aria-live="polite"></div>`,
    create: (el, c) => ({ timeline: new TimelineView(byId("timeline-plot"), c.store, byId("timeline-info"), (run, k) => c.detail.pin(run, k)) }),
    has: () => true,
  },
  {
    id: "requests",
    title: "Request lanes",
    kind: "time",
    size: "wide",
    serving: true,
    help: "One row per request, in arrival order: waiting (grey), prefill chunks (orange, one bar per step), decode (cyan), preempted (red) and recomputed (amber), finished (green tick). The current step's requests are outlined. Hover a bar for lengths, TTFT and TPOT",
    head: `request lanes <span class="sub" id="requests-info"></span>
      <span class="legend inline" id="requests-legend"></span>`,
    body: `    <div class="plot" id="requests-plot"></div>`,
    create: (el, c) => {
      fillRequestLegend(byId("requests-legend"));
      return { requests: new RequestsView(byId("requests-plot"), c.store, c.serving, byId("requests-info"), c.servingB) };
    },
    has: (store, c) => servingRun(store, c.serving),
  },
  {
    id: "step-mix",
    title: "Step composition",
    kind: "time",
    size: "half",
    serving: true,
    help: "Per engine step: prefill tokens stacked on decode tokens against the token budget (max_num_batched_tokens), and the step's whole-model duration (right axis); a row per engine where a run has several (DP ranks, replicas, pools), or the one its selector picks",
    head: `step composition <span class="sub" id="stepmix-info"></span>`,
    body: `    <div class="plot" id="stepmix-plot"></div>`,
    create: (el, c) => ({ stepmix: new StepMixView(byId("stepmix-plot"), c.store, c.serving, byId("stepmix-info"), c.servingB) }),
    has: (store, c) => servingRun(store, c.serving),
  },
  {
    id: "dp-ranks",
    title: "DP ranks",
    kind: "time",
    size: "wide",
    serving: true,
    help: "Data-parallel ranks in lockstep (deployment.dp): each rank's busy share of every step (the slowest sets it; the others idle), the all-to-all's share of the step (right axis), and the token-expert rows each GPU's experts computed per layer",
    head: `DP ranks <span class="sub" id="dpranks-info"></span>`,
    body: `    <div class="plot" id="dpranks-plot"></div>`,
    create: (el, c) => ({ dpranks: new DPRanksView(byId("dpranks-plot"), c.store, byId("dpranks-info")) }),
    has: (store, c) => servingRun(store, c.serving), // the view leaves the panel empty unless the run has DP ranks
  },
  {
    id: "latency-dist",
    title: "Latency distributions",
    kind: "plot",
    size: "half",
    serving: true,
    help: "TTFT, TPOT (first token excluded) and ITL of the finished requests, whole model, as vllm bench serve reports them; p50 and p99 marked, the SLA (sla_ms) on TPOT and ITL",
    head: `latency distributions <span class="sub" id="latdist-info"></span>`,
    body: `    <div class="plot" id="latdist-plot"></div>`,
    create: (el, c) => ({ latdist: new LatencyDistView(byId("latdist-plot"), c.store, c.serving, byId("latdist-info"), c.servingB) }),
    has: (store, c) => servingRun(store, c.serving),
  },
  {
    id: "memory",
    title: "HBM memory",
    kind: "time",
    size: "half",
    help: "HBM free, the largest contiguous free run and the KV cache over simulated time; colour = run, line style = series",
    head: `HBM memory <span class="sub">simulated at full size</span>`,
    body: `    <div class="plot" id="memory-plot"></div>
    <div class="plot short hidden" id="kvblocks-plot" data-testid="kv-blocks" title="KV blocks in use and free in the pool, and prefix-cache hits per step (serving runs)"></div>
    <div class="legend" id="memory-legend"></div>`,
    create: (el, c) => ({
      memory: new MemoryView(byId("memory-plot"), c.store, byId("memory-legend")),
      kvblocks: Object.assign(new KvBlocksView(byId("kvblocks-plot"), c.store, c.serving), { servingOnly: true }), // serving runs only
    }),
    has: () => true,
  },
  {
    id: "latency",
    title: "Decode latency",
    kind: "time",
    size: "half",
    help: "Latency of each decode step (one layer, or the whole model against the SLA), with the jitter band",
    head: `decode latency <span class="sub">simulated at full size</span>`,
    body: `    <div class="plot" id="latency-plot"></div>
    <div class="legend" id="latency-legend"></div>`,
    create: (el, c) => ({ latency: new LatencyView(byId("latency-plot"), c.store, byId("latency-legend")) }),
    has: (store) => store.runs.some((r) => r.decode_step.length),
  },
  {
    id: "banks",
    title: "KV banks",
    kind: "frame",
    size: "half",
    help: "KV cache at the playback time: one row per bank, one cell per page slot, coloured by owner and phase; damage stays until repaired",
    head: `KV banks <span class="sub" id="banks-info"></span>`,
    body: `    <canvas id="banks-canvas" class="banks-canvas" role="img" aria-label="KV cache bank map"></canvas>
    <div class="legend" id="banks-legend"></div>`,
    create: (el, c) => ({ banks: new BanksView(byId("banks-canvas"), c.store, byId("banks-info"), byId("banks-legend"), c.serving) }),
    has: () => true,
  },
  {
    id: "topology",
    title: "Topology",
    kind: "frame",
    size: "half",
    help: "The layer as a graph of its stages; arrows show the direction of data flow, edge width the bytes moved per chunk / step; the running stage lights up",
    head: `topology <span class="sub" id="topo-phase">prefill</span>
      <span class="tabs"><button data-phase="auto" class="on" title="Follow the running phase">auto</button><button data-phase="prefill" title="Prefill topology (one chunk)">prefill</button><button data-phase="decode" title="Decode topology (one step)">decode</button></span>`,
    body: `    <svg id="topology-svg" class="topo" viewBox="0 0 1000 230" preserveAspectRatio="xMidYMid meet" role="img" aria-label="layer topology"></svg>`,
    create: (el, c) => ({ topology: new TopologyView(byId("topology-svg"), c.store, byId("topo-phase"), [...el.querySelectorAll(".tabs button")]) }),
    has: () => true,
  },
  {
    id: "stages",
    title: "Stages",
    kind: "plot",
    size: "half",
    help: "Time per stage: the whole prefill and the mean decode step, in the chosen units; hover for HBM bandwidth utilisation and L2 hit rate",
    head: `stages <span class="sub">simulated at full size</span>`,
    body: `    <div class="plot" id="stages-plot"></div>`,
    create: (el, c) => ({ stages: new StagesView(byId("stages-plot"), c.store) }),
    has: () => true,
  },
  {
    id: "numerics",
    title: "Numeric error vs the clean run",
    kind: "time",
    size: "half",
    help: "Relative error of the layer output against the clean run (numpy layer at a scaled size, same schedule); fault moments as lines",
    head: `numeric error <span class="sub">numpy at scaled size, vs the clean run</span>`,
    body: `    <div class="plot" id="numerics-plot"></div>`,
    create: (el, c) => ({ numerics: new NumericsView(byId("numerics-plot"), c.store) }),
    has: (store) => hasNumerics(store),
  },
  {
    id: "experts",
    title: "Experts",
    kind: "plot",
    size: "half",
    help: "MoE routing: tokens per expert per step (numpy router at scaled size) and distinct experts read at full size",
    head: `experts <span class="sub" id="experts-info"></span>`,
    body: `    <div class="plot" id="experts-plot"></div>`,
    create: (el, c) => ({ experts: new ExpertsView(byId("experts-plot"), c.store, byId("experts-info")) }),
    has: (store) => store.runs.some((r) => r.experts && r.experts.length),
  },
  {
    id: "deployment",
    title: "Deployment",
    kind: "frame",
    size: "half",
    empty: true, // shown by its view once it has something for the run
    help: "What one GPU of the group holds and how many KV tokens that leaves, as vLLM's startup log prints it (layerscope plan); change the deployment below",
    head: `deployment <span class="sub">simulated placement at full size</span>`,
    body: `    <div id="deployment-body" class="dep-body"></div>
    <form id="deployment-form" class="dep-form" autocomplete="off" novalidate>
      <label title="Tensor-parallel GPUs: attention heads and expert matrices split over them">tp <select name="tp"><option>1</option><option>2</option><option>4</option><option>8</option></select></label>
      <label title="Expert-parallel GPUs: experts split over them (ep divides tp)">ep <select name="ep"><option>1</option><option>2</option><option>4</option><option>8</option></select></label>
      <label title="Weight storage precision (fp8: 128x128 block scales)">weights <select name="weight_dtype"><option>bf16</option><option>fp8</option></select></label>
      <label title="KV cache precision">KV <select name="kv_dtype"><option>bf16</option><option>fp8</option></select></label>
      <label title="Fraction of GPU memory vLLM may use (gpu_memory_utilization)">mem util <input name="gpu_memory_utilization" type="number" min="0.05" max="1" step="0.01"></label>
      <label title="Capture CUDA graphs for decode (less launch overhead, a graph memory pool)">CUDA graphs <input name="cuda_graphs" type="checkbox"></label>
      <label title="Longest request (tokens) the maximum concurrency is counted for; empty: the model's">max_model_len <input name="max_model_len" type="number" min="16" step="1"></label>
      <label title="Attention data-parallel ranks, each with tp GPUs, its own KV cache and requests; the experts spread over all dp x tp GPUs (vLLM --data-parallel-size with --enable-expert-parallel)">dp <input name="dp" type="number" min="1" max="64" step="1"></label>
      <label title="Nodes of 8 GPUs the ranks or replicas fill (tp stays within a node)">nodes <input name="nodes" type="number" min="1" max="8" step="1"></label>
      <label title="Engines of this shape side by side, each on its own GPUs with its own KV cache, behind a router">replicas <input name="replicas" type="number" min="1" max="64" step="1"></label>
      <label title="How the router picks a replica: in turn, the fewest outstanding requests, or the one holding the longest prefix (SGLang's cache_aware)">router <select name="router"><option>round_robin</option><option>least_outstanding_requests</option><option>prefix_cache_aware</option></select></label>
      <label title="MoE dispatch and combine kernels with dp > 1 (vLLM --all2all-backend)">all2all <select name="all2all_backend"><option>naive</option><option>allgather_reducescatter</option><option>pplx</option><option>deepep_high_throughput</option><option>deepep_low_latency</option></select></label>
      <label title="Expert-parallel load balancing with dp > 1 (vLLM --enable-eplb): redundant expert copies over all ranks; empty: off">EPLB redundant experts <input name="eplb" type="number" min="0" max="1024" step="1" placeholder="off"></label>
      <button type="submit" data-testid="deployment-apply" title="Reload the run on this deployment">apply</button>
    </form>
    <div class="form-error hidden" id="deployment-error" data-testid="deployment-error" role="alert"></div>`,
    create: (el, c) => ({ deployment: new DeploymentView(el, c.store, c.serving, (set) => c.app.loadWith(set)) }),
  },
  {
    id: "sweep",
    title: "Sweep",
    kind: "text",
    size: "half",
    empty: true, // shown by its view once it has something for the run
    help: "Output throughput per GPU against median TPOT, one point per configuration, the Pareto front marked; click a point to load it",
    head: `sweep <span class="sub" id="sweep-info">load a <code>layerscope sweep … --json</code> file or run a small grid</span>`,
    body: `    <form id="sweep-form" class="dep-form" autocomplete="off">
      <label class="filepick ghost" title="A result of layerscope sweep SCENARIO --grid ... --json, or of layerscope plan --request-rate R --break-even 'A;B' --json (the break-even view)">load sweep JSON<input type="file" id="sweep-file" data-testid="sweep-file" accept=".json,application/json"></label>
      <label title="Fields and values, e.g. deployment.tp=4,8; workload.max_concurrency=1,16 (at most 16 points, run on the server)">grid <input id="sweep-grid" data-testid="sweep-grid" type="text" size="44" value="workload.max_concurrency=1,8,32"></label>
      <button type="submit" data-testid="sweep-run" title="Run this grid of the current scenario on the server (timing only)">run grid</button>
      <button type="button" id="breakeven-run" data-testid="breakeven-run" hidden title="Over the grid's workload.input_len x workload.request_rate (at most 8 cells), which gives the higher goodput per GPU at the SLOs: this run or its compare run (simulated on the server)">run break-even</button>
    </form>
    <div class="form-error hidden" id="sweep-error" data-testid="sweep-error" role="alert"></div>
    <div class="plot" id="sweep-plot"></div>`,
    create: (el, c) => ({
      sweep: new SweepView(el, c.store, { scenario: () => c.app.scenario(), currentSet: () => c.app.currentSet(), load: (name, set) => c.app.choose(name, set) }),
    }),
  },
  {
    id: "tour",
    title: "Tour",
    kind: "text",
    area: "side",
    help: "A guided tour of this scenario: it pauses at the moments the server computed for each step",
    head: `tour <span class="sub" id="tour-pos"></span>`,
    body: `    <div class="tour-body" id="tour-body" aria-live="polite"></div>
    <div class="tour-nav">
      <button id="tour-prev" data-testid="tour-prev" title="Previous tour step: back to its moment">&#9664; prev</button>
      <button id="tour-next" data-testid="tour-next" class="primary" title="Next tour step (plays until its moment)">next &#9654;</button>
      <button id="tour-skip" data-testid="tour-skip" class="ghost" title="Leave the tour and play freely">leave</button>
    </div>`,
    create: (el, c) => ({ tour: new Tour(el, c.store, { play: () => c.app.play(), pause: () => c.app.pause(), seek: (t) => c.app.seek(t) }) }),
    has: () => true,
  },
  {
    id: "claims",
    title: "Claims",
    kind: "text",
    area: "side",
    help: "The article's stated figures beside what this run (and its compare run) measured",
    head: `claims`,
    body: `    <div class="claims" id="claims-body"></div>`,
    create: () => ({}), // filled from each loaded run (views/claims.js renderClaims)
    has: () => true,
  },
  {
    id: "log",
    title: "Events",
    kind: "frame",
    area: "side",
    help: "Faults, CRC checks, allocation failures and numerics as they happen (full text, newest first)",
    head: `events <span class="sub">newest first</span>`,
    body: `    <div class="events-log" id="events-log"></div>`,
    create: (el, c) => ({ log: new LogView(byId("events-log"), c.store) }),
    has: () => true,
  },
];

// The panel's section, appended to the main grid or the side column.
export function mount(panel, main, side) {
  const el = document.createElement("section");
  el.className = ["panel", panel.size, panel.serving ? "serving" : ""].filter(Boolean).join(" ");
  el.id = panel.id;
  el.dataset.testid = panel.id;
  el.dataset.panel = panel.id;
  el.dataset.title = panel.title;
  if (panel.serving || panel.empty) el.dataset.empty = "true";
  el.innerHTML = `<h2>${panel.head}</h2>${panel.body || ""}`;
  el.firstElementChild.title = panel.help;
  (panel.area === "side" ? side : main).append(el);
  return el;
}
