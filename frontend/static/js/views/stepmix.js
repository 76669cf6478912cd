// Step composition: per engine step, prefill tokens stacked on decode tokens (one bar as wide as the step lasts
// on the timeline), the token budget (max_num_batched_tokens) as a line, and each step's whole-model duration on
// the right axis. Prefill bursts are tall orange bars, decode pulses short cyan ones. Same time axis as the timeline.

import { PLOT_CONFIG, STEP_MIX, THEME, legendAbove, plotLayout, runColor } from "../colors.js";
import { stepEnd } from "../serving.js";
import { bindZoom } from "./cursor.js";

const MAX_BARS = 1500; // more steps than this in view: one bar per screen pixel (the step with most tokens)

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
  }

  visible(sv = this.serving, ax = this.store.axis) {
    const [x0, x1] = this.store.axis.shown();
    const steps = sv.steps.filter((st) => ax.toX(st.start + st.dur) >= x0 && ax.toX(st.start) <= x1);
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
    const two = Boolean(this.servingB && this.servingB.steps.length);
    if (this.el.classList.contains("two") !== two) this.el.classList.toggle("two", two); // taller: two rows
    const traces = this.runTraces(this.serving, s.axis, "", two ? "A " : "", true);
    if (two) traces.push(...this.runTraces(this.servingB, s.axis.of(s.compareRun), "3", "B ", false));
    const ax = s.axis;
    const split = (a, b) => (two ? [a, b] : [0, 1]);
    const layout = plotLayout({
      uirevision: "step-mix",
      barmode: "stack",
      bargap: 0,
      showlegend: true,
      legend: legendAbove(),
      margin: { l: 50, r: 50, t: 26, b: 40 },
      xaxis: ax.xaxis(two ? { anchor: "y3" } : {}),
      shapes: ax.breaks().shapes,
      yaxis: { title: { text: two ? "A tokens" : "tokens / step" }, gridcolor: "#2a2e42", rangemode: "tozero", domain: split(0.56, 1) },
      yaxis2: { title: { text: "ms / step (model)" }, overlaying: "y", side: "right", rangemode: "tozero", showgrid: false, color: STEP_MIX.duration },
    });
    if (two) {
      layout.yaxis3 = { title: { text: "B tokens" }, gridcolor: "#2a2e42", rangemode: "tozero", domain: [0, 0.44], anchor: "x" };
      layout.yaxis4 = { title: { text: "ms / step" }, overlaying: "y3", side: "right", rangemode: "tozero", showgrid: false, color: STEP_MIX.duration, anchor: "x" };
      layout.annotations = [["main", 1, s.main], ["compare", 0.44, s.compareRun]].map(([role, y, run]) => ({
        xref: "paper", x: 0, xanchor: "left", yref: "paper", y, yanchor: "top", showarrow: false, bgcolor: THEME.panel,
        text: `${role === "main" ? "A" : "B"} ${run ? run.label : ""}`, font: { size: 10, color: runColor(role) } }));
    }
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    bindZoom(this.el, s);
    const line = (all) => {
      const pf = all.reduce((a, st) => a + st.prefill, 0);
      const dc = all.reduce((a, st) => a + st.decode, 0);
      const mixed = all.filter((st) => st.prefill > 0 && st.decode > 0).length;
      return `${all.length} steps · ${mixed} mixed · ${pf} prefill + ${dc} decode tokens`;
    };
    this.info.textContent = two ? `A: ${line(this.serving.steps)} · B: ${line(this.servingB.steps)}` : line(this.serving.steps);
    return true;
  }

  // One run's bars, budget line and step durations on y{n} / y{n+1} ("" and 2 for A, 3 and 4 for B).
  runTraces(sv, ax, n, tag, legend) {
    const steps = this.visible(sv, ax);
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
    const meta = tag === "B " ? "B " : "";
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
