// Request lanes (a Gantt chart, one row per request in arrival order): waiting, prefill chunks (one bar per
// step that computed some of its prompt), decode, preempted and recomputed, finished. Drawn from the whole run
// (the dashboard), the lanes are one Plotly figure drawn once; the shared cursor marks the time and the requests
// of the step running at the cursor are highlighted on a canvas over the plot (overlay.js: a band across each of
// their rows and a mark over the step), redrawn when the step changes, never a Plotly call per cursor move.
// Hover (the plot's own, under the overlay): input/output length, TTFT, TPOT (whole model). Same time axis as the timeline.

import { PLOT_CONFIG, REQUEST_STATE, THEME, plotLayout, runColor } from "../colors.js";
import { stepEnd } from "../serving.js";
import { bindZoom } from "./cursor.js";
import { PlotOverlay } from "./overlay.js";
import { phasesLine, poolBands, poolsOf } from "../poolgroups.js";
import { replicaBands, replicaColor, replicasOf } from "../replicagroups.js";
import { engineLabel } from "../instances.js";
import { hideTip, showTip } from "./tip.js";

const LABEL = {
  waiting: "waiting", prefill: "prefill chunk", kv_wait: "KV wait (prefilled, waiting for decode blocks)",
  transfer: "KV transfer (prefill pool to decode pool)", decode: "decode", preempted: "preempted (KV freed, waiting to recompute)",
  recompute: "recompute chunk",
};
const ms = (v) => (Number.isFinite(v) ? `${v.toFixed(v >= 100 ? 0 : 2)} ms` : "–");
// In a comparison each run's block of lanes takes at least this share of the plot's height: a run B of 4 requests
// beside an A of 128 would otherwise get rows 1 px high (its rows grow instead; the bars stay at most 14 px)
const MIN_BLOCK_SHARE = 0.25;

// The y of lane i of a block (its rows are `pitch` units apart, centred in their band).
const laneY = (bl, i) => bl.row0 + i * bl.pitch + (bl.pitch - 1) / 2;

export class RequestsView {
  // servingB: a comparison's run B (its lanes below A's, after a gap row), or an empty ServingState
  constructor(el, store, serving, info, servingB = null) {
    this.el = el;
    this.store = store;
    this.serving = serving;
    this.servingB = servingB;
    this.info = info;
    this.id = "requests";
    this.title = "request lanes";
    this.drawn = "";
    this.overlay = new PlotOverlay(el);
    this.liveKey = "";
    this.highlighted = []; // request ids highlighted now (tests)
    this.linked = null; // {role, id}: a request hovered in another panel (the bank map), outlined on its lane
    this.onHover = null; // (role, id) | (null): a request hovered here (main.js links it to the bank map)
    el.addEventListener("mousemove", (ev) => this.hoverAt(ev));
    el.addEventListener("mouseleave", () => {
      hideTip();
      if (this.onHover) this.onHover(null);
    });
  }

  // The request and lane segment under the pointer, anywhere on its row's bar (not only at Plotly's points).
  pointAt(ev) {
    const fl = this.el._fullLayout;
    if (!fl || !fl.xaxis || !fl.yaxis) return null;
    const xa = fl.xaxis;
    const ya = fl.yaxis;
    const box = this.el.getBoundingClientRect();
    const px = ev.clientX - box.left - xa._offset;
    const py = ev.clientY - box.top - ya._offset;
    if (px < 0 || px > xa._length || py < 0 || py > ya._length) return null;
    const x = xa.p2l(px);
    const yv = ya.p2l(py);
    for (const bl of this.blocks()) {
      const i = Math.round((yv - laneY(bl, 0)) / bl.pitch);
      if (i < 0 || i >= bl.sv.order.length) continue;
      const req = bl.sv.requests.get(bl.sv.order[i]);
      const now = bl.sv.whole ? bl.ax.extent[1] : this.store.t;
      const slack = (xa.p2l(4) - xa.p2l(0)) || 0; // 4 px either side of a thin chunk
      const seg = bl.sv.lanes(req, now).find((sg) => bl.ax.toX(sg.t0) - slack <= x && x <= bl.ax.toX(sg.t1) + slack) || null;
      return { bl, req, seg };
    }
    return null;
  }

