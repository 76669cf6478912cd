// Transport (play/pause/step/speed/scrubber), the scenario picker, the settings form, keyboard
// shortcuts, and the URL that holds the current settings so a view can be shared and reloaded.

import { us } from "./format.js";

const FORM_FIELDS = ["prompt_len", "chunk_size", "decode_steps", "gpu", "model", "runtime", "allocator", "decode_page_hint", "free_hbm_gib",
  "workload.num_requests", "workload.max_concurrency", "scheduler.max_num_batched_tokens", "scheduler.prefix_caching"];
const NUMERIC = new Set(["prompt_len", "chunk_size", "decode_steps", "free_hbm_gib",
  "workload.num_requests", "workload.max_concurrency", "scheduler.max_num_batched_tokens"]);
const BOOLEAN = new Set(["decode_page_hint", "scheduler.prefix_caching"]);
// A dotted field (workload.num_requests) is one field of a nested model; the server takes it as is.
const valueAt = (spec, field) => field.split(".").reduce((o, k) => (o == null ? undefined : o[k]), spec);
const DOTTED = /^(deployment|workload|scheduler)(\.[a-z_]+)+$/; // nested overrides kept in the URL too (deployment.disaggregation.decode.dp)
export const MOMENT_KEYS = ["t", "x0", "x1", "step", "kernel"]; // a link's moment (main.js readMoment)
// One representative fault per kind (the form offers the kind; these say where and how hard).
const FAULT_DEFAULTS = {
  stale_chunk_metadata: { kind: "stale_chunk_metadata", at_step: 2, count: 4 },
  chunk_scheduler_disabled: { kind: "chunk_scheduler_disabled", at_chunk: 1 },
  ecc_bitflips: { kind: "ecc_bitflips", at_step: 2, rate: 0.001, count: 64 },
  memory_contention: { kind: "memory_contention", at_step: 2, rate: 0.3, count: 10 },
};

const $ = (id) => document.getElementById(id);

export class Controls {
  constructor(conn, store) {
    this.conn = conn;
    this.store = store;
    this.playing = false;
    this.scrubbing = false;
    this.preset = null; // the preset's own spec, to know which settings the user changed
    this.select = $("scenario-select");
    this.form = $("settings");
    this.scrubber = $("scrubber");
    this.speed = $("speed");
    this.clock = $("clock");
    this.wire();
  }

