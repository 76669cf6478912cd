// The KV cache as a banks x pages grid on a <canvas>, one grid per run (a comparison preset shows run A
// above run B, each labelled in its run's colour). A grid is the state at the playback cursor, rebuilt
// from the run's page events up to that time (loaded.overview), so a seek or a paused tour step shows
// exactly what the run looked like then. Damage stays until it is repaired: an evicted page stays red until
// its slot is written again, a stale map entry stays yellow until the map is rebuilt, and a strip at the
// right of each grid gives each bank's latest CRC verdict (red: mismatch, green: clean, dark: not checked).
// While playing, migrations fly from the old slot to the new and new damage flashes once.
// Serving runs: a page carries its request_id and takes that request's colour (its lane's colour); a block
// allocated to a second request while the first still holds it (a prefix-cache hit) is shared and drawn light;
// while playing, freed pages fade out in their request's colour and a preempted request's pages flash.

import { CELL, FLASH, PHASE, REQUEST_STATE, RUN, THEME, ownerColor, requestColor, requestHex, rgb, runColor } from "../colors.js";
import { esc } from "../format.js";
import { hideTip, showTip } from "./tip.js";

const FLASH_MS = 1200; // long enough to notice at normal speed (the state itself stays)
const MOVE_MS = 1200;
const STRIP = 10; // px of the CRC verdict strip (css px)
const LABEL = 14; // px of a run's label row when two runs are shown
const REDUCED = window.matchMedia ? window.matchMedia("(prefers-reduced-motion: reduce)") : { matches: false };
const USED_SHARE = 0.6; // a run that never touches more than 60% of the slots shows only the slots it used
const OPS = new Set(["page_alloc", "page_free", "page_migrate", "page_evict", "fault", "crc", "banks", "alloc_fail", "chunk"]);

// One run's bank state at a time t: cells {owner, phase, state} where state is "ok", "evicted" or "stale".
export class BankModel {
  constructor(run, banksHint) {
    this.run = run;
    this.ops = [];
    for (const [kind, list] of Object.entries(run)) if (OPS.has(kind) && Array.isArray(list)) for (const e of list) this.ops.push({ ...e, kind });
    this.ops.sort((a, b) => a.t_us - b.t_us);
    let banks = banksHint || 1;
    let cap = 1;
    for (const e of this.ops) {
      if (e.kind === "banks") {
        banks = Math.max(banks, e.used.length);
        cap = Math.max(cap, e.capacity);
      }
      for (const b of e.banks || []) banks = Math.max(banks, b + 1);
      for (const sl of e.slots || []) cap = Math.max(cap, sl + 1);
      if (e.kind === "page_migrate") cap = Math.max(cap, e.from_slot + 1, e.to_slot + 1);
    }
    this.banks = banks;
    this.cap = cap;
    // the slots the run ever wrote: a 128-request serving run uses a few percent of a 92k-page pool, so its grid
    // shows slots [0, shown) (the rest were never used) instead of drawing its pages into 1% of the width
    let used = 0;
    for (const e of this.ops) {
      for (const sl of e.slots || []) used = Math.max(used, sl + 1);
      if (e.kind === "page_migrate") used = Math.max(used, e.from_slot + 1, e.to_slot + 1);
    }
    this.shown = used && used < cap * USED_SHARE ? Math.min(cap, Math.ceil(used * 1.05)) : cap;
    this.pageLevel = this.ops.some((e) => e.kind === "page_alloc");
    // the most pages in use at once over the run (its bank snapshots): at the end of a serving run every request
    // has finished and freed its KV, so "0 pages" alone says nothing about the run
    this.peak = 0;
    for (const e of this.ops) if (e.kind === "banks") this.peak = Math.max(this.peak, e.used.reduce((a, b) => a + b, 0));
    this.rewind();
  }

