// Step composition: per engine step, prefill tokens stacked on decode tokens (one bar as wide as the step lasts
// on the timeline), the token budget (max_num_batched_tokens) as a line, and each step's whole-model duration on
// the right axis. Prefill bursts are tall orange bars, decode pulses short cyan ones. Same time axis as the timeline.
// A run of several engines (DP ranks, replicas, a disaggregated run's pools: the steps' `instance`) gets one row per
// engine, or the one engine its selector picks; a comparison's run B its own rows below A's.

import { PLOT_CONFIG, STEP_MIX, THEME, legendAbove, plotLayout, runColor } from "../colors.js";
import { engineLabel } from "../instances.js";
import { stepEnd } from "../serving.js";
import { bindZoom } from "./cursor.js";

const MAX_BARS = 1500; // more steps than this in view: one bar per screen pixel (the step with most tokens)
const ALL = "all"; // the selector's value for one row per engine
const MAX_ROWS = 16; // engines drawn as rows at most (a wider DP group: pick one with the selector)
const DEFAULT_ROWS = 8; // more engines than this open on the first one alone (rows on request): a readable panel

// A run's rows: [{sv, inst (null: its only engine), label}] for the engines `pick` names ("all" or one instance)
export function engineRows(sv, summary, pick) {
  const ids = sv.instances();
  if (ids.length <= 1) return [{ inst: null, label: "" }];
  const chosen = pick === ALL ? ids.slice(0, MAX_ROWS) : ids.includes(Number(pick)) ? [Number(pick)] : [ids[0]];
  return chosen.map((i) => ({ inst: i, label: engineLabel(summary, i) }));
}

export class StepMixView {
  // servingB: a comparison's run B, drawn in a second row of the same time axis (or an empty ServingState)
  constructor(el, store, serving, info, servingB = null) {
    this.el = el;
    this.store = store;
    this.serving = serving;
    this.servingB = servingB;
    this.info = info;
    this.id = "step-mix";
    this.title = "step composition";
    this.drawn = "";
    this.pick = ALL; // "all": one row per engine; else the one instance drawn
    this.picker = document.createElement("select");
    this.picker.className = "hidden";
    this.picker.dataset.testid = "stepmix-instance";
    this.picker.title = "Which engine's steps: one row per engine, or one engine (a DP rank, a replica, a pool's engine)";
    this.picker.setAttribute("aria-label", "engine shown in the step composition");
    this.picker.addEventListener("change", () => {
      this.pick = this.picker.value;
      this.render(this.store, this.store.axis, true);
    });
    if (info) info.after(this.picker);
  }

  // the selector's options: every engine of run A (or hidden for a run of one engine)
  fillPicker() {
    const ids = this.serving.instances();
    const key = ids.join(",");
    this.picker.classList.toggle("hidden", ids.length <= 1);
    if (this.picker.dataset.ids === key) return;
    this.picker.dataset.ids = key; // another run's engines: start again from its default
    const summary = this.store.main && this.store.main.summary;
    this.pick = ids.length > DEFAULT_ROWS ? String(ids[0]) : ALL;
    const opts = [[ALL, ids.length > MAX_ROWS ? `first ${MAX_ROWS} engines, one row each` : "every engine, one row each"],
      ...ids.map((i) => [String(i), engineLabel(summary, i)])];
    this.picker.replaceChildren(...opts.map(([v, t]) => new Option(t, v, false, v === this.pick)));
    this.picker.value = this.pick;
  }

  visible(sv = this.serving, ax = this.store.axis, inst = null) {
    const [x0, x1] = this.store.axis.shown();
    const own = inst === null ? sv.steps : sv.steps.filter((st) => st.inst === inst);
    const steps = own.filter((st) => ax.toX(st.start + st.dur) >= x0 && ax.toX(st.start) <= x1);
    if (steps.length <= MAX_BARS) return steps;
    const pxX = (x1 - x0) / Math.max(this.el.clientWidth - 100, 100);
    const out = [];
    for (const st of steps) {
      const last = out[out.length - 1];
      if (last && Math.floor(ax.toX(last.start) / pxX) === Math.floor(ax.toX(st.start) / pxX)) {
        if (st.prefill + st.decode > last.prefill + last.decode) out[out.length - 1] = st;
      } else out.push(st);
    }
    return out;
  }

