// A <canvas> laid over a Plotly plot for what moves with playback (the cursor step's lanes, the histograms'
// finished-by-the-cursor bars, the time cursor): drawn with the plot's own axis mapping (xaxis.l2p / yaxis.l2p), so
// the Plotly figure is drawn once and never restyled per cursor move (a Plotly.update or restyle of a subplot figure
// costs a full relayout: bench/README.md "Serving views"). Pointer events pass through to the plot (its hover stays).
//
// The canvas lives inside the figure's own container (Plotly's .svg-container, position: relative), so it moves and
// resizes with the figure whatever moves it (a header that wraps, a panel that grows): no offsets to keep up to date.
// It sits above the traces and below Plotly's top layer (annotations), so a label stays readable over the bars drawn
// here; `top` puts it above that layer too (the time cursor). Hover labels and the mode bar stay above both.

export class PlotOverlay {
  constructor(plotEl, { top = false } = {}) {
    this.plot = plotEl;
    this.top = top;
    this.canvas = document.createElement("canvas");
    this.canvas.className = "plot-overlay";
    this.canvas.dataset.plot = plotEl.id; // a panel's picture (export.js) lays its plot's overlays over it
    this.ctx = this.canvas.getContext("2d");
    this.size = "";
  }

  // The plot's full layout once it is drawn, else null. Reads no layout (Plotly's own figures only).
  layout() {
    const fl = this.plot._fullLayout;
    return fl && fl._size && fl.width && this.plot.isConnected ? fl : null;
  }

  // Into the figure's container, above its traces (below or, for `top`, above its top layer). A new figure (a
  // Plotly.newPlot, a purge) builds a new container: the canvas follows it on its next draw. True when in place.
  mount() {
    const box = this.plot.querySelector(".svg-container");
    const papers = box ? box.querySelectorAll(":scope > svg.main-svg") : [];
    if (papers.length < 2) return false;
    const layer = papers[1]; // Plotly's top layer (annotations); then the mode bar and the hover layer follow it
    const next = this.top ? layer.nextElementSibling : layer;
    const c = this.canvas;
    if (c.parentElement !== box || (this.top ? c.previousElementSibling !== layer : c.nextElementSibling !== layer)) box.insertBefore(c, next);
    return true;
  }

  // A key of what the drawing depends on from the plot's side: its size, margins and axis ranges.
  geometry(axes) {
    const fl = this.layout();
    if (!fl) return "none";
    let k = `${fl.width}x${fl.height}:${this.canvas.isConnected ? 1 : 0}`;
    for (const a of axes) {
      const ax = fl[a];
      k += ax ? `:${ax.range}:${ax._length}:${ax._offset}` : ":-";
    }
    return k;
  }

  // Cleared canvas, sized over the figure (css px, device-pixel backed); null while the plot is not drawn.
  begin() {
    const fl = this.layout();
    const c = this.canvas;
    if (!fl || !this.mount()) {
      c.style.display = "none";
      return null;
    }
    const w = fl.width;
    const h = fl.height;
    const dpr = window.devicePixelRatio || 1;
    const size = `${w}x${h}@${dpr}`;
    if (size !== this.size) {
      this.size = size;
      c.width = Math.max(1, Math.round(w * dpr));
      c.height = Math.max(1, Math.round(h * dpr));
      c.style.width = `${w}px`;
      c.style.height = `${h}px`;
    }
    if (c.style.display !== "block") c.style.display = "block";
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.ctx.clearRect(0, 0, w, h);
    return this.ctx;
  }
}