  rewind() {
    this.byRequest = false; // pages carry request ids (a serving run)
    this.cells = new Array(this.banks * this.cap).fill(null); // occupant {owner, phase} per slot
    this.damage = new Array(this.banks * this.cap).fill(null); // null | {state: "evicted"|"stale", owner, logical}
    this.where = new Map(); // `${owner}:${logical}` -> cell index of the page
    this.lost = new Map(); // `${owner}:${logical}` -> cell index it was evicted from (until re-fetched)
    this.crc = new Array(this.banks).fill(null); // per bank: null (not checked), true (clean), false (bad)
    this.crcAt = null;
    this.snapshot = null;
    this.next = 0;
    this.t = -1;
  }

  // Apply every op up to t (rewinding if t went back); returns the ops applied, for animations.
  advance(t) {
    if (t < this.t) this.rewind();
    this.t = t;
    const done = [];
    while (this.next < this.ops.length && this.ops[this.next].t_us <= t) {
      const e = this.ops[this.next++];
      this.apply(e);
      done.push(e);
    }
    return done;
  }

  idx(b, s) {
    return b * this.cap + s;
  }

  apply(e) {
    switch (e.kind) {
      case "page_alloc":
        e.banks.forEach((b, j) => {
          const i = this.idx(b, e.slots[j]);
          const req = e.request_id ?? null;
          const prev = this.cells[i];
          if (req !== null) this.byRequest = true;
          if (prev && req !== null && prev.req !== null && prev.req !== undefined && prev.req !== req) {
            this.cells[i] = { ...prev, holders: [...prev.holders, req], shared: true }; // the same block, one more holder
            return;
          }
          this.cells[i] = { owner: e.owner, phase: e.phase, req, holders: req === null ? [] : [req], shared: false, block: e.logical ? e.logical[j] : null };
          if (!e.logical) return;
          const key = `${e.owner}:${e.logical[j]}`;
          this.where.set(key, i);
          // the owner's page is back (re-fetched or rewritten): its damage is repaired, wherever it was
          if (this.lost.has(key)) {
            const from = this.lost.get(key);
            if (this.damage[from] && this.damage[from].state === "evicted") this.damage[from] = null;
            this.lost.delete(key);
          }
          if (this.damage[i] && this.damage[i].owner === e.owner) this.damage[i] = null;
        });
        break;
      case "page_free":
        e.banks.forEach((b, j) => {
          const i = this.idx(b, e.slots[j]);
          const prev = this.cells[i];
          const req = e.request_id ?? null;
          if (prev && req !== null && prev.holders && prev.holders.length > 1) {
            const holders = prev.holders.filter((h) => h !== req); // one holder lets go; the block stays for the others
            this.cells[i] = { ...prev, holders, req: holders[0], shared: holders.length > 1 };
          } else this.cells[i] = null;
        });
        break;
      case "page_migrate": {
        const from = this.idx(e.from_bank, e.from_slot);
        const c = this.cells[from] || { owner: e.owner, phase: "decode" };
        const to = this.idx(e.to_bank, e.to_slot);
        this.cells[from] = null;
        this.cells[to] = c;
        this.where.set(`${e.owner}:${e.logical}`, to);
        break;
      }
      case "page_evict":
        e.banks.forEach((b, j) => {
          const i = this.idx(b, e.slots[j]);
          const logical = e.logical ? e.logical[j] : null;
          this.cells[i] = null; // the slot is free (often handed straight to another tenant)
          this.damage[i] = { state: "evicted", owner: e.owner, logical };
          if (logical !== null) this.lost.set(`${e.owner}:${logical}`, i);
        });
        break;
      case "fault":
        this.fault(e);
        break;
      case "crc":
        // the latest pass per bank; a bank is bad if either source (metadata or numpy data) found it bad
        if (this.crcAt !== e.t_us) {
          this.crcAt = e.t_us;
          this.crc.fill(true, 0, Math.min(e.checked_banks, this.banks));
        }
        for (const b of e.bad_banks) if (b < this.banks) this.crc[b] = false;
        break;
      case "banks":
        this.snapshot = e;
        break;
      default:
        break;
    }
  }