  wire() {
    $("play").addEventListener("click", () => this.play());
    $("pause").addEventListener("click", () => this.pause());
    $("step").addEventListener("click", () => this.step());
    this.speed.addEventListener("change", () => this.conn.send({ type: "speed", speed: Number(this.speed.value) }));
    this.select.addEventListener("change", () => this.choose(this.select.value, {}));
    this.scrubber.addEventListener("pointerdown", () => (this.scrubbing = true));
    this.scrubber.addEventListener("input", () => (this.clock.textContent = this.clockText(Number(this.scrubber.value))));
    this.scrubber.addEventListener("change", () => {
      this.scrubbing = false;
      this.seek(Number(this.scrubber.value));
    });
    $("settings-toggle").addEventListener("click", () => this.form.classList.toggle("hidden"));
    $("settings-reset").addEventListener("click", () => this.choose(this.select.value, {}));
    this.form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.apply();
    });
    document.addEventListener("keydown", (ev) => this.key(ev));
    $("replay-file").addEventListener("change", (ev) => this.replay(ev.target));
    for (const what of ["trace", "report", "events"]) {
      $(`${what}-link`).addEventListener("click", (ev) => {
        ev.preventDefault();
        this.download(what);
      });
    }
  }

  // Every load goes through here: the one the server answers with `loaded` is the run on screen (exports use it).
  load(msg) {
    this.pendingLoad = msg;
    if (!this.fromPreload(msg)) this.conn.send(msg);
  }

  // The page's first run, when index.html preloads it (a preset as shipped: <link rel=preload data-loaded>): its
  // `loaded` message comes over HTTP, fetched beside the scripts, and the websocket's `load` asks for its playback
  // alone (`loaded: false`). Anything amiss and the websocket is asked as usual. True when it took the load.
  fromPreload(msg) {
    const link = document.querySelector("link[rel=preload][data-loaded]");
    if (!link || this.preloadUsed || msg.scenario !== link.dataset.loaded || Object.keys(msg.set || {}).length) return false;
    this.preloadUsed = true;
    fetch(link.href, { credentials: "same-origin" })
      .then((r) => (r.ok ? r.text() : Promise.reject(new Error(`HTTP ${r.status}`))))
      .then((text) => {
        if (this.pendingLoad !== msg) return; // another run was asked for meanwhile
        const loaded = JSON.parse(text);
        this.conn.send({ ...msg, loaded: false });
        this.conn.lastLoad = msg; // a reconnect asks for the whole answer again
        this.onPreloaded(loaded);
      })
      .catch(() => this.pendingLoad === msg && this.conn.send(msg));
    return true;
  }

  // Download the run on screen: the server rebuilds it from the same body as its `load` (cached, or replayed).
  async download(what) {
    if (!this.shown) return;
    const { type, ...body } = this.shown;
    const r = await fetch(`/api/${what}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    if (!r.ok) {
      const detail = (await r.json().catch(() => ({}))).detail;
      this.toast && this.toast(`${what} download failed: ${Array.isArray(detail) ? detail[0].msg : detail || r.status}`, "error");
      return;
    }
    const name = /filename="([^"]+)"/.exec(r.headers.get("Content-Disposition") || "");
    const a = document.createElement("a");
    a.href = URL.createObjectURL(await r.blob());
    a.download = name ? name[1] : `${what}`;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }

  // A recorded run: one event per line (JSON lines) or a JSON array, replayed under the chosen scenario.
  async replay(input) {
    const file = input.files && input.files[0];
    input.value = "";
    if (!file) return;
    const text = await file.text();
    let events;
    try {
      events = text.trimStart().startsWith("[") ? JSON.parse(text) : text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
    } catch (e) {
      this.onFileError(`${file.name}: not JSON lines (${e.message})`);
      return;
    }
    // A recording that opens with its `run` line replays its own spec; an older one, under the chosen scenario.
    const own = events[0] && events[0].kind === "run";
    this.replayName = file.name;
    this.load(own ? { type: "load", events } : { type: "load", scenario: this.select.value, set: this.currentSet || {}, events });
  }

  key(ev) {
    const tag = ev.target && ev.target.tagName;
    if (tag === "INPUT" && ev.target.type !== "range") return;
    if (tag === "SELECT" || tag === "TEXTAREA" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    // profiler habits: space plays, arrows step (right: one batch; left: back to the previous launch), WASD zooms
    // (w in, s out, around the cursor) and pans (a, d), 0 / Escape resets the zoom, [ and ] walk the kernel
    // launches (pinned in the detail pane), + / - change the speed
    const key = ev.key.length === 1 ? ev.key.toLowerCase() : ev.key;
    const act = {
      " ": () => (this.playing ? this.pause() : this.play()),
      ArrowRight: () => this.step(),
      ArrowLeft: () => this.stepBack(),
      w: () => this.zoom(0.5),
      s: () => this.zoom(2),
      a: () => this.pan(-0.25),
      d: () => this.pan(0.25),
      0: () => this.store.resetRange(),
      Escape: () => this.store.resetRange(),
      "[": () => this.onKernelKey && this.onKernelKey(-1),
      "]": () => this.onKernelKey && this.onKernelKey(1),
      "+": () => this.bumpSpeed(1),
      "=": () => this.bumpSpeed(1),
      "-": () => this.bumpSpeed(-1),
      _: () => this.bumpSpeed(-1),
    }[key];
    if (!act) return;
    ev.preventDefault(); // a focused scrubber would move too; space would scroll
    act();
  }

  // The start of run A's launch before the playback time (the left arrow: one launch back).
  stepBack() {
    const run = this.store.main;
    if (!run) return;
    const starts = this.starts && this.starts.run === run ? this.starts.t : (this.starts = { run, t: run.kernel.map((k) => k.start_us).sort((x, y) => x - y) }).t;
    const t = this.store.t - 1e-6;
    let lo = 0;
    let hi = starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid] < t) lo = mid + 1;
      else hi = mid;
    }
    this.pause();
    this.seek(lo > 0 ? starts[lo - 1] : 0);
  }

  // The shown range, µs of the main run's clock.
  viewRange() {
    return this.store.axis.range || this.store.axis.extent;
  }

  // Zoom by `factor` (0.5: twice as close) around the playback time when it is in view, else the middle.
  zoom(factor) {
    const [a, b] = this.viewRange();
    const t = this.store.t;
    const c = t >= a && t <= b ? t : (a + b) / 2;
    const half = ((b - a) * factor) / 2;
    const [e0, e1] = this.store.axis.extent;
    const w = Math.min(half * 2, e1 - e0);
    let lo = Math.max(e0, c - w / 2);
    lo = Math.min(lo, e1 - w);
    this.store.setRange([lo, lo + w]);
  }

  // Pan by `share` of the shown width (negative: earlier).
  pan(share) {
    const [a, b] = this.viewRange();
    const [e0, e1] = this.store.axis.extent;
    const d = Math.max(e0 - a, Math.min(e1 - b, (b - a) * share));
    if (this.store.axis.range) this.store.setRange([a + d, b + d]);
  }

  bumpSpeed(dir) {
    const i = Math.min(this.speed.options.length - 1, Math.max(0, this.speed.selectedIndex + dir));
    if (i === this.speed.selectedIndex) return;
    this.speed.selectedIndex = i;
    this.conn.send({ type: "speed", speed: Number(this.speed.value) });
  }

  play() {
    // at the end of the run, play restarts it from the beginning
    if (this.store.duration && this.store.t >= this.store.duration - 1e-6) this.conn.send({ type: "seek", t_us: 0 });
    this.conn.send({ type: "play", speed: Number(this.speed.value) });
  }

  pause() {
    this.conn.send({ type: "pause" });
  }

  step() {
    this.conn.send({ type: "step" });
  }

  seek(t) {
    this.conn.send({ type: "seek", t_us: Math.min(Math.max(0, t), this.store.duration) });
  }

  // The page names the presets (pages.py), so the URL's run is asked for at once; their titles for the menu arrive
  // beside it (bench/README.md, "First screen").
  async init(defaultScenario) {
    const listed = fetch("/api/scenarios").then((r) => r.json());
    const names = (document.body.dataset.presets || "").split(",").filter(Boolean);
    const list = names.length ? null : await listed; // a page without the names: wait for the list
    this.names = names.length ? names : list.map((s) => s.name);
    this.defaultName = defaultScenario && this.names.includes(defaultScenario) ? defaultScenario : this.names[0];
    window.addEventListener("popstate", () => this.fromURL(false)); // Back / Forward: the preset of that entry
    const first = this.fromURL(true);
    this.fillMenu(list || (await listed));
    await first;
  }

  fillMenu(list) {
    const current = this.select.value;
    for (const s of list) {
      const o = document.createElement("option");
      o.value = s.name;
      o.textContent = s.title && s.title !== s.name ? `${s.name} — ${s.title}` : s.name;
      o.title = s.description;
      this.select.append(o);
    }
    if (current || this.chosen) this.select.value = this.chosen || current;
  }

  // Load what the URL names: its scenario and settings (a shared link, or a history entry on Back / Forward).
  async fromURL(first) {
    const q = new URLSearchParams(location.search);
    const name = q.get("scenario") || this.defaultName;
    const set = {};
    for (const f of FORM_FIELDS) if (q.has(f)) set[f] = parse(f, q.get(f));
    for (const [k, v] of q) if (DOTTED.test(k) && !FORM_FIELDS.includes(k)) set[k] = scalar(v); // deployment.tp=8, ...
    if (q.has("fault")) set.faults = q.get("fault") ? [FAULT_DEFAULTS[q.get("fault")]].filter(Boolean) : [];
    if (first && Object.keys(set).length) this.form.classList.remove("hidden"); // a shared view shows what it changed
    this.fromHistory = !first; // the entry exists already: no new one
    if (name) await this.choose(name, set);
  }

  // An unknown preset or settings the server refuses, before any run is on screen: say so and show the default
  // preset (never "Loading the run..." forever).
  fallBack(why) {
    if (this.shown || this.fellBack || !this.defaultName) return false;
    this.fellBack = true;
    this.keepError = true;
    const line = $("story-line");
    line.textContent = `${why} · showing the default preset, ${this.defaultName}`;
    line.classList.add("error");
    this.fallbackNote = line.textContent; // main.js keeps it before the default's story once that arrives
    this.toast && this.toast(`${why} · showing ${this.defaultName}`, "error");
    this.fromHistory = false;
    this.replaceNext = true; // the default replaces the broken entry
    this.choose(this.defaultName, {});
    return true;
  }

  async choose(name, set) {
    if (this.names && !this.names.includes(name)) {
      if (this.fallBack(`scenario: unknown preset '${name}' (one of ${this.names.length}: ${this.names.slice(0, 3).join(", ")}, ...)`)) return;
      this.toast && this.toast(`scenario: unknown preset '${name}'`, "error");
      return;
    }
    // leaving a run on screen for another preset: its history entry keeps the moment it was left at (Back returns
    // there), even while it played
    if (this.store.scenario && this.store.scenario.name !== name && !this.fromHistory && this.saveMoment) this.saveMoment();
    this.select.value = name;
    this.chosen = name; // the menu may still be filling (init)
    this.pendingURL = [name, set];
    this.load({ type: "load", scenario: name, set }); // first: the run is asked for while its settings arrive
    const r = await fetch(`/api/scenarios/${encodeURIComponent(name)}`);
    const preset = r.ok ? await r.json() : null;
    if (this.chosen === name) this.preset = preset;
  }

  apply() {
    const bad = checkForm(this.form);
    if (bad) {
      showFieldError(this.form, $("form-error"), bad[0], bad[1]);
      return;
    }
    const data = new FormData(this.form);
    const set = {};
    for (const f of FORM_FIELDS) {
      if (f.includes(".") && !BOOLEAN.has(f) && !data.get(f)) continue; // left empty: the preset's (or none)
      const v = BOOLEAN.has(f) ? data.has(f) : parse(f, data.get(f));
      const was = valueAt(this.preset, f);
      if (f.includes(".") && BOOLEAN.has(f) && !v && !was) continue;
      if (!this.preset || JSON.stringify(was) !== JSON.stringify(v)) set[f] = v;
    }
    const fault = data.get("fault");
    const presetFault = this.preset && this.preset.faults.length ? this.preset.faults[0].kind : "";
    if (fault !== presetFault) set.faults = fault ? [FAULT_DEFAULTS[fault]] : [];
    // the deployment card's and a sweep point's overrides stay (the form's own dotted fields are read above)
    for (const [k, v] of Object.entries(this.currentSet || {})) if (DOTTED.test(k) && !FORM_FIELDS.includes(k)) set[k] = v;
    clearFieldErrors(this.form, $("form-error"));
    this.pendingURL = [this.select.value, set]; // the URL changes once the server accepted the settings
    this.load({ type: "load", scenario: this.select.value, set });
  }

  // Reload the current scenario with the current overrides plus `extra` (dotted keys: deployment.tp, ...).
  loadWith(extra) {
    const set = { ...(this.currentSet || {}), ...extra };
    this.pendingURL = [this.select.value, set];
    this.conn.send({ type: "load", scenario: this.select.value, set });
  }

  // The URL of the run on screen. Another preset than the entry's is a new history entry (Back returns to the
  // previous preset); new settings of the same preset, or a load from history itself, replace it.
  setURL(name, set) {
    const q = new URLSearchParams({ scenario: name, ...(this.extraQuery ? this.extraQuery() : {}) });
    for (const [k, v] of Object.entries(set)) {
      if (k === "faults") q.set("fault", v.length ? v[0].kind : "");
      else q.set(k, String(v));
    }
    const now = new URLSearchParams(location.search);
    const was = now.get("scenario");
    const push = was && was !== name && !this.fromHistory && !this.replaceNext;
    // the same preset's entry keeps its moment (a link's, or Back's) until main.js writes the one on screen
    if (!push && was === name) for (const k of MOMENT_KEYS) if (now.has(k)) q.set(k, now.get(k));
    const url = `${location.pathname}?${q}`;
    if (push) history.pushState(null, "", url);
    else history.replaceState(null, "", url);
    this.fromHistory = false;
    this.replaceNext = false;
  }

  fillForm(spec) {
    for (const f of FORM_FIELDS) {
      const input = this.form.elements[f];
      if (!input) continue;
      const v = valueAt(spec, f);
      if (input.type === "checkbox") input.checked = Boolean(v);
      else input.value = v == null ? "" : v;
    }
    this.form.elements.fault.value = spec.faults && spec.faults.length ? spec.faults[0].kind : "";
  }

  onLoaded(msg) {
    this.shown = this.pendingLoad;
    if (this.shown && this.shown.events && this.toast) {
      const own = !this.shown.scenario && !this.shown.spec ? " with its own settings" : "";
      this.toast(`replaying ${this.replayName}: the recorded run of '${msg.scenario.name}'${own}`);
    }
    if (this.pendingURL) {
      this.setURL(...this.pendingURL);
      this.currentSet = this.pendingURL[1];
    }
    this.pendingURL = null;
    if (this.keepError) this.keepError = false; // the refused settings' message stays beside the form
    else {
      $("story-line").classList.remove("error");
      clearFieldErrors(this.form, $("form-error"));
    }
    this.fillForm(msg.scenario);
    this.scrubber.max = String(this.store.duration || 1); // the longer of the two runs (store.reset)
    this.scrubber.value = "0";
    if (this.select.value !== msg.scenario.name && [...this.select.options].some((o) => o.value === msg.scenario.name)) this.select.value = msg.scenario.name;
  }

  onState(msg) {
    this.playing = msg.playing;
    document.body.classList.toggle("playing", msg.playing);
    const i = [...this.speed.options].findIndex((o) => Number(o.value) === msg.speed);
    if (i >= 0) this.speed.selectedIndex = i;
  }

  onFileError(text) {
    this.onError({ message: text, field: "events" });
    if (this.toast) this.toast(text, "error");
  }

  // An error message as the user reads it: the field and the fix, without the framework's wording.
  errorText(msg) {
    if (!msg.field) return msg.message;
    const name = msg.field.replace(/^(set|spec)\./, "");
    return plainError(name, msg.message, this.form.elements[name]);
  }

  onError(msg) {
    if (msg.field && /^(set|spec|events)/.test(msg.field)) {
      showFieldError(this.form, $("form-error"), msg.field, msg.message);
      this.form.classList.remove("hidden");
    }
    if (msg.field && /^(set|spec|scenario)/.test(msg.field)) {
      const name = msg.field.replace(/^(set|spec)\./, "");
      this.fallBack(plainError(name, msg.message, this.form.elements[name]));
    }
  }

  // "12.35 ms / 5.123 s · whole model": playback time and the run's end, in the units on screen
  clockText(t) {
    const ax = this.store.axis;
    const what = ax.units === "model" ? "whole model" : ax.clock === "model" ? "one layer of each step" : "one layer";
    return `${us(ax.clockUs(t))} / ${us(ax.clockUs(this.store.duration))} · ${what}`;
  }

  tick() {
    const t = this.store.t;
    const key = `${t}/${this.store.duration}/${this.store.axis.ver}`;
    if (!this.scrubbing && key !== this.tickKey) {
      this.tickKey = key;
      this.scrubber.value = String(t);
      const text = this.clockText(t);
      if (text !== this.shownClock) this.clock.textContent = this.shownClock = text; // no layout work when unchanged
    }
  }
}

// A field's error: said beside the form ("chunk_size must be ...") and on the input (aria-invalid, a red outline).
export function showFieldError(form, box, field, message) {
  clearFieldErrors(form, box);
  const name = field.replace(/^(set|spec)\./, "");
  const input = form.elements[name] || form.elements[name.split(".").pop()];
  box.textContent = plainError(name, message, input);
  box.setAttribute("role", "alert");
  if (input && input.setAttribute) {
    input.setAttribute("aria-invalid", "true");
    input.setAttribute("aria-describedby", box.id);
    input.classList.add("invalid");
  }
}

// The server's validation message without the framework's wording: "set: field 'chunk_size': Input should be a
// valid integer" -> "chunk_size must be a whole number from 16 to 65536" (the range from the input itself).
export function plainError(name, message, input) {
  let m = String(message).replace(/^(set|spec|scenario):\s*/, "").replace(/^field '[^']*':\s*/, "");
  const range = input && input.min !== "" && input.max !== "" && input.min !== undefined ? ` from ${input.min} to ${input.max}` : "";
  const rules = [
    [/^Input should be a valid integer.*$/i, `must be a whole number${range}`],
    [/^Input should be a valid number.*$/i, `must be a number${range}`],
    [/^Input should be greater than or equal to (\S+)$/i, (_, n) => `must be at least ${n}${range ? ` (${range.trim()})` : ""}`],
    [/^Input should be greater than (\S+)$/i, (_, n) => `must be more than ${n}${range ? ` (${range.trim()})` : ""}`],
    [/^Input should be less than or equal to (\S+)$/i, (_, n) => `must be at most ${n}${range ? ` (${range.trim()})` : ""}`],
    [/^Input should be less than (\S+)$/i, (_, n) => `must be less than ${n}${range ? ` (${range.trim()})` : ""}`],
    [/^Input should be (.*)$/i, (_, what) => `must be ${what}`],
  ];
  for (const [re, to] of rules) if (re.test(m)) return `${name} ${m.replace(re, to)}`;
  m = m.replace(/^Value error,\s*/i, "");
  return m.startsWith(name) ? m : `${name}: ${m}`;
}

// The form's own check before a load: each number within its input's min / max, whole where it has no step.
// [field, message] of the first bad input, or null.
export function checkForm(form) {
  for (const f of NUMERIC) {
    const input = form.elements[f];
    if (!input || input.value === "") continue;
    const v = Number(input.value);
    const lo = input.min === "" ? -Infinity : Number(input.min);
    const hi = input.max === "" ? Infinity : Number(input.max);
    const whole = input.step !== "any";
    const what = `${whole ? "a whole number" : "a number"}${Number.isFinite(lo) && Number.isFinite(hi) ? ` from ${lo} to ${hi}` : Number.isFinite(lo) ? ` of at least ${lo}` : ""}`;
    if (!Number.isFinite(v) || (whole && !Number.isInteger(v)) || v < lo || v > hi) return [f, `${f} must be ${what} (got ${input.value || "nothing"})`];
  }
  return null;
}

export function clearFieldErrors(form, box) {
  box.textContent = "";
  for (const n of form.querySelectorAll("[aria-invalid]")) {
    n.removeAttribute("aria-invalid");
    n.classList.remove("invalid");
  }
}

function scalar(v) {
  if (v === "true" || v === "false") return v === "true";
  if (v === "null") return null;
  const n = Number(v);
  return v !== "" && Number.isFinite(n) ? n : v;
}

function parse(field, value) {
  if (BOOLEAN.has(field)) return value === "true" || value === true;
  return NUMERIC.has(field) ? Number(value) : value;
}
