// Latency distributions, as `vllm bench serve` reports them: TTFT, TPOT (first token excluded) and ITL
// histograms in whole-model milliseconds of the finished requests, p50 and p99 marked, growing as requests
// finish; the SLA (sla_ms, a per-token latency target) drawn on TPOT and ITL. When the run ends, the server's
// summary figures appear beside the ones computed here from the events (they should agree).
//
// Two layers, so playback costs no Plotly call: the Plotly figure (axes, fixed bins, the whole run's bars drawn
// faint, the SLA) is drawn once per run / resize / theme; a canvas over it (overlay.js) draws the bars, p50 and
// p99 of the requests finished at or before the cursor, redrawn only when that count changes. Bin counts move
// incrementally (serving.finishOrder: values in finish order), so a cursor move costs a binary search and the
// values of the requests that finished (or un-finished, seeking back) since the last draw.

import { PHASE, PLOT_CONFIG, SERIES, STAGE_KIND, THEME, plotLayout, runColor } from "../colors.js";
import { PlotOverlay } from "./overlay.js";

const PANES = [
  { key: "ttft", title: "TTFT", color: () => PHASE.prefill, summary: "median_ttft_ms", unit: "requests" },
  { key: "tpot", title: "TPOT", color: () => PHASE.decode, summary: "median_tpot_ms", sla: true, unit: "requests" },
  { key: "itl", title: "ITL", color: () => STAGE_KIND.memory, summary: "median_itl_ms", sla: true, unit: "gaps" },
];
const BINS = 30;
// below this plot width the panes stack (a phone); side by side each keeps >= ~120 px (a 1280-wide window's panel)
const NARROW_PX = 400;
const GHOST = 0.22; // opacity of the whole run's bars behind the finished-so-far ones
// Each mark's label has a row of its own from the top of its pane, so the labels of both runs never cover each
// other, however close their values (issue 17: A's and B's p50 / p99 crowded at 1280 and 390 px): A p50, A p99,
// B p50, B p99, then the SLA. ROW_PX: a 10 px label and its box; rows shrink when a pane is too short for all.
const ROWS = { p50: 0, p99: 1, bp50: 2, bp99: 3, sla: 4 };
const ROW_PX = 14;
export function rowPx(paneH, rows) {
  return Math.max(8, Math.min(ROW_PX, paneH / rows));
}
const fmt = (v) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toPrecision(3)) : "–");

// Fixed bins over a pane's whole-run values: BINS wide over [0, top] (latencies are positive and the axis starts
// at 0, so a bar is at least 1/BINS of the axis wide), top a little past p99 (and the SLA) so a few stalls far
// out do not squeeze the body into one bin, or the largest value when none is past that. Values past top are
// counted "beyond".
export function binsOf(sorted, p99, sla) {
  const cap = Math.max(p99 * 1.4, sla ? sla * 1.2 : 0);
  let n = sorted.length;
  while (n > 0 && sorted[n - 1] > cap) n -= 1;
  const beyond = sorted.length - n;
  const top = beyond ? cap : n ? sorted[n - 1] : 1;
  const size = top > 0 ? (top * (1 + 1e-9)) / BINS : 1e-3; // the largest value falls in the last bin
  return { lo: 0, size, top: beyond ? cap : Infinity, end: size * BINS, beyond };
}

function binOf(b, v) {
  return v > b.top ? -1 : Math.max(0, Math.min(BINS - 1, Math.floor((v - b.lo) / b.size)));
}

export class LatencyDistView {
  // servingB: a comparison's run B, drawn over A's bars as a step outline with its own p50 / p99 (whole run)
  constructor(el, store, serving, info, servingB = null) {
    this.el = el;
    this.store = store;
    this.serving = serving;
    this.servingB = servingB;
    this.info = info;
    this.drawn = "";
    this.overlay = new PlotOverlay(el);
    this.panes = []; // per pane: {bins, bin (per value, in finish order), counts, beyond, m (values counted)}
    this.k = 0; // requests counted
    this.liveKey = "";
    this.shown = null; // what the overlay shows: {all, n, panes: {key: {n, counts, beyond, p50, p99}}} (tests)
  }

  // How many finished requests the histograms show now: all of them before play, once the run ended, or when fed
  // frame by frame; while a whole run plays (or is paused or seeked), those finished at or before the cursor.
  target() {
    const sv = this.serving;
    const s = this.store;
    const all = !sv.whole || s.ended || (s.frames === 0 && s.t === 0);
    return { all, k: all ? sv.finishOrder().t.length : sv.finishedBy(s.t) };
  }