  // the track interface: render(store, axis) (main.js); a third argument forces a redraw
  render(_store = this.store, _axis = this.store.axis, force = false) {
    const stamp = this.store.stamp(["steps", "axis", "theme"]);
    if (!this.store.redrawDue(this, stamp, force)) return false;
    const s = this.store;
    this.fillPicker();
    const two = Boolean(this.servingB && this.servingB.steps.length);
    const rows = engineRows(this.serving, s.main && s.main.summary, this.pick).map((r) => ({ ...r, sv: this.serving, role: "main", ax: s.axis }));
    if (two) rows.push(...engineRows(this.servingB, s.compareRun && s.compareRun.summary, this.pick).map((r) => ({ ...r, sv: this.servingB, role: "compare", ax: s.axis.of(s.compareRun) })));
    const n = rows.length;
    const tall = n > 2 ? `${Math.min(1400, 70 + (n > 4 ? 80 : 110) * n)}px` : ""; // a row's height: 80-110 px
    if (this.el.style.height !== tall) this.el.style.height = tall;
    if (this.el.classList.contains("two") !== (n === 2)) this.el.classList.toggle("two", n === 2); // taller: two rows
    const gap = n > 1 ? Math.min(0.12, 0.3 / n) : 0;
    const domain = (j) => [Math.max(0, 1 - (j + 1) / n + gap / 2), Math.min(1, 1 - j / n - (j ? gap / 2 : 0))];
    const traces = [];
    const layout = plotLayout({
      uirevision: "step-mix",
      barmode: "stack",
      bargap: 0,
      showlegend: true,
      legend: legendAbove(),
      margin: { l: 50, r: 50, t: 26, b: 40 },
      shapes: s.axis.breaks().shapes,
      annotations: [],
    });
    rows.forEach((row, j) => {
      const ya = j ? `yaxis${2 * j + 1}` : "yaxis";
      const run = row.role === "main" ? "A " : "B ";
      const tag = `${two ? run : ""}${row.label ? `${row.label} ` : ""}`;
      const meta = `${row.role === "compare" ? "B " : ""}${row.label ? `${row.label} ` : ""}`; // "prefill", "B rank 3 prefill"
      traces.push(...this.runTraces(row.sv, row.ax, j ? String(2 * j + 1) : "", tag, j === 0, row.inst, meta));
      layout[ya] = { title: { text: n === 1 ? "tokens / step" : row.label ? "tokens" : `${tag}tokens` }, gridcolor: "#2a2e42", rangemode: "tozero", domain: domain(j), ...(j ? { anchor: "x" } : {}) };
      layout[`yaxis${2 * j + 2}`] = { title: { text: j ? "ms / step" : "ms / step (model)" }, overlaying: j ? `y${2 * j + 1}` : "y", side: "right", rangemode: "tozero", showgrid: false, color: STEP_MIX.duration, ...(j ? { anchor: "x" } : {}) };
      if (n > 1) {
        const runs = { main: s.main, compare: s.compareRun };
        const text = row.label ? `${two ? run : ""}${row.label}` : `${run}${runs[row.role] ? runs[row.role].label : ""}`;
        layout.annotations.push({ xref: "paper", x: 0, xanchor: "left", yref: "paper", y: domain(j)[1], yanchor: "top", showarrow: false, bgcolor: THEME.panel, text, font: { size: 10, color: runColor(row.role) } });
      }
    });
    layout.xaxis = s.axis.xaxis(n > 1 ? { anchor: `y${2 * (n - 1) + 1}` } : {});
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    bindZoom(this.el, s);
    const line = (all) => {
      const pf = all.reduce((a, st) => a + st.prefill, 0);
      const dc = all.reduce((a, st) => a + st.decode, 0);
      const mixed = all.filter((st) => st.prefill > 0 && st.decode > 0).length;
      return `${all.length} steps · ${mixed} mixed · ${pf} prefill + ${dc} decode tokens`;
    };
    const engines = this.serving.instances().length;
    const a = `${line(this.serving.steps)}${engines > 1 ? ` over ${engines} engines` : ""}`;
    this.info.textContent = two ? `A: ${a} · B: ${line(this.servingB.steps)}` : a;
    return true;
  }

