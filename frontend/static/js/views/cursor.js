// A vertical "now" line over a Plotly time axis, the part of the run not played yet dimmed, drawn on a canvas over
// the plot (overlay.js), never a Plotly redraw. A canvas, not moved elements: moving a composited line or dimming
// box with a CSS transform every frame made Chromium re-layerize the whole page each frame (its cost grows with
// the timeline's thousands of SVG kernels: serving-kv-preemption played at 33 rAF/s; bench/README.md), while a
// canvas repaint is a repaint. Only the strip between the old and the new cursor is repainted.

import { THEME } from "../colors.js";
import { PlotOverlay } from "./overlay.js";

const DIM = 0.4; // opacity of the dimming over the part not played yet

export class TimeCursor {
  constructor(plotEl) {
    this.plot = plotEl;
    this.overlay = new PlotOverlay(plotEl, { top: true });
    this.overlay.canvas.classList.add("time-cursor");
    this.last = ""; // geometry drawn
    this.px = null; // css px of the line from the plot area's left (null: not drawn); read by tests
  }

  // t: simulated µs; axis: the store's TimeAxis (maps t to the plot's x).
  place(t, axis) {
    const fl = this.overlay.layout();
    if (!fl || !fl.xaxis || !fl.xaxis.range || !fl.yaxis) {
      this.hide();
      return;
    }
    const [x0, x1] = fl.xaxis.range;
    const x = axis ? axis.toX(t) : t;
    const len = fl.xaxis._length;
    const px = Math.min(Math.max((x - x0) / (x1 - x0), 0), 1) * len;
    const geom = `${this.overlay.geometry(["xaxis", "yaxis"])}:${THEME.panel}`; // the axes' offsets and lengths
    const state = { px, line: x >= x0 && x <= x1, dim: t > 0 };
    if (geom === this.last && this.shown && px === this.shown.px && state.line === this.shown.line && state.dim === this.shown.dim) return;
    // the plot area where Plotly put it: the axes' offsets, not layout.margin (a legend or title above the plot
    // pushes the area down by automargin, and the line would stand that much too high)
    const area = { l: fl.xaxis._offset, t: fl.yaxis._offset, w: len, h: fl.yaxis._length };
    let ctx;
    let from = 0;
    let to = len;
    if (geom !== this.last || !this.shown) {
      ctx = this.overlay.begin(); // full redraw: cleared
      if (!ctx) return;
      this.last = geom;
    } else {
      ctx = this.overlay.ctx;
      from = Math.max(0, Math.min(px, this.shown.px) - 3);
      to = Math.min(len, Math.max(px, this.shown.px) + 3);
      if (state.dim !== this.shown.dim) [from, to] = [0, len];
      ctx.clearRect(area.l + from, area.t, to - from, area.h);
    }
    this.draw(ctx, area, state, from, to);
    this.shown = state;
    this.px = state.line ? px : null;
  }

  // the dimming right of the line and the line itself, within [from, to] of the plot area (css px)
  draw(ctx, area, state, from, to) {
    ctx.save();
    ctx.beginPath();
    ctx.rect(area.l + from, area.t, to - from, area.h);
    ctx.clip();
    if (state.dim && state.px < to) {
      ctx.globalAlpha = DIM;
      ctx.fillStyle = THEME.panel;
      const a = Math.max(state.px, from);
      ctx.fillRect(area.l + a, area.t, to - a, area.h);
    }
    if (state.line) {
      ctx.globalAlpha = 0.85;
      ctx.fillStyle = THEME.bright;
      ctx.fillRect(area.l + state.px - 1, area.t, 2, area.h);
    }
    ctx.restore();
  }

  hide() {
    if (this.last === "hidden") return;
    this.last = "hidden";
    this.shown = null;
    this.px = null;
    this.overlay.canvas.style.display = "none";
  }
}

// The shared time axis, from a plot's side: a user's zoom, pan, double-click or Plotly reset goes back to the
// store (store.setRange / resetRange, in simulated µs through axis.fromX); every time view then redraws with
// the store's range. A plot never keeps a range of its own. Call once per plot, after its first draw.
export function bindZoom(el, store) {
  if (el.dataset.zoomBound) return;
  el.dataset.zoomBound = "1";
  el.on("plotly_relayout", (ev) => {
    const r = relayoutRange(ev);
    if (r === undefined) return;
    if (r === null) store.resetRange();
    else store.setRange([store.axis.fromX(r[0]), store.axis.fromX(r[1])]);
    el.dataset.axisDrawn = ""; // redraw even if the store's range did not change (Plotly moved it)
  });
  // Plotly's own double-click reset is off (PLOT_CONFIG: it would go back to 0-1 µs); it still reports one
  el.on("plotly_doubleclick", () => {
    store.resetRange();
    el.dataset.axisDrawn = "";
  });
}

// The x range a plotly_relayout event sets: [x0, x1], null for autorange/reset, undefined if x did not change.
// A drag-zoom reports "xaxis.range[0]"/"xaxis.range[1]"; a programmatic relayout may report "xaxis.range".
export function relayoutRange(ev) {
  if (ev["xaxis.autorange"] || ev.autosize) return ev["xaxis.autorange"] ? null : undefined;
  if (ev["xaxis.range[0]"] !== undefined) return [ev["xaxis.range[0]"], ev["xaxis.range[1]"]];
  if (Array.isArray(ev["xaxis.range"])) return [...ev["xaxis.range"]];
  return undefined;
}
