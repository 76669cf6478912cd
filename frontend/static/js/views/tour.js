// The guided tour player. Each step (scenario.tour) lands on the simulated time the server computed for it
// (loaded.tour_results[i].t_us: at_us, or the time of the event its at_event / at_nth / at_max picks; the
// server's tour validator keeps every step's moment after the previous one's and its panels ones this run
// shows). next and prev seek straight to the step's moment, zoom the shared time axis to the step's window
// (tour_results[i].zoom: [x0, x1] µs through store.setRange; none: the whole run), and highlight the step's
// panels, scrolling the first into view. A step's check (against the whole run's summary) is shown once its
// moment is reached.

import { esc, figure, us } from "../format.js";

export class Tour {
  constructor(root, store, commands) {
    this.body = root.querySelector("#tour-body");
    this.pos = root.querySelector("#tour-pos");
    this.nextBtn = root.querySelector("#tour-next");
    this.store = store;
    this.cmd = commands; // {play(), pause(), seek(t)}
    this.steps = [];
    this.results = [];
    this.index = -1;
    this.nextBtn.addEventListener("click", () => this.next());
    root.querySelector("#tour-prev").addEventListener("click", () => this.prev());
    root.querySelector("#tour-skip").addEventListener("click", () => this.skip());
    store.listeners.push(() => this.watch());
  }

  // results: each step's check (loaded.tour_results); null while the server computes them (setResults follows)
  load(scenario, results = []) {
    this.steps = (scenario && scenario.tour) || [];
    this.results = results || [];
    this.pending = results === null;
    this.index = -1;
    this.highlight([]);
    document.body.classList.remove("touring");
    if (!this.steps.length) {
      this.body.innerHTML = `<p>${esc(scenario ? scenario.description || "No tour for this scenario." : "")}</p><p class="hint">No tour for this preset: press play.</p>`;
      this.pos.textContent = "no tour";
    } else {
      this.body.innerHTML = `<p>${esc(scenario.description)}</p><p class="hint">A ${this.steps.length}-step tour walks through this story: press <b>next</b>.</p>`;
      this.pos.textContent = `${this.steps.length} steps`;
      if (this.pending) this.body.insertAdjacentHTML("beforeend", '<p class="hint" data-testid="tour-computing">Checking each step against this run: computing…</p>');
    }
    this.nextBtn.textContent = "start tour ▶";
  }

  // The steps' checks once the server has them (the `details` message): a step opened before them is landed on
  // again, at its moment and zoom (both come with its check) and with its check line.
  setResults(results) {
    this.results = results || [];
    this.pending = false;
    const note = this.body.querySelector("[data-testid=tour-computing]");
    if (note) note.remove();
    if (this.index >= 0 && this.index < this.steps.length) this.land(this.index);
  }

  // the moment of step i: the server's pause time, else the previous step's moment, else 0
  stepTime(i) {
    for (let j = i; j >= 0; j--) {
      const r = this.results[j];
      if (r && r.t_us !== null && r.t_us !== undefined) return Math.min(Number(r.t_us), this.store.duration);
    }
    return 0;
  }

  show(i) {
    const st = this.steps[i];
    this.index = i;
    document.body.classList.add("touring");
    this.pos.textContent = `step ${i + 1} / ${this.steps.length} · at ${us(this.store.axis.clockUs(this.stepTime(i)))}`;
    const reached = this.store.t >= this.stepTime(i) - 1e-6;
    const r = this.results[i];
    const problem = r && r.error ? `<p class="check bad" data-testid="tour-problem">${esc(r.error)}</p>` : "";
    this.body.innerHTML = `<h3>${esc(st.title)}</h3><p>${esc(st.text)}</p>` + this.checkLine(r, reached) + problem;
    this.nextBtn.textContent = i + 1 >= this.steps.length ? "finish" : "next ▶";
    this.highlight(st.highlight || []);
  }

  checkLine(r, reached) {
    if (this.pending) return '<p class="check pending" data-testid="tour-computing">checking this step against the run: computing…</p>';
    if (!r || r.metric === null || r.metric === undefined) return "";
    if (!reached) return '<p class="check pending" data-testid="tour-check-pending">check shown when this step\'s moment is reached</p>';
    const verdict = r.passed ? '<span class="ok">✓ holds in this run</span>' : '<span class="bad">✗ does not hold in this run</span>';
    return `<p class="check" data-testid="tour-check" title="The step's claim, checked by the server against the whole run's summary">${verdict}: <code>${esc(r.metric)} ${esc(r.op)} ${esc(String(r.expected))}</code> (whole run: ${esc(figure(r.actual))})</p>`;
  }

  highlight(ids) {
    document.querySelectorAll(".highlight").forEach((n) => n.classList.remove("highlight"));
    let first = null;
    for (const id of ids) {
      const n = document.querySelector(`[data-panel="${CSS.escape(id)}"]`) || document.getElementById(id);
      if (n && !n.classList.contains("collapsed")) {
        n.classList.add("highlight");
        first = first || n;
      }
    }
    if (first) first.scrollIntoView({ block: "nearest", inline: "nearest", behavior: "smooth" });
  }

  next() {
    const i = this.index + 1;
    if (i >= this.steps.length) return this.finish();
    this.land(i);
  }

  prev() {
    if (this.index <= 0) return;
    this.land(this.index - 1);
  }

  // go to step i: pause, seek to its moment, zoom the axis to its window (or the whole run)
  land(i) {
    const t = this.stepTime(i);
    this.cmd.pause();
    const r = this.results[i];
    const zoom = r && Array.isArray(r.zoom) && r.zoom.length === 2 ? r.zoom.map(Number) : null;
    this.store.setRange(zoom);
    if (Math.abs(t - this.store.t) > 1e-6) this.cmd.seek(t);
    this.arrive(i, t);
  }

  // show step i once the store has caught up with its moment t (a seek is answered by a reset frame)
  arrive(i, t) {
    this.pendingShow = { i, t };
    this.show(i);
    if (this.store.t >= t - 1e-6) this.pendingShow = null;
  }

  finish() {
    this.store.setRange(null);
    this.highlight([]);
    this.index = -1;
    document.body.classList.remove("touring");
    this.pos.textContent = `${this.steps.length} steps`;
    this.body.innerHTML = '<p>Tour finished. Press <b>start tour</b> to walk through it again, or play freely (play at the end restarts the run).</p>';
    this.nextBtn.textContent = "start tour ▶";
  }

  skip() {
    this.pendingShow = null;
    this.highlight([]);
    this.index = -1;
    document.body.classList.remove("touring");
    this.body.innerHTML = "<p>Tour left; play freely. <b>start tour</b> begins it again.</p>";
    this.nextBtn.textContent = "start tour ▶";
  }

  watch() {
    const t = this.store.t;
    if (this.pendingShow && t >= this.pendingShow.t - 1e-6 && Math.abs(t - this.pendingShow.t) < 1e-3 * Math.max(1, this.pendingShow.t)) {
      const { i } = this.pendingShow;
      this.pendingShow = null;
      this.show(i); // now the check may show: the moment is reached
    }
  }
}