  // Move each pane's counts from the first this.k finished requests to the first k.
  count(k) {
    const fo = this.serving.finishOrder();
    for (const p of this.panes) {
      const ends = fo.ends[p.key];
      const [a, b, sign] = k >= this.k ? [ends[this.k], ends[k], 1] : [ends[k], ends[this.k], -1];
      for (let i = a; i < b; i++) {
        const j = p.bin[i];
        if (j < 0) p.beyond += sign;
        else p.counts[j] += sign;
      }
    }
    this.k = k;
  }

  // the track interface: render(store, axis) (main.js); a third argument forces a redraw
  render(_store = this.store, _axis = this.store.axis, force = false) {
    const stamp = this.store.stamp(["requests", "theme"]) + (this.store.ended ? ":end" : "");
    if (!force && stamp === this.drawn) return false;
    this.drawn = stamp;
    const s = this.store;
    // a phone: the three panes stack, and the plot grows so each keeps a readable height (app.css .stacked)
    const narrow = this.el.clientWidth < NARROW_PX;
    this.el.classList.toggle("stacked", narrow);
    const gap = 0.06;
    const dom = (i) => (narrow ? [0, 1] : [i * (1 / 3) + (i ? gap / 2 : 0), (i + 1) * (1 / 3) - (i < 2 ? gap / 2 : 0)]);
    const ydom = (i) => (narrow ? [1 - (i + 1) / 3 + 0.09, 1 - i / 3 - 0.06] : [0, 0.86]);
    const sla = s.scenario && s.scenario.sla_ms;
    const fo = this.serving.finishOrder();
    const foB = this.servingB && this.servingB.order.length ? this.servingB.finishOrder() : null;
    // the labels' rows in each pane: its height in px, from the plot's (margins t 20, b 30 below)
    const paneH = (Math.max(this.el.clientHeight, 100) - 50) * (ydom(0)[1] - ydom(0)[0]);
    const rows = foB ? 5 : 3;
    this.rowPx = rowPx(paneH, rows);
    const rowY = (name) => 1 - (ROWS[name === "sla" && !foB ? "bp50" : name] * this.rowPx) / paneH; // y domain, top
    const shapes = [];
    const annotations = [];
    const layout = plotLayout({ margin: { l: 40, r: 8, t: 20, b: 30 }, bargap: 0.05, hovermode: "closest" });
    this.panes = [];
    const traces = [];
    this.bStats = {};
    PANES.forEach((p, i) => {
      const ax = i ? `${i + 1}` : "";
      const values = fo.values[p.key];
      const sorted = [...values].sort((a, b) => a - b);
      const n = fo.t.length;
      const valuesB = foB ? foB.values[p.key] : [];
      const sortedB = [...valuesB].sort((a, b) => a - b);
      const p99B = foB ? foB.p99[p.key][foB.t.length] : NaN;
      // one set of bins for both runs, so A's bars and B's outline read on one scale
      const both = foB ? [...sorted, ...sortedB].sort((a, b) => a - b) : sorted;
      const b = binsOf(both, Math.max(fo.p99[p.key][n], Number.isFinite(p99B) ? p99B : 0) || 0, p.sla && sla);
      const xEnd = Math.max(b.end, p.sla && sla ? sla * 1.1 : 0); // the pane's x range
      const bin = Int16Array.from(values, (v) => binOf(b, v));
      const whole = new Array(BINS).fill(0);
      for (const j of bin) if (j >= 0) whole[j] += 1;
      this.panes.push({ key: p.key, bins: b, bin, counts: new Array(BINS).fill(0), beyond: 0 });
      const x = whole.map((_, j) => b.lo + (j + 0.5) * b.size);
      const wholeB = new Array(BINS).fill(0);
      let beyondB = 0;
      for (const v of valuesB) {
        const j = binOf(b, v);
        if (j < 0) beyondB += 1;
        else wholeB[j] += 1;
      }
      const top = Math.max(1, ...whole, ...(foB ? wholeB : []));
      layout[`xaxis${ax}`] = {
        domain: dom(i), anchor: `y${ax}`, gridcolor: THEME.grid, zeroline: false, title: { text: narrow ? "" : `${p.title} (ms)`, standoff: 2 },
        range: [0, xEnd],
      };
      // fixed from the whole run, so the finished-so-far bars grow into it
      layout[`yaxis${ax}`] = { domain: ydom(i), anchor: `x${ax}`, gridcolor: THEME.grid, range: [0, top * 1.12], fixedrange: true };
      if (p.sla && sla) {
        shapes.push({ type: "line", xref: `x${ax}`, yref: `y${ax} domain`, x0: sla, x1: sla, y0: 0, y1: 1, line: { color: SERIES.sla, width: 1.5, dash: "dash" } });
        annotations.push({ xref: `x${ax}`, yref: `y${ax} domain`, x: sla, y: rowY("sla"), yanchor: "top", text: `SLA ${sla}`, showarrow: false, xanchor: "left", font: { size: 10, color: SERIES.sla }, bgcolor: THEME.panel, borderpad: 0 });
      }
      traces.push({
        type: "bar", name: foB ? `A ${p.title}` : p.title, meta: p.key, x, y: whole, width: b.size * 0.95, xaxis: `x${ax}`, yaxis: `y${ax}`, opacity: GHOST,
        customdata: x.map((c) => `${fmt(c - b.size / 2)}–${fmt(c + b.size / 2)}`),
        marker: { color: p.color(), line: { color: THEME.paper, width: 0.5 } },
        hovertemplate: `${foB ? "run A · " : ""}${p.title} %{customdata} ms: %{y} ${p.unit} of the whole run<extra>whole model, simulated</extra>`,
      });
      if (!foB) return;
      // run B: its whole run as an outline over A's bars, its p50 / p99 as lines in B's colour (labelled "B p50")
      const colB = runColor("compare");
      const stB = { n: valuesB.length, p50: foB.p50[p.key][foB.t.length], p99: p99B, beyond: beyondB, counts: wholeB };
      this.bStats[p.key] = stB;
      traces.push({
        type: "scatter", mode: "lines", name: `B ${p.title}`, meta: `B ${p.key}`, x, y: wholeB, xaxis: `x${ax}`, yaxis: `y${ax}`,
        line: { color: colB, width: 1.5, shape: "hvh" },
        customdata: x.map((c) => `${fmt(c - b.size / 2)}–${fmt(c + b.size / 2)}`),
        hovertemplate: `run B · ${p.title} %{customdata} ms: %{y} ${p.unit}<extra>whole model, simulated</extra>`,
      });
      for (const [q, v, y, dash] of [["p50", stB.p50, rowY("bp50"), "solid"], ["p99", stB.p99, rowY("bp99"), "dot"]]) {
        if (!Number.isFinite(v)) continue;
        shapes.push({ type: "line", xref: `x${ax}`, yref: `y${ax} domain`, x0: v, x1: v, y0: 0, y1: 1, line: { color: colB, width: 1.5, dash } });
        // past the middle of the pane the label reads leftwards from its line, inside the pane (as A's do)
        const side = v > 0.55 * xEnd ? "right" : "left";
        annotations.push({ xref: `x${ax}`, yref: `y${ax} domain`, x: v, y, yanchor: "top", text: `B ${q} ${fmt(v)}`, showarrow: false, xanchor: side, font: { size: 10, color: colB }, bgcolor: THEME.panel, borderpad: 0 });
      }
    });
    layout.shapes = shapes;
    layout.annotations = annotations;
    Plotly.react(this.el, traces, layout, PLOT_CONFIG);
    this.k = 0;
    this.liveKey = "";
    this.live();
    return true;
  }