  // A fault injected into chunk c in banks B leaves wrong map entries for c's pages in B ("stale", until the
  // fault is recovered): stale chunk metadata, a partial eviction's lost update.
  fault(e) {
    if (e.action === "injected" && e.chunk !== null && e.chunk !== undefined && e.banks.length) {
      const ch = this.run.chunk.find((c) => c.chunk === e.chunk);
      const pages = new Set(ch ? ch.pages : []);
      const banks = new Set(e.banks);
      for (const [key, i] of this.where) {
        const k = key.lastIndexOf(":");
        const logical = Number(key.slice(k + 1));
        if (pages.has(logical) && banks.has(Math.floor(i / this.cap))) this.damage[i] = { state: "stale", owner: key.slice(0, k), logical, fault: e.fault };
      }
    }
    if (e.action === "recovered") {
      for (let i = 0; i < this.damage.length; i++) if (this.damage[i] && this.damage[i].state === "stale" && this.damage[i].fault === e.fault) this.damage[i] = null;
    }
  }

  tally() {
    const n = { evicted: 0, stale: 0, used: 0 };
    for (let i = 0; i < this.cells.length; i++) {
      if (this.damage[i]) n[this.damage[i].state] += 1;
      else if (this.cells[i]) n.used += 1;
    }
    return n;
  }

  color(i) {
    const d = this.damage[i];
    if (d) return d.state === "evicted" ? CELL.evicted : CELL.stale;
    const c = this.cells[i];
    if (!c) return CELL.empty;
    if (c.req !== null && c.req !== undefined) return requestHex(c.req, c.shared);
    if (c.owner === "hint" || c.owner === "tenant") return ownerColor(c.owner);
    if (c.owner !== "seq0" && !/^seq/.test(c.owner)) return CELL.tenant; // another process (e.g. "pressure")
    return PHASE[c.phase] || PHASE.decode;
  }
}

export class BanksView {
  constructor(canvas, store, info, legend, serving = null) {
    this.serving = serving; // request states, to tell a preemption's frees from a finished request's
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.store = store;
    this.info = info;
    this.legend = legend;
    this.id = "banks";
    this.title = "KV banks";
    this.models = [];
    this.anims = [];
    this.lastReset = -1;
    this.shownT = null;
    this.linked = null; // {role, id}: a request hovered in another panel (its lane), its pages outlined here
    this.onHover = null; // (role, id) | (null): a request's page hovered here (main.js links it to its lane)
    this.layout();
    canvas.addEventListener("mousemove", (ev) => this.hover(ev));
    canvas.addEventListener("mouseleave", () => {
      hideTip();
      if (this.onHover) this.onHover(null);
    });
    new ResizeObserver(() => this.layout()).observe(canvas);
  }

  layout() {
    const r = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    this.dpr = dpr;
    this.canvas.width = Math.max(1, Math.round(r.width * dpr));
    this.canvas.height = Math.max(1, Math.round(r.height * dpr));
    this.needsDraw = true;
  }

  load() {
    const s = this.store;
    const hint = s.scenario ? s.scenario.banks : 32;
    this.models = s.runs.map((run) => new BankModel(run, hint));
    this.canvas.classList.toggle("two", this.models.length > 1);
    this.grids = this.models.map((m) => {
      const c = document.createElement("canvas");
      c.width = m.cap;
      c.height = m.banks;
      const g = c.getContext("2d");
      return { canvas: c, ctx: g, image: g.createImageData(m.cap, m.banks) };
    });
    this.anims = [];
    this.shownT = null;
    this.fillLegend();
  }

