// A vertical "now" line over a Plotly time axis, moved with CSS every animation frame (no Plotly redraw).

export class TimeCursor {
  constructor(plotEl) {
    this.plot = plotEl;
    this.line = document.createElement("div");
    this.line.className = "now-line";
    plotEl.parentElement.style.position = "relative";
    plotEl.parentElement.appendChild(this.line);
  }

  place(t) {
    const fl = this.plot._fullLayout;
    if (!fl || !fl.xaxis || !fl.xaxis.range) {
      this.line.style.display = "none";
      return;
    }
    const [x0, x1] = fl.xaxis.range;
    if (t < x0 || t > x1) {
      this.line.style.display = "none";
      return;
    }
    const px = fl.margin.l + ((t - x0) / (x1 - x0)) * fl.xaxis._length;
    this.line.style.display = "block";
    this.line.style.left = `${this.plot.offsetLeft + px}px`;
    this.line.style.top = `${this.plot.offsetTop + fl.margin.t}px`;
    this.line.style.height = `${fl.yaxis._length}px`;
  }
}

// Linked time axes: a view's own zoom becomes view.range (kept through redraws) and goes to view.onRange;
// a range set from elsewhere is applied without echoing back. `view` has el, store, range, onRange.
export function listenRange(view) {
  if (view.rangeListening) return;
  view.rangeListening = true;
  view.el.on("plotly_relayout", (ev) => {
    const r = relayoutRange(ev);
    if (r === undefined || view.syncing) return;
    view.range = r;
    if (view.onRange) view.onRange(r);
  });
}

export function applyRange(view, range) {
  view.range = range;
  if (!view.el._fullLayout) return;
  view.syncing = true;
  Plotly.relayout(view.el, { "xaxis.range": range || [0, view.store.duration || 1] });
  view.syncing = false;
}

// The x range a plotly_relayout event sets: [x0, x1], null for autorange, undefined if x did not change.
// A drag-zoom reports "xaxis.range[0]"/"xaxis.range[1]"; a programmatic relayout may report "xaxis.range".
export function relayoutRange(ev) {
  if (ev["xaxis.autorange"]) return null;
  if (ev["xaxis.range[0]"] !== undefined) return [ev["xaxis.range[0]"], ev["xaxis.range[1]"]];
  if (Array.isArray(ev["xaxis.range"])) return [...ev["xaxis.range"]];
  return undefined;
}