  hoverAt(ev) {
    const hit = this.pointAt(ev);
    if (!hit) {
      hideTip();
      if (this.onHover) this.onHover(null);
      return;
    }
    const { bl, req, seg } = hit;
    const state = seg ? (seg.n ? `${LABEL[seg.state]}: ${seg.n} tokens this step` : LABEL[seg.state]) : req.finished !== null ? "finished" : "not arrived yet";
    showTip(`${this.hover(req, bl.sv, bl.tag)}<br>now: ${state}`, ev.clientX, ev.clientY);
    if (this.onHover) this.onHover(bl.tag === "B " ? "compare" : "main", req.id);
  }

  // Outline the lane of request id of run role (hovered in the bank map), or none.
  link(role, id) {
    const next = id === null || id === undefined ? null : { role, id };
    if (JSON.stringify(next) === JSON.stringify(this.linked)) return;
    this.linked = next;
    this.liveKey = ""; // the overlay redraws
  }

  // The steps running at the cursor, one per engine (none before the first or between steps): their requests are
  // highlighted.
  current() {
    return this.serving.stepsAt(this.store.t);
  }

  // Called every animation frame (main.js): redraws the highlight when the cursor's step or the plot's geometry
  // changed. True when it drew.
  live() {
    const steps = this.current();
    const at = steps.map((st) => `${st.inst}.${st.index}`).join(",") || "-";
    const key = `${at}:${this.drawn}:${this.overlay.geometry(["xaxis", "yaxis"])}`;
    if (key === this.liveKey) return false;
    this.liveKey = key;
    const ctx = this.overlay.begin();
    const fl = this.overlay.layout();
    this.highlighted = [];
    if (ctx && fl && this.linked) this.drawLinked(ctx, fl);
    if (!ctx || !fl || !steps.length) return true;
    const xa = fl.xaxis;
    const ya = fl.yaxis;
    const main = this.blocks()[0];
    const rowH = Math.abs(ya.l2p(1) - ya.l2p(0)) * main.pitch;
    const h = Math.max(2, rowH * 0.9);
    ctx.save();
    ctx.beginPath();
    ctx.rect(xa._offset, ya._offset, xa._length, ya._length);
    ctx.clip();
    for (const cur of steps) this.outline(ctx, cur, xa, ya, main, h);
    ctx.restore();
    return true;
  }

  // One engine's step at the cursor: its requests' rows banded across the plot, the step's span outlined.
  outline(ctx, cur, xa, ya, main, h) {
    const ax = this.store.axis;
    const a = xa._offset + xa.l2p(ax.toX(cur.start));
    const w = Math.max(3, xa._offset + xa.l2p(ax.toX(stepEnd(cur))) - a); // at least 3 px: a step can be narrower
    for (const id of cur.ids) {
      const row = this.serving.order.indexOf(id);
      if (row < 0) continue;
      this.highlighted.push(id);
      const y = ya._offset + ya.l2p(laneY(main, row)) - h / 2;
      ctx.globalAlpha = 0.14;
      ctx.fillStyle = THEME.bright;
      ctx.fillRect(xa._offset, y, xa._length, h); // the row, across the plot: findable at any zoom
      ctx.globalAlpha = 0.9;
      ctx.fillRect(a - 1, y - 1, w + 2, h + 2);
    }
  }

  // The runs drawn: [{sv, row0 (where its band starts), pitch (y units per lane), ax (its axis), tag ("A " / "B ",
  // "" alone)}]; two runs are a gap row apart, each band at least MIN_BLOCK_SHARE of the height.
  blocks() {
    const s = this.store;
    const b = this.servingB && this.servingB.order.length ? this.servingB : null;
    if (!b) return [{ sv: this.serving, row0: 0, pitch: 1, ax: s.axis, tag: "" }];
    const nA = Math.max(this.serving.order.length, 1);
    const nB = b.order.length;
    const grow = (n, other) => Math.max(1, (MIN_BLOCK_SHARE * (other + 1)) / (n * (1 - MIN_BLOCK_SHARE)));
    const pA = grow(nA, nB);
    const pB = grow(nB, nA);
    return [
      { sv: this.serving, row0: 0, pitch: pA, ax: s.axis, tag: "A " },
      { sv: b, row0: nA * pA + 1, pitch: pB, ax: s.axis.of(s.compareRun), tag: "B " },
    ];
  }

  rows() {
    const bl = this.blocks();
    const last = bl[bl.length - 1];
    return last.row0 + last.sv.order.length * last.pitch;
  }

