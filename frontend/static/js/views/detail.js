// The pinned detail of one kernel launch (click a bar on the timeline): shapes, FLOPs, bytes, arithmetic
// intensity, bound, utilisation, its chunk or decode step, with "go to step N" / "go to chunk N" (seek there
// and zoom the shared axis to it). It stays until closed or another launch is clicked.

import { isOneOff } from "../axis.js";
import { bytes, esc, flops, pct, us } from "../format.js";

export class DetailPane {
  constructor(el, store, seek) {
    this.el = el;
    this.store = store;
    this.seek = seek;
    this.pinned = null;
    el.addEventListener("click", (ev) => this.click(ev));
  }

  clear() {
    this.pinned = null;
    this.el.classList.add("hidden");
    this.el.innerHTML = "";
  }

  pin(run, k) {
    if (!k) return;
    this.pinned = { run, k };
    const s = this.store;
    const L = s.layers;
    const once = isOneOff(k);
    const where = k.chunk !== null && k.chunk !== undefined ? ["chunk", k.chunk] : k.step !== null && k.step !== undefined ? ["step", k.step] : null;
    const ai = k.bytes > 0 ? k.flops / k.bytes : null;
    const rows = [
      ["run", `${run.role === "compare" ? "B" : "A"}: ${run.label}`],
      ["stage", `${k.stage} (${k.stage_kind}), ${k.phase}${where ? `, ${where[0]} ${where[1]}` : ""}`],
      ["stream", k.stream],
      ["start", us(k.start_us)],
      ["duration", once ? `${us(k.dur_us)} (one-off, whole model)` : `${us(k.dur_us)} one layer · ${us(k.dur_us * L)} for ${L} layers`],
      ["shapes", k.shapes || "—"],
      ["FLOPs", flops(k.flops)],
      ["bytes moved", bytes(k.bytes)],
      ["intensity", ai === null ? "—" : `${ai.toFixed(1)} FLOP/byte`],
      ["bound", `${k.bound}-bound`],
      ["HBM util · L2 hit", `${pct(k.hbm_util)} · ${pct(k.l2_hit)}`],
      ["priced from", k.source === "measured" ? `measured table: ${k.table}` : "analytic model (roofline; no measured table covers this shape)"],
    ];
    const go = where ? `<button data-go="${where[0]}" data-n="${where[1]}" data-testid="detail-goto">go to ${where[0]} ${where[1]}</button>` : "";
    this.el.innerHTML =
      `<div class="name"><span>${esc(k.name)}</span>${go}<button data-go="zoom" title="Zoom every time plot to this launch">zoom to launch</button>` +
      '<button class="close ghost" data-go="close" aria-label="close the detail pane">close ✕</button></div>' +
      rows.map(([a, b]) => `<div><span class="k">${esc(a)}:</span> ${esc(String(b))}</div>`).join("");
    this.el.classList.remove("hidden");
  }

  // the span of decode step n or prefill chunk n in a run: [t0, t1] simulated µs
  span(run, what, n) {
    const ks = run.kernel.filter((k) => (what === "step" ? k.step === n && k.phase === "decode" : k.chunk === n && k.phase === "prefill"));
    if (!ks.length) return null;
    return [Math.min(...ks.map((k) => k.start_us)), Math.max(...ks.map((k) => k.start_us + k.dur_us))];
  }

  goTo(run, what, n) {
    const sp = this.span(run, what, n);
    if (!sp) return false;
    const pad = (sp[1] - sp[0]) * 0.6 + 1;
    this.store.setRange([sp[0] - pad, sp[1] + pad]);
    if (run.role === "main") this.seek(sp[0]);
    return true;
  }

  click(ev) {
    const b = ev.target.closest("button[data-go]");
    if (!b || !this.pinned) return;
    const { run, k } = this.pinned;
    if (b.dataset.go === "close") this.clear();
    else if (b.dataset.go === "zoom") {
      const pad = k.dur_us * 4 + 1;
      this.store.setRange([k.start_us - pad, k.start_us + k.dur_us + pad]);
    } else this.goTo(run, b.dataset.go, Number(b.dataset.n));
  }
}