  // Repaint grid k: every cell, or (ops given) only the cells those ops touched, so a serving run's many small
  // page operations per frame cost a few cells each, not the whole grid.
  paint(k, ops = null) {
    const m = this.models[k];
    const g = this.grids[k];
    const d = g.image.data;
    const cache = this.colorCache || (this.colorCache = new Map()); // hex -> [r, g, b], parsed once
    if (cache.size > 4096) cache.clear();
    let cells = null;
    if (ops && ops.length < 4000 && !ops.some((e) => e.kind === "fault")) {
      cells = [];
      for (const e of ops) {
        if (e.banks && e.slots) e.banks.forEach((b, j) => cells.push(m.idx(b, e.slots[j])));
        if (e.kind === "page_migrate") cells.push(m.idx(e.from_bank, e.from_slot), m.idx(e.to_bank, e.to_slot));
      }
    }
    const all = cells === null;
    const n = all ? m.cells.length : cells.length;
    for (let j = 0; j < n; j++) {
      const i = all ? j : cells[j];
      const hex = m.color(i);
      let col = cache.get(hex);
      if (!col) cache.set(hex, (col = rgb(hex)));
      d[i * 4] = col[0];
      d[i * 4 + 1] = col[1];
      d[i * 4 + 2] = col[2];
      d[i * 4 + 3] = 255;
    }
    g.ctx.putImageData(g.image, 0, 0);
  }

  // the css-px rectangle of grid k (label row above it when there are two runs; CRC strip to its right)
  region(k) {
    const W = this.canvas.width / this.dpr;
    const H = this.canvas.height / this.dpr;
    const n = Math.max(this.models.length, 1);
    const top = n > 1 ? LABEL : 0;
    const h = H / n;
    return { x: 0, y: k * h + top, w: W - STRIP - 4, h: h - top - (n > 1 ? 4 : 0) };
  }

  // Called every animation frame; returns true when it drew.
  render() {
    const s = this.store;
    const reset = `${s.ver.reset || 0}:${s.ver.theme || 0}:${s.loaded ? s.loaded.num_events : 0}`;
    if (reset !== this.lastReset || this.models.length !== s.runs.length) {
      this.lastReset = reset;
      this.load();
    }
    const t = s.t;
    if (t !== this.shownT) {
      const live = this.shownT !== null && t > this.shownT && t - this.shownT < (s.extent || 1) * 0.05;
      let changed = this.shownT === null || t < this.shownT;
      this.models.forEach((m, k) => {
        const tk = s.axis.timeOf(m.run, t); // the same moment on a run's own clock (axis.js)
        const rewound = tk < m.t;
        const done = m.advance(tk);
        if (done.length || rewound || this.shownT === null) {
          this.paint(k, rewound || this.shownT === null ? null : done);
          changed = true;
        }
        if (live) for (const e of done) this.animate(k, e);
      });
      this.shownT = t;
      if (changed) {
        this.needsDraw = true;
        this.updateInfo();
      }
    }
    if (!this.needsDraw && !this.anims.length) return false;
    this.needsDraw = false;
    this.draw();
    return true;
  }

  animate(k, e) {
    if (REDUCED.matches) return; // prefers-reduced-motion: the state changes, nothing flies or flashes
    const now = performance.now();
    if (e.kind === "page_migrate") this.anims.push({ k, type: "move", fb: e.from_bank, fs: e.from_slot, tb: e.to_bank, ts: e.to_slot, start: now });
    else if (e.kind === "page_evict") e.banks.forEach((b, j) => this.anims.push({ k, type: "cell", b, s: e.slots[j], color: FLASH.evict, start: now }));
    else if (e.kind === "crc") for (const b of e.bad_banks) this.anims.push({ k, type: "row", b, color: FLASH.crc, start: now });
    else if (e.kind === "alloc_fail") this.anims.push({ k, type: "all", color: FLASH.fail, start: now });
    else if (e.kind === "page_free" && e.request_id !== null && e.request_id !== undefined) {
      const r = this.serving && this.serving.requests.get(e.request_id);
      // a preemption's frees happen when the request is preempted (the whole run's state is its last: ask its times)
      const preempted = Boolean(r && (this.serving.whole ? r.preemptAt.has(e.t_us) : r.state === "preempted"));
      const color = preempted ? REQUEST_STATE.preempted : requestColor(e.request_id);
      e.banks.forEach((b, j) => this.anims.push({ k, type: "cell", b, s: e.slots[j], color, start: now, soft: !preempted }));
    }
    if (this.anims.length > 400) this.anims.splice(0, this.anims.length - 400);
  }