  drawLinked(ctx, fl) {
    const bl = this.blocks().find((b) => (b.tag === "B " ? "compare" : "main") === this.linked.role) || null;
    const i = bl ? bl.sv.order.indexOf(this.linked.id) : -1;
    if (i < 0) return;
    const xa = fl.xaxis;
    const ya = fl.yaxis;
    const rowH = Math.abs(ya.l2p(1) - ya.l2p(0)) * bl.pitch;
    const y = ya._offset + ya.l2p(laneY(bl, i)) - Math.max(rowH, 4) / 2;
    ctx.save();
    ctx.strokeStyle = THEME.bright;
    ctx.lineWidth = 1.5;
    ctx.strokeRect(xa._offset + 1, y, xa._length - 2, Math.max(rowH, 4));
    ctx.restore();
  }

  // The pools of the run a block draws (tag "B ": the compare run's): poolsOf's {x, pdp, ddp}, x 0 unless it is
  // disaggregated.
  pools(tag) {
    const run = tag === "B " ? this.store.compareRun : this.store.main;
    return poolsOf(run && run.summary ? run.summary : tag === "B " ? null : (this.store.scenario || {}).deployment);
  }

  hover(r, sv = this.serving, tag = "") {
    const known = this.pools(tag);
    const pools = known.x || r.decodeInstance === undefined ? known : { ...known, x: r.instance + 1 };
    const ttft = r.firstToken !== null ? sv.modelMs(r.arrive, r.firstToken) : NaN;
    const gen = Math.max(0, r.tokens.length);
    const tpot = r.finished !== null ? r.tpotMs : gen > 1 ? ((sv.tokenUs(r.tokens[gen - 1]) - sv.toModelUs(r.arrive)) / 1e3 - ttft) / (gen - 1) : NaN;
    return (
      `<b>${tag ? `run ${tag}· ` : ""}request ${r.id}</b>${replicasOf((this.store.scenario || {}).deployment).replicas > 1 ? ` · <span style="color:${replicaColor(r.instance)}">replica ${r.instance}</span>` : ""}<br>input ${r.input_len} tokens · output ${r.output_len} tokens (${gen} generated)` +
      `<br>TTFT ${ms(ttft)} · TPOT ${ms(tpot)}${r.finished === null ? " so far" : ""}` +
      (pools.x ? `<br>${phasesLine(r, pools, sv.prefillEndUs(r))}` : "") +
      (r.preemptions ? `<br>preempted ${r.preemptions}×` : "") +
      (r.finished !== null ? `<br>end-to-end ${ms(r.e2elMs)}` : "") +
      "<br><i>whole model, simulated at full size</i>"
    );
  }

  // One set of traces per run (run B's metas start with "B "): a line per state, a tick per finished request.
  // No hover text: the page tooltip reads the lane under the pointer (hoverAt).
  traces() {
    const s = this.store;
    const rows = this.rows();
    const h = Math.max(this.el.clientHeight - 40, 60);
    const rowPx = h / Math.max(rows, 1);
    const [x0, x1] = s.axis.shown();
    const minW = ((x1 - x0) / Math.max(this.el.clientWidth - 70, 100)) * 1.5; // a bar is at least 1.5 px wide
    const out = [];
    for (const bl of this.blocks()) {
      const { sv, ax, tag } = bl;
      const width = Math.max(1, Math.min(14, rowPx * bl.pitch * 0.75)); // a bar fills 3/4 of its row
      const by = {};
      for (const st of Object.keys(LABEL)) by[st] = { x: [], y: [] };
      const done = { x: [], y: [] };
      const now = sv.whole ? ax.extent[1] : s.t; // the whole run: every lane to its end
      sv.order.forEach((id, i) => {
        const row = laneY(bl, i);
        const r = sv.requests.get(id);
        for (const seg of sv.lanes(r, now)) {
          const t = by[seg.state];
          if (!t) continue;
          const chunk = seg.state === "prefill" || seg.state === "recompute";
          const a = ax.toX(seg.t0);
          const b = ax.toX(seg.t1);
          const gap = chunk ? (b - a) * 0.12 : 0; // consecutive chunks stay apart
          t.x.push(a, Math.max(b - gap, a + minW), null);
          t.y.push(row, row, null);
        }
        if (r.finished !== null) {
          done.x.push(ax.toX(r.finished));
          done.y.push(row);
        }
      });
      const meta = tag === "B " ? "B " : "";
      for (const [state, t] of Object.entries(by)) {
        out.push({
          type: "scatter", mode: "lines", name: `${meta}${state}`, meta: `${meta}${state}`, x: t.x, y: t.y,
          line: { color: REQUEST_STATE[state], width }, hoverinfo: "skip", connectgaps: false,
        });
      }
      out.push({
        type: "scatter", mode: "markers", name: `${meta}finished`, meta: `${meta}finished`, x: done.x, y: done.y, hoverinfo: "skip",
        marker: { color: REQUEST_STATE.finished, symbol: "line-ns-open", size: Math.max(6, width + 2), line: { width: 2, color: REQUEST_STATE.finished } },
      });
    }
    return out;
  }

