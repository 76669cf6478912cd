// A sweep in the browser: output throughput per GPU against median TPOT, one point per configuration, the Pareto
// front (no other point is both faster per token and higher in throughput) marked and joined. From a file
// (`layerscope sweep ... --json`) or a small grid run by the server (POST /api/sweep). "run break-even" runs the
// grid's input lengths x request rates on the server (POST /api/breakeven): the run against its compare run, the
// higher goodput per GPU cell by cell (breakeven.js). Clicking a point loads
// that configuration as the current run. The panel opens with the scenario's own grid (scenario.sweep.grid) and is
// hidden where the scenario names none (no sweep applies). A one-request scenario's sweep (scenario.sweep.metric)
// draws that summary figure against the grid's first field instead. Every point is labelled with its setting.

import { PLOT_CONFIG, THEME, plotLayout } from "../colors.js";
import { esc } from "../format.js";
import { breakEvenFigure, isBreakEven } from "./breakeven.js";

const ALL = "#7aa2f7";
const FRONT = "#ff9e64";

// "deployment.tp=4,8; workload.max_concurrency=1,16" -> {"deployment.tp": [4, 8], ...} (values read as numbers,
// booleans or strings); throws naming the bad part.
export function parseGrid(text) {
  const grid = {};
  for (const part of text.split(/[;\n]/).map((p) => p.trim()).filter(Boolean)) {
    const [key, values] = part.split("=");
    if (!key || values === undefined || !values.trim()) throw new Error(`grid: '${part}' is not field=v1,v2`);
    grid[key.trim()] = values.split(",").map((v) => v.trim()).filter(Boolean).map(scalar);
  }
  if (!Object.keys(grid).length) throw new Error("grid: give at least one field=v1,v2");
  return grid;
}

function scalar(v) {
  if (v === "true" || v === "false") return v === "true";
  const n = Number(v);
  return v !== "" && Number.isFinite(n) ? n : v;
}

export function setLabel(set) {
  return Object.entries(set || {}).map(([k, v]) => `${k.split(".").pop()}=${v}`).join(" ");
}

