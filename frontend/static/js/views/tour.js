// The guided tour player: each step (from scenario.tour) pauses at a simulated time or at the first
// matching event, highlights panels, and explains. next/prev/skip.

import { esc, us } from "../format.js";

export class Tour {
  constructor(root, store, commands) {
    this.body = root.querySelector("#tour-body");
    this.pos = root.querySelector("#tour-pos");
    this.store = store;
    this.cmd = commands; // {play(), pause(), seek(t)}
    this.steps = [];
    this.index = -1;
    this.waiting = null; // the step we are playing towards
    root.querySelector("#tour-next").addEventListener("click", () => this.next());
    root.querySelector("#tour-prev").addEventListener("click", () => this.prev());
    root.querySelector("#tour-skip").addEventListener("click", () => this.skip());
    store.listeners.push((frame) => this.watch(frame));
  }

  load(scenario, results = []) {
    this.steps = (scenario && scenario.tour) || [];
    this.results = results; // the server's check of each step's claim against this run
    this.index = -1;
    this.waiting = null;
    this.highlight([]);
    if (!this.steps.length) {
      this.body.innerHTML = `<p class="empty">${esc(scenario ? scenario.description || "No tour for this scenario." : "")}</p>`;
      this.pos.textContent = "no tour";
    } else {
      this.body.innerHTML = `<p class="empty">${esc(scenario.description)}</p><p class="hint">This scenario has a ${this.steps.length}-step tour: press <b>next</b>.</p>`;
      this.pos.textContent = `${this.steps.length} steps`;
    }
  }

  show(i) {
    const st = this.steps[i];
    this.index = i;
    this.pos.textContent = `step ${i + 1} / ${this.steps.length}`;
    this.body.innerHTML = `<h3>${esc(st.title)}</h3><p>${esc(st.text)}</p>` + (st.at_us !== null && st.at_us !== undefined ? `<p class="hint">at ${us(st.at_us)}</p>` : "") + this.checkLine(this.results[i]);
    this.highlight(st.highlight || []);
  }

  checkLine(r) {
    if (!r || r.metric === null) return "";
    const verdict = r.passed ? '<span class="ok">✓ holds in this run</span>' : '<span class="bad">✗ does not hold in this run</span>';
    return `<p class="check" data-testid="tour-check" title="The step's claim, checked by the server against this run's summary">${verdict}: <code>${esc(r.metric)} ${esc(r.op)} ${esc(String(r.expected))}</code> (measured ${esc(String(r.actual))})</p>`;
  }

  highlight(ids) {
    document.querySelectorAll(".highlight").forEach((n) => n.classList.remove("highlight"));
    for (const id of ids) {
      const n = document.querySelector(`[data-panel="${CSS.escape(id)}"]`) || document.getElementById(id);
      if (n) n.classList.add("highlight");
    }
  }

  next() {
    const i = this.index + 1;
    if (i >= this.steps.length) return this.skip();
    const st = this.steps[i];
    if (st.at_us !== null && st.at_us !== undefined && st.at_us > this.store.t) {
      this.waiting = i;
      this.body.innerHTML = `<p class="hint">playing to ${us(st.at_us)}…</p>`;
      this.cmd.play();
    } else if (st.at_event && !this.seen(st.at_event)) {
      this.waiting = i;
      this.body.innerHTML = `<p class="hint">playing until ${esc(st.at_event)}…</p>`;
      this.cmd.play();
    } else {
      this.show(i);
    }
  }

  prev() {
    if (this.index <= 0) return;
    const st = this.steps[this.index - 1];
    if (st.at_us !== null && st.at_us !== undefined) this.cmd.seek(st.at_us);
    this.show(this.index - 1);
  }

  skip() {
    this.waiting = null;
    this.highlight([]);
    this.index = -1;
    this.body.innerHTML = '<p class="empty">Tour left; play freely.</p>';
  }

  matches(e, spec) {
    const [kind, name] = spec.split(":");
    if (e.kind !== kind) return false;
    // the same fields tour.py matches: a kernel/stage name, a phase, a fault, an owner, a reason, what a request did
    return !name || [e.name, e.stage, e.phase, e.fault, e.action, e.owner, e.reason, e.what].includes(name);
  }

  seen(spec) {
    return this.store.log.some((e) => this.matches(e, spec)) || this.store.kernels.some((e) => this.matches(e, spec));
  }

  watch(frame) {
    if (this.waiting === null) return;
    const st = this.steps[this.waiting];
    const hitTime = st.at_us !== null && st.at_us !== undefined && frame.t_us >= st.at_us;
    const hitEvent = st.at_event && frame.events.some((e) => this.matches(e, st.at_event));
    if (hitTime || hitEvent) {
      const i = this.waiting;
      this.waiting = null;
      this.cmd.pause();
      this.show(i);
    }
  }
}
