// A <canvas> laid over a Plotly plot for what moves with playback (the cursor step's lanes, the histograms'
// finished-by-the-cursor bars): drawn with the plot's own axis mapping (xaxis.l2p / yaxis.l2p), so the Plotly
// figure is drawn once and never restyled per cursor move (a Plotly.update or restyle of a subplot figure costs a
// full relayout: bench/README.md "Serving views"). Pointer events pass through to the plot (its hover stays).

export class PlotOverlay {
  // top: above every other overlay of the plot (the time cursor), else right above the plot
  constructor(plotEl, { top = false } = {}) {
    this.plot = plotEl;
    this.canvas = document.createElement("canvas");
    this.canvas.className = "plot-overlay";
    this.canvas.dataset.plot = plotEl.id; // a panel's picture (export.js) lays its plot's overlays over it
    this.ctx = this.canvas.getContext("2d");
    plotEl.parentElement.style.position = "relative";
    if (top) plotEl.parentElement.append(this.canvas);
    else plotEl.after(this.canvas);
    this.size = "";
    this.pos = null; // the plot's offset in its panel, read at most once a second (a read can force a layout)
    this.posAt = -Infinity;
    new ResizeObserver(() => (this.pos = null)).observe(plotEl.parentElement);
  }

  // The plot's full layout once it is drawn, else null. Reads no layout (Plotly's own figures only).
  layout() {
    const fl = this.plot._fullLayout;
    return fl && fl._size && fl.width && this.plot.isConnected ? fl : null;
  }

  // Where the plot sits in its panel (css px): cached, refreshed on a resize and at most once a second.
  offset() {
    const now = performance.now();
    if (!this.pos || now - this.posAt > 1000) {
      const p = { left: this.plot.offsetLeft, top: this.plot.offsetTop };
      if (!this.pos || p.left !== this.pos.left || p.top !== this.pos.top) this.pos = p;
      this.posAt = now;
    }
    return this.pos;
  }

  // A key of what the drawing depends on from the plot's side: its size, place, margins and axis ranges.
  geometry(axes) {
    const fl = this.layout();
    if (!fl) return "none";
    const o = this.offset();
    let k = `${fl.width}x${fl.height}:${o.left},${o.top}`;
    for (const a of axes) {
      const ax = fl[a];
      k += ax ? `:${ax.range}:${ax._length}:${ax._offset}` : ":-";
    }
    return k;
  }

  // Cleared canvas, sized and placed over the plot (css px, device-pixel backed); null while the plot is not drawn.
  begin() {
    const fl = this.layout();
    const c = this.canvas;
    if (!fl) {
      c.style.display = "none";
      return null;
    }
    const w = fl.width;
    const h = fl.height;
    const dpr = window.devicePixelRatio || 1;
    const o = this.offset();
    const size = `${w}x${h}@${dpr}:${o.left},${o.top}`;
    if (size !== this.size) {
      this.size = size;
      c.width = Math.max(1, Math.round(w * dpr));
      c.height = Math.max(1, Math.round(h * dpr));
      c.style.width = `${w}px`;
      c.style.height = `${h}px`;
      c.style.left = `${o.left}px`;
      c.style.top = `${o.top}px`;
    }
    if (c.style.display !== "block") c.style.display = "block";
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.ctx.clearRect(0, 0, w, h);
    return this.ctx;
  }
}