export class SweepView {
  constructor(root, store, commands) {
    this.root = root;
    this.plot = root.querySelector("#sweep-plot");
    this.info = root.querySelector("#sweep-info");
    this.error = root.querySelector("#sweep-error");
    this.gridInput = root.querySelector("#sweep-grid");
    this.store = store;
    this.cmd = commands; // {load(scenario, set), scenario()}
    this.data = null;
    this.scenario = null;
    root.querySelector("#sweep-file").addEventListener("change", (ev) => this.fromFile(ev.target));
    root.querySelector("#sweep-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.runGrid();
    });
    this.breakEvenButton = root.querySelector("#breakeven-run");
    this.breakEvenButton.addEventListener("click", () => this.runBreakEven());
  }

  // a run of another scenario loaded (main.js): its grid in the form, the panel hidden where no sweep applies, the previous plot cleared
  // serving: the run shows the serving panels (main.js showServing), where a serving sweep applies anyway
  sync(serving = false) {
    const sc = this.store.scenario;
    const sweep = sc && sc.sweep;
    this.root.classList.toggle("collapsed", !sweep && !serving);
    this.breakEvenButton.hidden = !(sc && sc.workload && sc.compare); // the run against its compare run
    if ((sc && sc.name) === this.scenario) return; // a point of the sweep loaded: keep the plot to choose another
    this.scenario = sc && sc.name;
    this.fail("");
    this.data = null;
    this.root.dataset.empty = "true";
    if (!sweep) return;
    this.gridInput.value = gridText(sweep.grid);
    this.info.textContent = `run ${gridText(sweep.grid)} on the server, or load a \`layerscope sweep … --json\` file`;
  }

  async fromFile(input) {
    const file = input.files && input.files[0];
    input.value = "";
    if (!file) return;
    try {
      this.show(JSON.parse(await file.text()), file.name);
    } catch (e) {
      this.fail(`${file.name}: ${e.message}`);
    }
  }

  async runGrid() {
    let grid;
    try {
      grid = parseGrid(this.gridInput.value);
    } catch (e) {
      this.fail(e.message);
      return;
    }
    this.fail("");
    this.info.textContent = "running the grid on the server (timing only)…";
    const base = this.cmd.currentSet(); // the run on screen's overrides: every point keeps them
    try {
      const r = await fetch("/api/sweep", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ scenario: this.cmd.scenario(), set: base, grid }),
      });
      const body = await r.json().catch(() => ({}));
      if (!r.ok) {
        this.info.textContent = "";
        this.fail(errorText(body, r.status));
        return;
      }
      this.show(body, "the server", base);
    } catch (e) {
      this.info.textContent = "";
      this.fail(`sweep: ${e.message}`);
    }
  }

  // POST /api/breakeven over the grid's input lengths x request rates (the scenario's own where the grid has none)
  async runBreakEven() {
    let axes;
    try {
      axes = breakEvenAxes(parseGrid(this.gridInput.value), this.store.scenario);
    } catch (e) {
      this.fail(e.message);
      return;
    }
    this.fail("");
    this.info.textContent = `running the break-even on the server: ${axes.input_lens.length} x ${axes.request_rates.length} cells, two runs each…`;
    try {
      const r = await fetch("/api/breakeven", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ scenario: this.cmd.scenario(), set: this.cmd.currentSet(), ...axes }),
      });
      const body = await r.json().catch(() => ({}));
      if (!r.ok) {
        this.info.textContent = "";
        this.fail(`break-even: ${errorText(body, r.status)}`); // 503: "server busy: a sweep is running; retry shortly"
        return;
      }
      this.showBreakEven(body, "the server");
    } catch (e) {
      this.info.textContent = "";
      this.fail(`break-even: ${e.message}`);
    }
  }

  fail(text) {
    this.error.textContent = text;
    this.error.classList.toggle("hidden", !text);
  }

  // base: the overrides the grid ran on (a server grid: the run on screen's; a file: none recorded)
  show(data, source, base = {}) {
    if (isBreakEven(data)) return this.showBreakEven(data, source);
    if (!data || !Array.isArray(data.points)) throw new Error("not a `layerscope sweep --json` result (no points)");
    const sweep = this.store.scenario && this.store.scenario.sweep;
    const metric = data.metric || (sweep && sweep.metric) || null;
    const field = Object.keys(data.grid || {})[0];
    const pareto = (p) => typeof p.output_throughput_per_gpu === "number" && typeof p.median_tpot_ms === "number";
    const figure = (p) => p.summary && typeof p.summary[metric] === "number";
    const ok = metric ? figure : pareto;
    for (const p of data.points) {
      if (!ok(p) && !p.error) throw new Error(metric ? `each point needs its ${metric}, or an error` : "each point needs output_throughput_per_gpu and median_tpot_ms, or an error");
    }
    const refused = data.points.filter((p) => !ok(p));
    // points the scenario refused (e.g. weights that do not fit) are listed with the server's reason
    this.fail(refused.map((p) => `${setLabel(p.set)}: ${p.error}`).join(" · "));
    this.data = data;
    this.base = base;
    this.root.dataset.empty = "false";
    const pts = data.points.filter(ok);
    const { traces, layout } = metric ? this.figureOf(pts, data, metric, field) : this.paretoOf(pts, data);
    Plotly.react(this.plot, traces, layout, PLOT_CONFIG);
    if (!this.clickBound) {
      this.clickBound = true;
      this.plot.on("plotly_click", (ev) => {
        const pt = ev.points && ev.points.find((p) => p.data.meta === "points");
        if (pt) this.choose(pt.customdata);
      });
    }
    const fields = Object.keys(data.grid || {}).join(", ");
    const front = metric ? "" : ` · ${pts.filter((p) => p.pareto).length} on the Pareto front`;
    this.info.textContent = `${pts.length} configurations of ${data.scenario || "?"} over ${fields || "?"}${front}` +
      `${refused.length ? ` · ${refused.length} refused` : ""} · from ${source}`;
  }

  // `layerscope plan --break-even --json`: which deployment has the higher goodput per GPU, cell by cell (breakeven.js)
  showBreakEven(data, source) {
    this.fail("");
    this.data = data;
    this.root.dataset.empty = "false";
    const { traces, layout } = breakEvenFigure(data);
    Plotly.react(this.plot, traces, layout, PLOT_CONFIG);
    const [a] = data.deployments;
    const wins = data.cells.filter((c) => c.winner === a).length;
    this.info.textContent = `break-even: A ${data.deployments[0]} wins ${wins} of ${data.cells.length} cells against B ${data.deployments[1]} (goodput per GPU, simulated) · from ${source}`;
  }

  // a serving sweep: output throughput per GPU against median TPOT, the Pareto front joined
  paretoOf(pts, data) {
    const front = pts.filter((p) => p.pareto).sort((a, b) => a.median_tpot_ms - b.median_tpot_ms);
    const hover = (p) =>
      `<b>${esc(setLabel(p.set))}</b><br>median TPOT %{x:.2f} ms · %{y:.0f} tok/s per GPU` +
      (p.summary && p.summary.median_ttft_ms !== undefined ? `<br>median TTFT ${(+p.summary.median_ttft_ms).toFixed(1)} ms` : "") +
      `${p.pareto ? "<br>on the Pareto front" : ""}<br><i>click: load this configuration</i><extra>simulated</extra>`;
    const traces = [
      {
        type: "scatter", mode: "markers+text", name: "configurations", meta: "points", x: pts.map((p) => p.median_tpot_ms), y: pts.map((p) => p.output_throughput_per_gpu),
        text: pts.map((p) => setLabel(p.set)), textposition: "top center", textfont: { color: THEME.text, size: 10 }, cliponaxis: false,
        customdata: pts.map((p) => data.points.indexOf(p)), hovertemplate: pts.map(hover),
        marker: { color: pts.map((p) => (p.pareto ? FRONT : ALL)), size: pts.map((p) => (p.pareto ? 11 : 8)), line: { color: THEME.paper, width: 1 } },
      },
      {
        type: "scatter", mode: "lines", name: "Pareto front", meta: "front", x: front.map((p) => p.median_tpot_ms), y: front.map((p) => p.output_throughput_per_gpu),
        line: { color: FRONT, width: 1.5, shape: "hv", dash: "dot" }, hoverinfo: "skip",
      },
    ];
    const layout = plotLayout({
      margin: { l: 60, r: 24, t: 24, b: 36 },
      xaxis: { title: { text: "median TPOT (ms, whole model)", standoff: 2 }, gridcolor: THEME.grid, rangemode: "tozero" },
      yaxis: { title: { text: "output tok/s per GPU" }, gridcolor: THEME.grid, rangemode: "tozero" },
      hovermode: "closest", showlegend: false,
    });
    return { traces, layout };
  }

  // a one-request sweep: the scenario's figure against the grid's first field, one labelled point per setting
  figureOf(pts, data, metric, field) {
    const x = pts.map((p) => p.set[field]);
    const numeric = x.every((v) => typeof v === "number");
    const traces = [{
      type: "scatter", mode: "lines+markers+text", name: metric, meta: "points", x: numeric ? x : x.map(String), y: pts.map((p) => p.summary[metric]),
      text: pts.map((p) => setLabel(p.set)), textposition: "top center", textfont: { color: THEME.text, size: 10 }, cliponaxis: false,
      customdata: pts.map((p) => data.points.indexOf(p)),
      hovertemplate: pts.map((p) => `<b>${esc(setLabel(p.set))}</b><br>${esc(metric)} %{y:.4g}<br><i>click: load this configuration</i><extra>simulated</extra>`),
      marker: { color: ALL, size: 9, line: { color: THEME.paper, width: 1 } }, line: { color: ALL, width: 1.5 },
    }];
    const layout = plotLayout({
      margin: { l: 60, r: 24, t: 24, b: 36 },
      // a log axis ticked at the grid's own values (Plotly's own log ticks read "1000, 2, 3 ... 9")
      xaxis: { title: { text: field, standoff: 2 }, gridcolor: THEME.grid, type: numeric ? "log" : "category", ...(numeric ? { tickvals: x, ticktext: x.map(String) } : {}) },
      yaxis: { title: { text: metricTitle(metric) }, gridcolor: THEME.grid, rangemode: "tozero" },
      hovermode: "closest", showlegend: false,
    });
    return { traces, layout };
  }

  choose(i) {
    const p = this.data.points[i];
    const name = typeof this.data.scenario === "string" && this.data.scenario ? this.data.scenario : this.cmd.scenario();
    this.info.textContent = `loading ${setLabel(p.set)} of ${name}…`;
    this.cmd.load(name, { ...this.base, ...p.set });
  }
}