  draw() {
    const ctx = this.ctx;
    const dpr = this.dpr;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    this.models.forEach((m, k) => {
      const r = this.region(k);
      if (this.models.length > 1) {
        ctx.fillStyle = runColor(m.run.role);
        ctx.font = "11px ui-monospace, Menlo, monospace";
        ctx.textBaseline = "bottom";
        ctx.fillText(`${m.run.role === "compare" ? "B" : "A"}: ${m.run.label}`, 0, r.y - 2);
      }
      ctx.drawImage(this.grids[k].canvas, 0, 0, m.shown, m.banks, r.x, r.y, r.w, r.h);
      if (this.linked && this.linked.role === m.run.role) this.drawLinked(k);
      if (!m.pageLevel && m.snapshot) this.drawOccupancy(m, r);
      const rowH = r.h / m.banks;
      ctx.fillStyle = THEME.panel;
      if (rowH >= 4) for (let b = 1; b < m.banks; b++) ctx.fillRect(r.x, r.y + Math.round(b * rowH) - 1, r.w, 1);
      // the CRC verdict strip: one mark per bank
      for (let b = 0; b < m.banks; b++) {
        const v = m.crc[b];
        ctx.fillStyle = v === null ? THEME.grid : v ? CELL.crc_ok : CELL.crc_bad;
        ctx.fillRect(r.x + r.w + 4, r.y + b * rowH, STRIP, Math.max(rowH - 1, 1));
      }
    });
    this.drawAnims(performance.now());
  }

  drawOccupancy(m, r) {
    // no page-level events: fill each bank's row to its used count
    const ctx = this.ctx;
    const b = m.snapshot;
    const rowH = r.h / m.banks;
    const colW = r.w / Math.max(b.capacity, 1);
    b.used.forEach((u, i) => {
      ctx.fillStyle = PHASE[this.store.phase] || PHASE.prefill;
      ctx.fillRect(r.x, r.y + i * rowH, u * colW, rowH - 1);
      const res = (b.reserved && b.reserved[i]) || 0;
      if (res) {
        ctx.fillStyle = CELL.hint;
        ctx.fillRect(r.x + u * colW, r.y + i * rowH, res * colW, rowH - 1);
      }
    });
  }

  // Outline every page of the linked request in grid k.
  drawLinked(k) {
    const m = this.models[k];
    const ctx = this.ctx;
    ctx.strokeStyle = THEME.bright;
    ctx.lineWidth = 1;
    for (let i = 0; i < m.cells.length; i++) {
      const c = m.cells[i];
      if (!c || !c.holders || !c.holders.includes(this.linked.id)) continue;
      const [x, y, w, h] = this.cellRect(k, Math.floor(i / m.cap), i % m.cap);
      ctx.strokeRect(x - 0.5, y - 0.5, w + 1, h + 1);
    }
  }

  // Outline the pages of request id of run role (hovered in the request lanes), or none.
  link(role, id) {
    const next = id === null || id === undefined ? null : { role, id };
    if (JSON.stringify(next) === JSON.stringify(this.linked)) return;
    this.linked = next;
    this.needsDraw = true;
  }

  cellRect(k, b, s) {
    const r = this.region(k);
    const m = this.models[k];
    const w = r.w / m.shown;
    const h = r.h / m.banks;
    return [r.x + s * w, r.y + b * h, Math.max(w, 2), Math.max(h - 1, 1)];
  }