  // One row's bars, budget line and step durations on y{n} / y{n+1} ("" and 2 for the first row, 3 and 4 for the
  // second, ...): run `sv`'s steps of engine `inst` (null: all its steps, a run of one engine). `tag` prefixes the
  // hover ("A rank 3 "), `meta` the traces' meta ("B " for a comparison's run B, "rank 3 " for one engine's row).
  runTraces(sv, ax, n, tag, legend, inst = null, meta = tag === "B " ? "B " : "") {
    const steps = this.visible(sv, ax, inst);
    const y = n ? `y${n}` : "y";
    const y2 = n ? `y${Number(n) + 1}` : "y2";
    // a bar spans its step on the event clock: up to the next step's start (one layer or a whole-model step
    // apart, as the engine places them), at most model_dur_us
    const span = (st) => ax.toX(stepEnd(st)) - ax.toX(st.start);
    const x = steps.map((st) => ax.toX(st.start) + span(st) / 2);
    const w = steps.map((st) => span(st) * 0.92);
    const custom = steps.map((st) => [st.index, st.seqs, st.prefill, st.decode, st.budget, st.mdur / 1e3, st.dur, st.cached ?? "–"]);
    const tmpl =
      `${tag ? `run ${tag}· ` : ""}step %{customdata[0]}: %{customdata[1]} sequences<br>prefill %{customdata[2]} + decode %{customdata[3]} tokens` +
      " of a %{customdata[4]}-token budget<br>%{customdata[5]:.2f} ms whole model (%{customdata[6]:.1f} µs one layer)" +
      "<br>cached blocks %{customdata[7]}<extra>simulated at full size</extra>";
    const bx = [];
    const by = [];
    for (const st of steps) {
      bx.push(ax.toX(st.start), ax.toX(st.start) + span(st));
      by.push(st.budget, st.budget);
    }
    return [
      { type: "bar", name: "decode tokens", meta: `${meta}decode`, x, y: steps.map((st) => st.decode), width: w, customdata: custom, marker: { color: STEP_MIX.decode }, hovertemplate: tmpl, yaxis: y, showlegend: legend, legendgroup: "decode" },
      { type: "bar", name: "prefill tokens", meta: `${meta}prefill`, x, y: steps.map((st) => st.prefill), width: w, customdata: custom, marker: { color: STEP_MIX.prefill }, hovertemplate: tmpl, yaxis: y, showlegend: legend, legendgroup: "prefill" },
      {
        type: "scatter", mode: "lines", name: "token budget", meta: `${meta}budget`, x: bx, y: by, yaxis: y, showlegend: legend, legendgroup: "budget",
        line: { color: STEP_MIX.budget, width: 1, dash: "dash" }, hovertemplate: "token budget %{y} tokens / step<extra>max_num_batched_tokens</extra>",
      },
      {
        type: "scatter", mode: "markers", name: "step duration", meta: `${meta}duration`, x, y: steps.map((st) => st.mdur / 1e3), yaxis: y2, showlegend: legend, legendgroup: "duration",
        marker: { color: STEP_MIX.duration, size: 4 }, hovertemplate: `${tag ? `run ${tag}· ` : ""}step %{customdata[0]}: %{y:.2f} ms whole model<extra></extra>`, customdata: custom,
      },
    ];
  }
}
