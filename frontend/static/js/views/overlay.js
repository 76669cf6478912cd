// A <canvas> laid over a Plotly plot for what moves with playback (the cursor step's lanes, the histograms'
// finished-by-the-cursor bars): drawn with the plot's own axis mapping (xaxis.l2p / yaxis.l2p), so the Plotly
// figure is drawn once and never restyled per cursor move (a Plotly.update or restyle of a subplot figure costs a
// full relayout: bench/README.md "Serving views"). Pointer events pass through to the plot (its hover stays).

export class PlotOverlay {
  constructor(plotEl) {
    this.plot = plotEl;
    this.canvas = document.createElement("canvas");
    this.canvas.className = "plot-overlay";
    this.ctx = this.canvas.getContext("2d");
    plotEl.parentElement.style.position = "relative";
    plotEl.after(this.canvas); // before the time cursor's line (appended later), so the line stays on top
    this.size = "";
  }

  // The plot's full layout once it is drawn and shown, else null.
  layout() {
    const fl = this.plot._fullLayout;
    return fl && fl._size && this.plot.isConnected && this.plot.offsetParent ? fl : null;
  }

  // A key of what the drawing depends on from the plot's side: its size, margins and axis ranges.
  geometry(axes) {
    const fl = this.layout();
    if (!fl) return "none";
    let k = `${this.plot.clientWidth}x${this.plot.clientHeight}:${this.plot.offsetLeft},${this.plot.offsetTop}`;
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
    const w = this.plot.clientWidth;
    const h = this.plot.clientHeight;
    const dpr = window.devicePixelRatio || 1;
    const size = `${w}x${h}@${dpr}:${this.plot.offsetLeft},${this.plot.offsetTop}`;
    if (size !== this.size) {
      this.size = size;
      c.width = Math.max(1, Math.round(w * dpr));
      c.height = Math.max(1, Math.round(h * dpr));
      c.style.width = `${w}px`;
      c.style.height = `${h}px`;
      c.style.transform = `translate(${this.plot.offsetLeft}px, ${this.plot.offsetTop}px)`;
    }
    c.style.display = "block";
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.ctx.clearRect(0, 0, w, h);
    return this.ctx;
  }

  // css px inside the plot of a data point on axis pair (xa, ya) of the full layout, e.g. ("xaxis2", "yaxis2")
  px(fl, xa, x) {
    const a = fl[xa];
    return a._offset + a.l2p(x);
  }
}
