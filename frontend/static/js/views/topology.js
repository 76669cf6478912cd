// The layer as a graph of its stages for the running phase (prefill or decode). Nodes are coloured by
// stage kind; the stage whose kernel is running lights up; edge width is the bytes moved along it.

import { stageColor } from "../colors.js";
import { bytes, us } from "../format.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 1000;
const H = 230;
const NODE_W = 124;
const NODE_H = 50;
const LINE_CHARS = 17;

function wrap(label) {
  // at most two lines at word boundaries; the full label is in the node's tooltip
  const words = label.split(" ");
  const lines = [""];
  for (const w of words) {
    const cur = lines[lines.length - 1];
    if (!cur || (cur + " " + w).length <= LINE_CHARS) lines[lines.length - 1] = cur ? `${cur} ${w}` : w;
    else lines.push(w);
  }
  const out = lines.slice(0, 2);
  if (lines.length > 2 || out[1]?.length > LINE_CHARS) out[1] = `${(out[1] || "").slice(0, LINE_CHARS - 1)}…`;
  return out.map((l) => (l.length > LINE_CHARS ? `${l.slice(0, LINE_CHARS - 1)}…` : l));
}

function el(tag, attrs, parent) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
  if (parent) parent.appendChild(n);
  return n;
}

export class TopologyView {
  constructor(svg, store, phaseLabel, tabs) {
    this.svg = svg;
    this.store = store;
    this.phaseLabel = phaseLabel;
    this.mode = "auto";
    this.shown = null;
    this.nodes = new Map();
    this.active = null;
    this.stats = new Map(); // stage -> last kernel
    new ResizeObserver(() => {
      const w = Math.round(this.svg.clientWidth);
      if (w && w !== this.builtWidth) {
        this.builtWidth = w;
        this.shown = null; // rebuild at the new width
      }
    }).observe(svg);
    tabs.forEach((b) =>
      b.addEventListener("click", () => {
        this.mode = b.dataset.phase;
        tabs.forEach((t) => t.classList.toggle("on", t === b));
        this.shown = null;
      }),
    );
  }

  // The drawing is in css pixels (the viewBox follows the element's width), so labels keep their size on a
  // phone: as many nodes per row as fit, in a snake (left to right, then right to left), rows 100 px apart.
  positions(nodes) {
    const w = Math.max(this.svg.clientWidth || W, 300);
    const fit = Math.max(2, Math.floor((w - 20) / (NODE_W + 14)));
    const rows = Math.ceil(nodes.length / fit);
    const perRow = Math.ceil(nodes.length / rows);
    const gap = (w - 20) / Math.max(perRow, 1);
    const top = 70; // room for skip edges arcing over the first row
    this.width = w;
    this.height = top + rows * 100;
    return nodes.map((n, i) => {
      const row = Math.floor(i / perRow);
      const col = row % 2 === 0 ? i % perRow : perRow - 1 - (i % perRow);
      return { x: 10 + gap * col + (gap - NODE_W) / 2, y: top + row * 100 };
    });
  }