  drawAnims(now) {
    const ctx = this.ctx;
    const keep = [];
    for (const a of this.anims) {
      const age = now - a.start;
      const dur = a.type === "move" ? MOVE_MS : FLASH_MS;
      if (age > dur || !this.models[a.k]) continue;
      keep.push(a);
      const f = age / dur;
      ctx.globalAlpha = 1 - f * 0.7;
      const r = this.region(a.k);
      if (a.type === "move") {
        const [x0, y0, w, h] = this.cellRect(a.k, a.fb, a.fs);
        const [x1, y1] = this.cellRect(a.k, a.tb, a.ts);
        const e = f < 0.5 ? 2 * f * f : 1 - (-2 * f + 2) ** 2 / 2; // ease in-out
        ctx.strokeStyle = FLASH.migrate;
        ctx.lineWidth = 1;
        ctx.beginPath();
        ctx.moveTo(x0 + w / 2, y0 + h / 2);
        ctx.lineTo(x1 + w / 2, y1 + h / 2);
        ctx.stroke();
        ctx.fillStyle = FLASH.migrate;
        ctx.fillRect(x0 + (x1 - x0) * e, y0 + (y1 - y0) * e, Math.max(w, 3), Math.max(h, 3)); // the page, flying
      } else if (a.type === "cell") {
        const [x, y, w, h] = this.cellRect(a.k, a.b, a.s);
        ctx.fillStyle = a.color;
        if (a.soft) ctx.fillRect(x, y, w, h); // a freed page fades out in its request's colour
        else ctx.fillRect(x - 2, y - 2, Math.max(w, 6) + 4, h + 4);
      } else if (a.type === "row") {
        const [, y, , h] = this.cellRect(a.k, a.b, 0);
        ctx.strokeStyle = a.color;
        ctx.lineWidth = 2;
        ctx.strokeRect(r.x + 1, y, r.w - 2, h);
      } else {
        ctx.strokeStyle = a.color;
        ctx.lineWidth = 4;
        ctx.strokeRect(r.x + 2, r.y + 2, r.w - 4, r.h - 4);
      }
    }
    ctx.globalAlpha = 1;
    this.anims = keep;
  }

  updateInfo() {
    const parts = this.models.map((m) => {
      const n = m.tally();
      const bad = m.crc.filter((v) => v === false).length;
      const tag = this.models.length > 1 ? `${m.run.role === "compare" ? "B" : "A"}: ` : "";
      const peak = m.byRequest && m.peak ? ` in use (run peak ${m.peak.toLocaleString("en-US")})` : "";
      const part = m.shown < m.cap ? ` (slots 0-${m.shown - 1} shown: the rest never used)` : "";
      const pool = `${m.banks}×${m.cap} = ${(m.banks * m.cap).toLocaleString("en-US")} pages in the pool`;
      return `${tag}${pool}${part} · ${n.used} pages${peak}` + (n.evicted ? ` · ${n.evicted} evicted` : "") + (n.stale ? ` · ${n.stale} stale` : "") + (bad ? ` · CRC ✗ ${bad} banks` : "");
    });
    const text = parts.join("  |  ");
    if (text !== this.info.textContent) this.info.textContent = text;
  }

