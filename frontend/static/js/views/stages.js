// Time per stage: the whole prefill (all chunks) on the left, the mean decode step on the right, in the
// shared axis's units: one layer (whole-model kernels, scope "model" such as the embedding lookup or the
// article's switch-over, are not a layer's stage and are left out), or the whole model (x num_layers, the
// whole-model kernels counted once). A comparison preset shows both runs side by side in their run colours
// (decode bars hatched), so "which stage got slower" reads at a glance. Hover: launches, mean per launch, HBM
// bandwidth utilisation. No L2 hit rate: L2 reuse is not modelled (docs/design.md).

import { PHASE, PLOT_CONFIG, legendAbove, plotLayout, runColor } from "../colors.js";
import { isOneOff } from "../axis.js";
import { us } from "../format.js";

function totals(kernels, phase, layers, model) {
  const by = new Map();
  for (const k of kernels) {
    if (k.phase !== phase || (!model && isOneOff(k))) continue;
    let r = by.get(k.stage);
    if (!r) by.set(k.stage, (r = { us: 0, n: 0, hbm: 0, raw: 0, kind: k.stage_kind }));
    r.us += isOneOff(k) ? k.dur_us : k.dur_us * layers; // a whole-model cost is paid once, not per layer
    r.n += 1;
    r.hbm += k.hbm_util * k.dur_us;
    r.raw += k.dur_us;
  }
  return by;
}

// How many engine steps ran kernels of this phase (a serving run's kernels carry their step).
function stepsOf(kernels, phase) {
  const seen = new Set();
  for (const k of kernels) if (k.phase === phase && k.step !== null && k.step !== undefined) seen.add(k.step);
  return Math.max(seen.size, 1);
}

export class StagesView {
  constructor(el, store) {
    this.el = el;
    this.store = store;
    this.id = "stages";
    this.title = "stages";
    this.drawn = "";
  }

  // the track interface (store.js): render(store, axis) -> true when it drew; force redraws regardless
  render(store = this.store, axis = store.axis, force = false) {
    const s = this.store;
    const stamp = s.stamp(["axis", "theme"]);
    if (!force && stamp === this.drawn) return false;
    this.drawn = stamp;
    const model = s.axis.units === "model";
    const layers = model ? s.layers : 1;
    const topo = s.topology;
    const order = [];
    for (const ph of ["prefill", "decode"]) for (const n of topo ? topo[ph].nodes : []) if (!order.includes(n.id)) order.push(n.id);
    for (const run of s.runs) for (const k of run.kernel) if (!order.includes(k.stage)) order.push(k.stage);
    const many = s.runs.length > 1;
    const traces = [];
    let maxPre = 0;
    let maxDec = 0;
    const serving = s.runs.some((r) => r.step.length);
    this.serving = serving;
    for (const run of s.runs) {
      const steps = Math.max(run.decode_step.length, 1);
      for (const phase of ["prefill", "decode"]) {
        const by = totals(run.kernel, phase, layers, model);
        const stages = order.filter((x) => by.has(x));
        if (!stages.length) continue;
        // a serving run: per engine step (the mean over the steps that ran this phase), beside its TPOT; a
        // one-request run: the whole prefill, the mean decode step
        const div = run.step.length ? stepsOf(run.kernel, phase) : phase === "decode" ? steps : 1;
        const perStep = phase === "decode" || run.step.length;
        const scale = !perStep || model ? 1e3 : 1; // whole prefill in ms, a step in µs (one layer) or ms (whole model)
        const y = stages.map((x) => by.get(x).us / div / scale);
        if (phase === "prefill") maxPre = Math.max(maxPre, ...y);
        else maxDec = Math.max(maxDec, ...y);
        const color = many ? runColor(run.role) : PHASE[phase];
        traces.push({
          type: "bar", name: `${many ? `${run.role === "compare" ? "B" : "A"} ${run.label} · ` : ""}${phase}`, x: stages, y,
          xaxis: phase === "prefill" ? "x" : "x2", yaxis: phase === "prefill" ? "y" : "y2", offsetgroup: run.role,
          marker: { color, line: { color, width: 1 }, pattern: phase === "decode" && many ? { shape: "/", fgcolor: color, bgcolor: "rgba(0,0,0,0)", solidity: 0.5 } : undefined },
          customdata: stages.map((x) => {
            const r = by.get(x);
            return [us(r.raw / div), r.n, us(r.raw / r.n), (100 * r.hbm) / (r.raw || 1)];
          }),
          hovertemplate:
            `<b>%{x}</b> · ${run.label} · ${phase}<br>%{y:.3g} ${scale === 1e3 ? "ms" : "µs"} ${perStep ? `per step (mean of ${div} steps)` : "whole prefill"}` +
            `${model ? ` (whole model, ${s.layers} layers)` : " (one layer)"}<br>one layer: %{customdata[0]} · %{customdata[1]} launches (%{customdata[2]} each)` +
            "<br>HBM util %{customdata[3]:.0f}%<extra>simulated at full size</extra>",
        });
      }
    }
    const layout = plotLayout({
      barmode: "group",
      showlegend: true,
      legend: legendAbove(),
      margin: { l: 50, r: 50, t: many ? 44 : 30, b: 70 },
      xaxis: { domain: [0, 0.47], tickangle: -35, tickfont: { size: 9 }, title: { text: serving ? "prefill (mean step with prefill)" : "prefill (whole)", standoff: 2 } },
      xaxis2: { domain: [0.55, 1], anchor: "y2", tickangle: -35, tickfont: { size: 9 }, title: { text: "decode (mean step)", standoff: 2 } },
      yaxis: { title: { text: serving ? (model ? "ms / step" : "µs / step") : "ms" }, rangemode: "tozero", range: [0, maxPre * 1.1 || 1] },
      yaxis2: { anchor: "x2", side: "right", title: { text: model ? "ms / step" : "µs / step" }, rangemode: "tozero", range: [0, maxDec * 1.1 || 1] },
    });
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    if (!this.bound && this.el.on) {
      this.bound = true;
      this.el.on("plotly_hover", (d) => this.onHover && d.points.length && this.onHover(d.points[0].x));
      this.el.on("plotly_unhover", () => this.onHover && this.onHover(null));
    }
    if (this.linked) this.link(this.linked);
    return true;
  }

  // Mark stage id's tick labels (hovered in another panel: the topology), or none.
  link(id) {
    this.linked = id;
    for (const t of this.el.querySelectorAll(".xtick text, .x2tick text")) t.classList.toggle("linked-text", id !== null && t.textContent === id);
  }
}