  build(phase) {
    const topo = this.store.topology;
    this.svg.replaceChildren();
    this.nodes.clear();
    this.active = null;
    if (!topo) return;
    const g = topo[phase];
    const pos = new Map();
    this.positions(g.nodes).forEach((p, i) => pos.set(g.nodes[i].id, p));
    this.svg.setAttribute("viewBox", `0 0 ${this.width} ${this.height}`);
    this.svg.style.height = `${this.height}px`;
    const maxBytes = Math.max(1, ...g.edges.map((e) => e.bytes));
    const defs = el("defs", {}, this.svg);
    const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 8, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto" }, defs);
    el("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }, marker);
    const idx = new Map(g.nodes.map((n, i) => [n.id, i]));
    for (const e of g.edges) {
      const a = pos.get(e.source);
      const b = pos.get(e.target);
      if (!a || !b) continue;
      // edges leave and enter at node borders (never under a node) and end in an arrow: data flows source -> target
      const adjacent = Math.abs(idx.get(e.source) - idx.get(e.target)) === 1;
      let d;
      if (Math.abs(b.y - a.y) > 1) {
        const down = b.y > a.y;
        const x0 = a.x + NODE_W / 2;
        const x1 = b.x + NODE_W / 2;
        const y0 = down ? a.y + NODE_H : a.y;
        const y1 = down ? b.y - 2 : b.y + NODE_H + 2;
        d = `M ${x0} ${y0} C ${x0} ${(y0 + y1) / 2} ${x1} ${(y0 + y1) / 2} ${x1} ${y1}`;
      } else if (adjacent) {
        const right = b.x > a.x;
        const x0 = right ? a.x + NODE_W : a.x;
        const x1 = right ? b.x - 2 : b.x + NODE_W + 2;
        const y = a.y + NODE_H / 2;
        d = `M ${x0} ${y} L ${x1} ${y}`;
      } else {
        // a skip edge arcs over the row, from the top of one node to the top of the other
        const x0 = a.x + NODE_W / 2 + 10;
        const x1 = b.x + NODE_W / 2 - 10;
        const y = a.y;
        const lift = Math.min(70, 20 + Math.abs(x1 - x0) / 8);
        d = `M ${x0} ${y} C ${x0} ${y - lift} ${x1} ${y - lift} ${x1} ${y - 2}`;
      }
      const width = 1 + 7 * Math.sqrt(e.bytes / maxBytes);
      const path = el("path", { d, class: "edge", "stroke-width": width.toFixed(1), fill: "none", "marker-end": "url(#arrow)" }, this.svg);
      const t = el("title", {}, path);
      t.textContent = `${e.source} → ${e.target}: ${bytes(e.bytes)} per ${phase === "prefill" ? "chunk" : "step"} (width ∝ √bytes)`;
    }
    for (const n of g.nodes) {
      const p = pos.get(n.id);
      const grp = el("g", { class: "node", transform: `translate(${p.x},${p.y})`, "data-stage": n.id }, this.svg);
      el("rect", { width: NODE_W, height: NODE_H, rx: 6, class: "node-box", stroke: stageColor(n.kind), "stroke-width": 2 }, grp);
      el("rect", { width: 5, height: NODE_H, rx: 2, fill: stageColor(n.kind) }, grp);
      const lines = wrap(n.label);
      lines.forEach((line, i) => {
        const y = lines.length === 1 ? 21 : 15 + i * 13;
        const t = el("text", { x: NODE_W / 2 + 2, y, "text-anchor": "middle", class: "node-label" }, grp);
        t.textContent = line;
      });
      const sub = el("text", { x: NODE_W / 2 + 2, y: 42, "text-anchor": "middle", class: "node-sub" }, grp);
      sub.textContent = n.precision || n.kind;
      const title = el("title", {}, grp);
      this.nodes.set(n.id, { grp, title, info: n, sub });
      this.describe(n.id);
    }
  }

  describe(id) {
    const node = this.nodes.get(id);
    if (!node) return;
    const n = node.info;
    const last = this.stats.get(id);
    const k = last && this.store.kernelRecord(last); // the full record: a streamed kernel is slim
    node.title.textContent =
      `${n.label} (${n.kind}${n.bound ? `, ${n.bound}-bound` : ""})\n` +
      (n.kernels.length ? `kernels: ${n.kernels.join(", ")}\n` : "") +
      (n.precision ? `precision: ${n.precision}\n` : "") +
      (n.access ? `memory access: ${n.access}\n` : "") +
      (k ? `last launch: ${us(k.dur_us)}, ${bytes(k.bytes)} moved, ${k.bound}-bound` : "not launched yet");
  }

  render() {
    const s = this.store;
    const running = s.lastKernel ? s.lastKernel.phase : s.phase; // validate/idle phases keep the last graph
    const phase = this.mode === "auto" ? (running === "decode" ? "decode" : "prefill") : this.mode;
    const stamp = `${s.stamp(["kernels", "phase", "reset"])}`;
    const rs = `${s.ver.reset}:${s.ver.theme || 0}`;
    if (phase !== this.shown || rs !== this.resetSeen) {
      this.resetSeen = rs;
      this.shown = phase;
      this.phaseLabel.textContent = `${phase} · ${s.topology ? `${s.topology.model} / ${s.topology.runtime}` : ""}`;
      this.build(phase);
      this.drawn = "";
    }
    if (stamp === this.drawn) return false;
    this.drawn = stamp;
    for (const k of s.frameKernels) this.stats.set(k.stage, k);
    const k = s.lastKernel;
    const id = k && k.phase === phase ? k.stage : null;
    if (id !== this.active) {
      if (this.active && this.nodes.get(this.active)) this.nodes.get(this.active).grp.classList.remove("active");
      if (id && this.nodes.get(id)) this.nodes.get(id).grp.classList.add("active");
      this.active = id;
    }
    if (id && this.nodes.get(id)) {
      this.nodes.get(id).sub.textContent = us(k.dur_us);
      this.describe(id);
    }
    return true;
  }
}
