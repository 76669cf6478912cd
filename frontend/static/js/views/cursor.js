// A vertical "now" line over a Plotly time axis, moved with CSS every animation frame (no Plotly redraw).

export class TimeCursor {
  constructor(plotEl) {
    this.plot = plotEl;
    this.line = document.createElement("div");
    this.line.className = "now-line";
    plotEl.parentElement.style.position = "relative";
    plotEl.parentElement.appendChild(this.line);
  }

  // t: simulated µs; axis: the store's TimeAxis (maps t to the plot's x)
  place(t, axis) {
    const fl = this.plot._fullLayout;
    if (!fl || !fl.xaxis || !fl.xaxis.range) {
      this.line.style.display = "none";
      return;
    }
    const [x0, x1] = fl.xaxis.range;
    const x = axis ? axis.toX(t) : t;
    if (x < x0 || x > x1) {
      this.line.style.display = "none";
      return;
    }
    const px = fl.margin.l + ((x - x0) / (x1 - x0)) * fl.xaxis._length;
    this.line.style.display = "block";
    this.line.style.left = `${this.plot.offsetLeft + px}px`;
    this.line.style.top = `${this.plot.offsetTop + fl.margin.t}px`;
    this.line.style.height = `${fl.yaxis._length}px`;
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
  el.on("plotly_doubleclick", () => {
    store.resetRange();
    el.dataset.axisDrawn = "";
    return false;
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
