// The kernel timeline's first screen, drawn on a canvas before Plotly has run: the same lanes (TimelineView.lanes),
// one bar per launch in its stage kind's colour, one pixel column per lane at most, the shared axis's ticks and
// title. Plotly's 1.5 MB script takes 0.3-0.9 s to evaluate and the timeline's first Plotly.react 0.2-1.2 s more;
// the page loads Plotly once this is on screen and the interactive figure replaces it (main.js; bench/README.md,
// "First screen, fourth round"). Nothing here is interactive: no hover, no zoom.

import { THEME, runColor, stageColor, themeName } from "../colors.js";
import { streamKey } from "./timeline.js";

// the interactive figure's margins (timeline.js's layout), so the figure replacing the sketch does not jump
const MARGIN = { l: 100, r: 12, t: 22, b: 40 };

// k -> streamKey(run, k), built once per engine and stream: a multi-engine run's key is a string built per launch
// (two-nodes-wide-ep: 92k launches)
function laneKeys(run) {
  const byEngine = new Map();
  return (k) => {
    const i = k.instance || 0;
    let streams = byEngine.get(i);
    if (!streams) byEngine.set(i, (streams = new Map()));
    let key = streams.get(k.stream);
    if (key === undefined) streams.set(k.stream, (key = streamKey(run, k)));
    return key;
  };
}

export class TimelineSketch {
  constructor(plotEl) {
    this.el = plotEl;
    this.canvas = null;
    this.drawnFor = null; // the run drawn
    this.bars = 0; // bars drawn; with any, el.dataset.sketch names the preset (tests, bench_first_screen.py)
    this.labels = [];
  }

  // Draw `timeline`'s lanes of the store's runs, those of preset `name`; true when drawn.
  draw(timeline, name) {
    const s = timeline.store;
    const w = this.el.clientWidth;
    const h = this.el.clientHeight;
    if (!s.main || !w || !h) return false;
    const c = this.canvas || (this.canvas = document.createElement("canvas"));
    c.className = "timeline-sketch";
    c.setAttribute("aria-hidden", "true");
    const dpr = window.devicePixelRatio || 1;
    [c.width, c.height] = [Math.round(w * dpr), Math.round(h * dpr)];
    Object.assign(c.style, { position: "absolute", left: "0", top: "0", width: `${w}px`, height: `${h}px` });
    if (getComputedStyle(this.el).position === "static") this.el.style.position = "relative";
    if (c.parentElement !== this.el) this.el.append(c);
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const lanes = timeline.lanes();
    const area = { l: MARGIN.l, t: MARGIN.t, w: Math.max(1, w - MARGIN.l - MARGIN.r), h: Math.max(1, h - MARGIN.t - MARGIN.b) };
    ctx.fillStyle = THEME.paper;
    ctx.fillRect(0, 0, w, h);
    ctx.fillStyle = THEME.plot;
    ctx.fillRect(area.l, area.t, area.w, area.h);
    const row = area.h / Math.max(1, lanes.length);
    const bar = Math.min(lanes.length > 4 ? 12 : 18, row * 0.8);
    const [x0, x1] = s.axis.shown();
    const perPx = area.w / (x1 - x0 || 1);
    const X = (x) => area.l + (x - x0) * perPx;
    this.bars = 0;
    const rects = new Map(); // colour -> [x, y, w, ...]: one fillStyle per colour, not per bar
    const fill = (seg) => {
      const colour = stageColor(seg.kind);
      let r = rects.get(colour);
      if (!r) rects.set(colour, (r = []));
      r.push(seg.a, seg.y - bar / 2, Math.max(seg.b - seg.a, 1.5)); // at least 1.5 px, as the figure draws
      this.bars += 1;
    };
    const laneY = new Map();
    lanes.forEach((l, i) => laneY.set(l.run, (laneY.get(l.run) || new Map()).set(l.stream, area.t + (i + 0.5) * row)));
    for (const run of s.runs) {
      const rx = s.axis.of(run);
      const ys = laneY.get(run) || new Map();
      // per lane, the bar being built: launches starting in one pixel share it (the longest one's colour), as the
      // figure draws them
      const open = new Map();
      const laneOf = laneKeys(run);
      for (const k of run.kernel) {
        const a = X(rx.toX(k.start_us));
        if (a > area.l + area.w) continue;
        const key = laneOf(k);
        const y = ys.get(key);
        if (y === undefined) continue; // an engine the timeline folds away: no lane of its own
        const px = Math.floor(a);
        const cur = open.get(key);
        if (cur && cur.px === px) {
          if (k.dur_us > cur.dur) [cur.kind, cur.dur, cur.end] = [k.stage_kind, k.dur_us, k.start_us + k.dur_us];
          else if (k.start_us + k.dur_us > cur.end) cur.end = k.start_us + k.dur_us;
          continue;
        }
        if (cur) {
          cur.b = X(rx.toX(cur.end));
          if (cur.b >= area.l) fill(cur);
        }
        open.set(key, { px, a, y, kind: k.stage_kind, dur: k.dur_us, end: k.start_us + k.dur_us });
      }
      for (const seg of open.values()) {
        seg.b = X(rx.toX(seg.end));
        if (seg.b >= area.l) fill(seg);
      }
    }
    for (const [colour, r] of rects) {
      ctx.fillStyle = colour;
      for (let i = 0; i < r.length; i += 3) ctx.fillRect(r[i], r[i + 1], r[i + 2], bar);
    }
    const font = `${themeName === "light" ? 13 : 11}px ui-monospace, Menlo, Consolas, monospace`;
    ctx.font = font;
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    this.labels = []; // the lane names drawn, top to bottom (tests)
    for (const l of lanes) {
      ctx.fillStyle = s.runs.length > 1 ? runColor(l.run.role) : THEME.text;
      ctx.fillText(l.name, area.l - 6, laneY.get(l.run).get(l.stream), area.l - 10);
      this.labels.push(l.name);
    }
    ctx.fillStyle = THEME.text;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    const { tickvals, ticktext } = s.axis.ticks();
    tickvals.forEach((v, i) => {
      if (v >= x0 && v <= x1) ctx.fillText(String(ticktext[i]).replace(/<[^>]*>/g, ""), X(v), area.t + area.h + 4);
    });
    ctx.fillText(s.axis.title().replace(/<[^>]*>/g, ""), area.l + area.w / 2, area.t + area.h + 22);
    this.drawnFor = s.main;
    if (this.bars) this.el.dataset.sketch = name;
    return true;
  }

  // The interactive figure is drawn: the sketch goes.
  remove() {
    if (this.canvas) this.canvas.remove();
    this.canvas = null;
    delete this.el.dataset.sketch;
  }
}