  fillLegend() {
    this.legend.innerHTML = "";
    const add = (color, text, title) => {
      const span = document.createElement("span");
      span.className = "key";
      span.title = title;
      const sw = document.createElement("i");
      sw.style.background = color;
      span.append(sw, document.createTextNode(text));
      this.legend.append(span);
    };
    if (this.models.some((m) => m.ops.some((e) => e.request_id !== null && e.request_id !== undefined))) {
      for (const id of [0, 1, 2]) add(requestColor(id), `req ${id}`, `Pages of request ${id}: the colour of its lane`);
      add(THEME.text, "… one colour per request", "Every request has its own colour, the same as its lane in the request lanes; hover a cell");
      add(requestHex(0, true), "shared (prefix cache)", "A block held by several requests at once: a prefix-cache hit, drawn light");
      add(REQUEST_STATE.preempted, "freed by preemption", "Flashes while playing: a preempted request's KV is freed, to be recomputed");
      add(CELL.evicted, "evicted", "Evicted under pressure: stays red until its slot is written again");
      add(CELL.crc_bad, "CRC mismatch (right strip)", "Right-hand strip: each bank's latest CRC check, red = mismatch");
      return;
    }
    add(PHASE.prefill, "prefill-written", "KV pages written during prefill (chunk by chunk)");
    add(PHASE.decode, "decode-written", "KV pages opened during decode (one every page_size tokens)");
    add(CELL.hint, "hint-reserved", "Pages reserved for decode by the page hint");
    add(CELL.tenant, "other tenants", "Pages held by other tenants (fragmentation)");
    add(CELL.evicted, "evicted", "Evicted under pressure: stays red until its slot is written again");
    add(CELL.stale, "stale map entry", "The address map points at an old slot: stays until the map is rebuilt");
    add(CELL.crc_bad, "CRC mismatch (right strip)", "Right-hand strip: each bank's latest CRC check, red = mismatch; stays until a later check is clean");
    add(CELL.crc_ok, "CRC clean", "Right-hand strip: green = the bank's K/V matched its CRC; dark = not checked yet");
    if (this.models.length > 1) {
      const span = document.createElement("span");
      span.className = "key";
      span.innerHTML = `<b style="color:${esc(RUN.main)}">A</b> / <b style="color:${esc(RUN.compare)}">B</b>: the two runs at the same simulated time`;
      this.legend.append(span);
    }
  }

  hover(ev) {
    const rect = this.canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left;
    const y = ev.clientY - rect.top;
    const k = this.models.findIndex((_, i) => {
      const r = this.region(i);
      return y >= r.y && y < r.y + r.h;
    });
    if (k < 0) {
      hideTip();
      return;
    }
    const m = this.models[k];
    const r = this.region(k);
    const b = Math.floor(((y - r.y) / r.h) * m.banks);
    const crc = m.crc[b] === null ? "not checked yet" : m.crc[b] ? "clean" : "MISMATCH";
    if (x > r.x + r.w) {
      this.canvas.title = `bank ${b}: latest CRC check ${crc}`;
      showTip(`bank ${b}: latest CRC check ${esc(crc)}`, ev.clientX, ev.clientY);
      return;
    }
    const s = Math.floor(((x - r.x) / r.w) * m.shown);
    const i = b * m.cap + s;
    const c = m.cells[i];
    const d = m.damage[i];
    const who = c && c.req !== null && c.req !== undefined ? `request ${c.holders.join(" + ")}${c.shared ? " (a shared prefix block)" : ""}` : c && c.owner;
    const held = c ? `${who}, written in ${c.phase}` : "free";
    const state = d ? `${d.state === "evicted" ? `EVICTED page ${d.logical} of ${d.owner} (red until it is re-fetched)` : `STALE map entry for page ${d.logical} of ${d.owner} (until the map is repaired)`}; slot now: ${held}` : held;
    this.canvas.title = `${this.models.length > 1 ? `${m.run.label}: ` : ""}bank ${b}, slot ${s}: ${state}\nbank ${b} CRC: ${crc}` +
      "\nOne row per KV bank, one cell per page (simulated at full size).";
    // the page tooltip: request, block, state
    const req = c && c.req !== null && c.req !== undefined ? c.holders.join(" + ") : null;
    const pageState = d ? d.state : !c ? "free" : c.shared ? `shared by ${c.holders.length} requests (prefix cache)` : `${c.phase}-written`;
    const tag = this.models.length > 1 ? `run ${m.run.role === "compare" ? "B" : "A"} · ` : "";
    showTip(`<b>${tag}${req !== null ? `request ${esc(req)}` : esc(c ? c.owner : "free slot")}</b>` +
      `${c && c.block !== null && c.block !== undefined ? ` · block ${c.block}` : ""}<br>state: ${esc(pageState)}` +
      `<br>bank ${b}, slot ${s} · CRC ${esc(crc)}`, ev.clientX, ev.clientY);
    this.tipText = { request: req, block: c ? c.block : null, state: pageState }; // read by tests
    if (this.onHover) this.onHover(m.run.role, c && c.req !== null && c.req !== undefined ? c.req : null);
  }
}
