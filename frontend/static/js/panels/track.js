// The base of every time track: a Plotly figure on the shared time axis (store.axis) that redraws only when the
// axis, the theme or the counters it names moved (store.stamp), with the broken axis's marks, the shared x axis,
// and zoom bound back to the store. A track says what it draws (figure); this says when and how.
//
//   class MyTrack extends TimeTrack {
//     constructor(el, store) { super(el, store, { id: "my-track", title: "my track", keys: ["requests"] }); }
//     figure(ax, breaks) { return { traces: [...], layout: { yaxis: {...}, shapes: breaks.shapes } }; }
//   }

import { plotLayout, timeConfig } from "../colors.js";
import { bindZoom } from "../views/cursor.js";

export class TimeTrack {
  // keys: store counters besides "axis" and "theme" a redraw follows (store.stamp)
  constructor(el, store, { id, title, keys = [] }) {
    this.el = el;
    this.store = store;
    this.id = id;
    this.title = title;
    this.keys = keys;
    this.drawn = "";
  }

  // {traces, layout (over plotLayout with the shared x axis), config (default: the time plots' own)}, or null to
  // draw nothing this time (no data for it in this run). `breaks`: the broken axis's shapes and labels, copies.
  figure(_ax, _breaks) {
    return null;
  }

  // the track interface (store.js): render(store, axis) -> true when it drew; force redraws regardless
  render(_store = this.store, _axis = this.store.axis, force = false) {
    const s = this.store;
    if (!s.redrawDue(this, s.stamp(["axis", "theme", ...this.keys]), force)) return false;
    const ax = s.axis;
    const br = ax.breaks(this.el.clientWidth);
    const fig = this.figure(ax, { shapes: [...br.shapes], annotations: [...br.annotations] });
    if (!fig) return true;
    Plotly.react(this.el, fig.traces, plotLayout({ xaxis: ax.xaxis(), ...fig.layout }), fig.config || timeConfig(() => s.resetRange()));
    bindZoom(this.el, s);
    return true;
  }
}