  // the track interface: render(store, axis) (main.js); a third argument forces a redraw
  render(_store = this.store, _axis = this.store.axis, force = false) {
    const stamp = this.store.stamp(["requests", "axis", "theme", ...(this.serving.whole ? [] : ["clock"])]);
    if (!this.store.redrawDue(this, stamp, force)) return false;
    const s = this.store;
    const sv = this.serving;
    const rows = Math.max(this.rows(), 1);
    const blocks = this.blocks();
    // two runs: each block's rows are labelled with its run, a line between them; ticks count requests in a block
    const tickvals = [];
    const ticktext = [];
    const dtick = rows > 40 ? Math.ceil(rows / 8) : rows > 10 ? 5 : 1;
    for (const bl of blocks) for (let i = 0; i < bl.sv.order.length; i += Math.max(1, Math.ceil(dtick / bl.pitch))) {
      const tag = bl.tag;
      tickvals.push(laneY(bl, i));
      ticktext.push(`${i ? "" : tag}${i}`);
    }
    const shapes = s.axis.breaks().shapes;
    const annotations = [];
    for (const { sv: v, row0, tag } of blocks) { // each replica's or pool pair's lanes marked (replicagroups.js, poolgroups.js)
      const pools = this.pools(tag);
      const run = tag === "B " ? s.compareRun : s.main;
      const bands = pools.x ? poolBands(v, row0, pools) : replicaBands(v, row0, (i) => engineLabel(run && run.summary, i));
      shapes.push(...bands.shapes);
      annotations.push(...bands.annotations);
    }
    if (blocks.length > 1) {
      const y = blocks[1].row0 - 1;
      shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: y, y1: y, line: { color: THEME.muted, width: 1, dash: "dot" } });
      for (const { row0, tag } of blocks) {
        const run = tag === "B " ? s.compareRun : s.main;
        annotations.push({ xref: "paper", x: 1, xanchor: "right", yref: "y", y: row0 - 0.5, yanchor: "top", showarrow: false,
          text: `${tag}${run ? run.label : ""}`, font: { size: 10, color: runColor(tag === "B " ? "compare" : "main") }, bgcolor: THEME.panel });
      }
    }
    const layout = plotLayout({
      uirevision: "requests",
      margin: { l: 56, r: 10, t: 8, b: 40 },
      xaxis: s.axis.xaxis(),
      yaxis: { range: [rows - 0.5, -0.5], title: { text: blocks.length > 1 ? "request (A above, B below)" : "request" }, gridcolor: "rgba(0,0,0,0)", zeroline: false, tickmode: "array", tickvals, ticktext },
      shapes,
      annotations,
      hovermode: "closest",
    });
    Plotly.react(this.el, this.traces(), layout, PLOT_CONFIG);
    bindZoom(this.el, s);
    const running = sv.order.filter((id) => ["prefill", "decode", "recompute"].includes(sv.requests.get(id).state)).length;
    const waiting = sv.order.filter((id) => ["waiting", "preempted"].includes(sv.requests.get(id).state)).length;
    const now = sv.whole ? "whole run" : `${running} running · ${waiting} waiting`;
    const b = blocks.length > 1 ? ` · B: ${this.servingB.order.length} requests, ${this.servingB.preemptions} preemptions` : "";
    this.info.textContent = `${sv.order.length} requests · ${now} · ${sv.finishedCount} finished · ${sv.preemptions} preemptions${b}`;
    return true;
  }
}

export function fillRequestLegend(el) {
  for (const [state, help] of Object.entries(LABEL)) {
    const span = document.createElement("span");
    span.className = "key";
    span.title = help;
    const sw = document.createElement("i");
    sw.style.background = REQUEST_STATE[state];
    span.append(sw, document.createTextNode(state));
    el.append(span);
  }
}