  // Called every animation frame (main.js): redraws the overlay when the finished count or the plot's geometry
  // changed. True when it drew.
  live() {
    if (!this.panes.length) return false;
    const cur = this.target();
    const axes = PANES.flatMap((_, i) => [`xaxis${i ? i + 1 : ""}`, `yaxis${i ? i + 1 : ""}`]);
    const key = `${cur.all}:${cur.k}:${this.overlay.geometry(axes)}`;
    if (key === this.liveKey) return false;
    this.liveKey = key;
    if (cur.k !== this.k) this.count(cur.k);
    this.draw(cur);
    return true;
  }

  draw(cur) {
    const fo = this.serving.finishOrder();
    const k = this.k;
    const shown = { all: cur.all, n: k, panes: {} };
    this.labels = {}; // per pane, the canvas's labels drawn: {text, x, y, w, h}
    const info = [];
    const summary = this.store.ended || this.serving.whole ? this.store.summary || (this.store.main && this.store.main.summary) || {} : {};
    const ctx = this.overlay.begin();
    const fl = this.overlay.layout();
    PANES.forEach((p, i) => {
      const pane = this.panes[i];
      const st = { n: fo.ends[p.key][k], counts: [...pane.counts], beyond: pane.beyond, p50: fo.p50[p.key][k], p99: fo.p99[p.key][k] };
      shown.panes[p.key] = st;
      const b = this.bStats && this.bStats[p.key];
      info.push(`${p.title} ${b ? "A " : ""}p50 ${fmt(st.p50)} / p99 ${fmt(st.p99)} ms` +
        (cur.all && summary[p.summary] !== undefined ? ` (server median ${fmt(summary[p.summary])})` : "") +
        (b ? `, B p50 ${fmt(b.p50)} / p99 ${fmt(b.p99)} ms` : ""));
      if (ctx && fl) this.drawPane(ctx, fl, p, i, pane, st);
    });
    this.shown = shown;
    const total = fo.t.length;
    // run B is drawn whole (an outline): while A grows with the cursor, the line says so beside B's figures
    const ofB = this.bStats && !cur.all ? "; B: its whole run" : "";
    const which = !this.serving.whole ? "" : cur.all ? `every request of the run (${total}), ` : `${k} of ${total} requests finished by the cursor (faint: the whole run${ofB}), `;
    const text = `${info.join(" · ")} · ${which}whole model, simulated at full size`;
    if (text !== this.info.textContent) this.info.textContent = text;
  }

