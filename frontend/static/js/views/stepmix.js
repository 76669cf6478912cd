// Step composition: per engine step, prefill tokens stacked on decode tokens (one bar as wide as the step lasts
// on the timeline), the token budget (max_num_batched_tokens) as a line, and each step's whole-model duration on
// the right axis. Prefill bursts are tall orange bars, decode pulses short cyan ones. Same time axis as the timeline.

import { PLOT_CONFIG, STEP_MIX, legendAbove, plotLayout } from "../colors.js";
import { stepEnd } from "../serving.js";
import { bindZoom } from "./cursor.js";

const MAX_BARS = 1500; // more steps than this in view: one bar per screen pixel (the step with most tokens)

export class StepMixView {
  constructor(el, store, serving, info) {
    this.el = el;
    this.store = store;
    this.serving = serving;
    this.info = info;
    this.id = "step-mix";
    this.title = "step composition";
    this.drawn = "";
  }

  visible() {
    const ax = this.store.axis;
    const [x0, x1] = ax.shown();
    const steps = this.serving.steps.filter((st) => ax.toX(st.start + st.dur) >= x0 && ax.toX(st.start) <= x1);
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
    const ax = s.axis;
    const steps = this.visible();
    // a bar spans its step on the event clock: up to the next step's start (one layer or a whole-model step
    // apart, as the engine places them), at most model_dur_us
    const span = (st) => ax.toX(stepEnd(st)) - ax.toX(st.start);
    const x = steps.map((st) => ax.toX(st.start) + span(st) / 2);
    const w = steps.map((st) => span(st) * 0.92);
    const custom = steps.map((st) => [st.index, st.seqs, st.prefill, st.decode, st.budget, st.mdur / 1e3, st.dur, st.cached ?? "–"]);
    const tmpl =
      "step %{customdata[0]}: %{customdata[1]} sequences<br>prefill %{customdata[2]} + decode %{customdata[3]} tokens" +
      " of a %{customdata[4]}-token budget<br>%{customdata[5]:.2f} ms whole model (%{customdata[6]:.1f} µs one layer)" +
      "<br>cached blocks %{customdata[7]}<extra>simulated at full size</extra>";
    const bx = [];
    const by = [];
    for (const st of steps) {
      bx.push(ax.toX(st.start), ax.toX(st.start) + span(st));
      by.push(st.budget, st.budget);
    }
    const traces = [
      { type: "bar", name: "decode tokens", meta: "decode", x, y: steps.map((st) => st.decode), width: w, customdata: custom, marker: { color: STEP_MIX.decode }, hovertemplate: tmpl },
      { type: "bar", name: "prefill tokens", meta: "prefill", x, y: steps.map((st) => st.prefill), width: w, customdata: custom, marker: { color: STEP_MIX.prefill }, hovertemplate: tmpl },
      {
        type: "scatter", mode: "lines", name: "token budget", meta: "budget", x: bx, y: by,
        line: { color: STEP_MIX.budget, width: 1, dash: "dash" }, hovertemplate: "token budget %{y} tokens / step<extra>max_num_batched_tokens</extra>",
      },
      {
        type: "scatter", mode: "markers", name: "step duration", meta: "duration", x, y: steps.map((st) => st.mdur / 1e3), yaxis: "y2",
        marker: { color: STEP_MIX.duration, size: 4 }, hovertemplate: "step %{customdata[0]}: %{y:.2f} ms whole model<extra></extra>", customdata: custom,
      },
    ];
    const layout = plotLayout({
      uirevision: "step-mix",
      barmode: "stack",
      bargap: 0,
      showlegend: true,
      legend: legendAbove(),
      margin: { l: 50, r: 50, t: 26, b: 40 },
      xaxis: ax.xaxis(),
      shapes: ax.breaks().shapes,
      yaxis: { title: { text: "tokens / step" }, gridcolor: "#2a2e42", rangemode: "tozero" },
      yaxis2: { title: { text: "ms / step (model)" }, overlaying: "y", side: "right", rangemode: "tozero", showgrid: false, color: STEP_MIX.duration },
    });
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    bindZoom(this.el, s);
    const all = this.serving.steps;
    const pf = all.reduce((a, st) => a + st.prefill, 0);
    const dc = all.reduce((a, st) => a + st.decode, 0);
    const mixed = all.filter((st) => st.prefill > 0 && st.decode > 0).length;
    this.info.textContent = `${all.length} steps · ${mixed} mixed · ${pf} prefill + ${dc} decode tokens`;
    return true;
  }
}
