// A vertical "now" line over a Plotly time axis, moved with CSS every animation frame (no Plotly redraw).

export class TimeCursor {
  constructor(plotEl) {
    this.plot = plotEl;
    this.line = document.createElement("div");
    this.line.className = "now-line";
    this.future = document.createElement("div"); // the part of the run not played yet, dimmed
    this.future.className = "future";
    plotEl.parentElement.style.position = "relative";
    plotEl.parentElement.append(this.future, this.line);
  }

  // t: simulated µs; axis: the store's TimeAxis (maps t to the plot's x). The line and the dimmed "not played
  // yet" overlay are their own compositor layers moved by transforms, so the plot under them is never repainted.
  place(t, axis) {
    const fl = this.plot._fullLayout;
    if (!fl || !fl.xaxis || !fl.xaxis.range || !fl.yaxis || !this.plot.isConnected) {
      this.hide();
      return;
    }
    const [x0, x1] = fl.xaxis.range;
    const x = axis ? axis.toX(t) : t;
    const len = fl.xaxis._length;
    const frac = Math.min(Math.max((x - x0) / (x1 - x0), 0), 1);
    const key = `${t > 0}:${(frac * len).toFixed(1)}:${len}:${fl.yaxis._length}:${fl.margin.l}:${fl.margin.t}`;
    if (key === this.last) return; // nothing moved: no style writes
    this.last = key;
    const left = this.plot.offsetLeft + fl.margin.l;
    const top = this.plot.offsetTop + fl.margin.t;
    const h = fl.yaxis._length;
    const px = frac * len;
    const ls = this.line.style;
    ls.display = x < x0 || x > x1 ? "none" : "block";
    ls.height = `${h}px`;
    ls.transform = `translate(${left + px - 1}px, ${top}px)`;
    const fs = this.future.style;
    fs.display = len - px > 1 && t > 0 ? "block" : "none"; // at 0 the whole run reads undimmed
    fs.width = `${len}px`;
    fs.height = `${h}px`;
    fs.transform = `translate(${left + px}px, ${top}px) scaleX(${(len - px) / len})`;
  }

  hide() {
    if (this.last === "hidden") return;
    this.last = "hidden";
    this.line.style.display = "none";
    this.future.style.display = "none";
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