  // One pane on the overlay: the finished-so-far bars, p50 / p99 lines and labels, the title with n.
  drawPane(ctx, fl, p, i, pane, st) {
    const ax = i ? `${i + 1}` : "";
    const xa = fl[`xaxis${ax}`];
    const ya = fl[`yaxis${ax}`];
    if (!xa || !ya) return;
    const X = (v) => xa._offset + xa.l2p(v);
    const Y = (v) => ya._offset + ya.l2p(v);
    const b = pane.bins;
    ctx.save();
    ctx.beginPath();
    ctx.rect(xa._offset, ya._offset - 14, xa._length, ya._length + 14);
    ctx.clip();
    ctx.fillStyle = p.color();
    const y0 = Y(0);
    st.counts.forEach((c, j) => {
      if (!c) return;
      const a = X(b.lo + j * b.size + b.size * 0.025);
      const w = Math.max(1, X(b.lo + (j + 0.975) * b.size) - a);
      const top = Y(c);
      ctx.fillRect(a, top, w, y0 - top);
    });
    ctx.font = "10px ui-monospace, Menlo, monospace";
    ctx.textBaseline = "top";
    const labels = (this.labels[p.key] = []);
    const mark = (v, color, dash, label, row) => {
      if (!Number.isFinite(v)) return;
      const x = X(v);
      ctx.strokeStyle = color;
      ctx.lineWidth = 1.5;
      ctx.setLineDash(dash);
      ctx.beginPath();
      ctx.moveTo(x, ya._offset);
      ctx.lineTo(x, ya._offset + ya._length);
      ctx.stroke();
      ctx.setLineDash([]);
      const y = ya._offset + row * (this.rowPx || ROW_PX);
      const wText = ctx.measureText(label).width;
      const tx = x + wText + 4 > xa._offset + xa._length ? x - wText - 4 : x + 2; // left of the line at the right edge
      ctx.fillStyle = THEME.panel;
      ctx.fillRect(tx, y, wText + 2, 12);
      labels.push({ text: label, x: tx, y, w: wText + 2, h: 12 }); // css px in the figure (tests)
      ctx.fillStyle = color;
      ctx.fillText(label, tx + 1, y + 1);
    };
    const tag = this.bStats && this.bStats[p.key] ? "A " : "";
    mark(st.p50, THEME.bright, [], `${tag}p50 ${fmt(st.p50)}`, ROWS.p50);
    mark(st.p99, SERIES.error, [2, 2], `${tag}p99 ${fmt(st.p99)}`, ROWS.p99);
    if (st.beyond) {
      ctx.textAlign = "right";
      ctx.fillStyle = THEME.text;
      ctx.fillText(`+${st.beyond} beyond →`, xa._offset + xa._length - 2, ya._offset + ya._length * 0.5);
      ctx.textAlign = "left";
    }
    ctx.restore();
    ctx.fillStyle = THEME.text;
    ctx.font = "bold 10px ui-monospace, Menlo, monospace";
    ctx.textBaseline = "bottom";
    ctx.fillText(`${p.title}${this.el.clientWidth < NARROW_PX ? " (ms)" : ""} n=${st.n}`, xa._offset, ya._offset - 3);
  }
}