// The break-even's axes from a parsed grid: its workload.input_len and workload.request_rate values, each axis the
// scenario's own value where the grid has none; throws naming what is missing.
export function breakEvenAxes(grid, scenario) {
  const w = (scenario && scenario.workload) || {};
  const lens = grid["workload.input_len"] || (w.input_len ? [w.input_len] : null);
  const rates = grid["workload.request_rate"] || (Number.isFinite(w.request_rate) ? [w.request_rate] : null);
  if (!grid["workload.input_len"] && !grid["workload.request_rate"]) throw new Error("break-even: give workload.input_len and/or workload.request_rate values in the grid");
  if (!lens || !rates) throw new Error("break-even: give workload.request_rate values in the grid (this workload sends every request at once)");
  for (const v of [...lens, ...rates]) if (typeof v !== "number" || !(v > 0)) throw new Error(`break-even: '${v}' is not a number > 0`);
  return { input_lens: lens, request_rates: rates };
}

export function gridText(grid) {
  return Object.entries(grid || {}).map(([k, v]) => `${k}=${v.join(",")}`).join("; ");
}

// "prefill_model_ms" -> "prefill model (ms, whole model)": a summary key's name and unit
function metricTitle(key) {
  const unit = key.endsWith("_ms") ? "ms" : key.endsWith("_us") ? "µs" : "";
  const scope = key.includes("_model") ? ", whole model" : key.includes("_layer") ? ", one layer" : "";
  const name = key.replace(/_(ms|us)$/, "").replace(/_(model|layer)/, "").replace(/_/g, " ");
  return `${name}${unit ? ` (${unit}${scope})` : ""}`;
}

// A FastAPI error body as one line: "grid: at most 16 points (got 24)" or "body.grid.deployment.tp: ...".
export function errorText(body, status) {
  const d = body && body.detail;
  if (typeof d === "string") return d;
  if (Array.isArray(d) && d.length) return d.map((x) => `${(x.loc || []).filter((l) => l !== "body").join(".")}: ${x.msg}`).join("; ");
  return `the server answered ${status}`;
}
