// The KV cache as a banks x pages grid on a <canvas>: one row per bank, one cell per page slot,
// coloured by owner and phase. The grid lives in an ImageData (one pixel per page) scaled up with
// nearest-neighbour drawing, so 32 banks x 1024 pages costs one putImageData per change.
// Allocations fill cells, migrations fly from the old slot to the new, evictions and CRC failures flash.
// Serving runs: pages carry a request_id and take that request's colour (the lanes' colour); a page allocated
// again while held (a prefix-cache hit) is shared and drawn light; frees fade, preemptions flash.

import { FLASH, PHASE, REQUEST_STATE, THEME, ownerColor, requestColor, requestRGB } from "../colors.js";

const EMPTY = [36, 40, 59];
const FLASH_MS = 1200; // long enough to notice at normal speed
const MOVE_MS = 1200;

function rgb(hex) {
  const n = parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

const SHARED = [240, 240, 245]; // a prefix block held by several requests: near white, the request's hue mixed in

// A cell's colour: its request's (light when shared by several), else the owner's hue and the phase it was written in.
function cellColor(c) {
  if (c.req !== null && c.req !== undefined) {
    const [r, g, b] = requestRGB(c.req);
    return c.shared ? [Math.round((r + 2 * 240) / 3), Math.round((g + 2 * 240) / 3), Math.round((b + 2 * 245) / 3)] : [r, g, b];
  }
  if (c.shared) return SHARED;
  return c.owner === "hint" || c.owner === "tenant" ? rgb(ownerColor(c.owner)) : rgb(PHASE[c.phase] || ownerColor(c.owner));
}

export class BanksView {
  constructor(canvas, store, info, legend, serving = null) {
    this.serving = serving;
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.store = store;
    this.info = info;
    this.legend = legend;
    this.grid = document.createElement("canvas");
    this.gctx = this.grid.getContext("2d");
    this.anims = []; // {type, ..., start}
    this.owners = new Map(); // owner -> count of pages
    this.lastReset = -1;
    this.layout();
    canvas.addEventListener("mousemove", (ev) => this.hover(ev));
    new ResizeObserver(() => this.layout()).observe(canvas);
  }

  layout() {
    const r = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.max(1, Math.round(r.width * dpr));
    this.canvas.height = Math.max(1, Math.round(r.height * dpr));
    this.needsDraw = true;
  }

  dims(banks, cap) {
    if (banks === this.banks && cap === this.cap) return;
    const old = this.cells;
    const oldBanks = this.banks || 0;
    const oldCap = this.cap || 0;
    this.banks = banks;
    this.cap = cap;
    this.cells = new Array(banks * cap).fill(null); // {owner, phase} per slot
    if (old) for (let b = 0; b < Math.min(oldBanks, banks); b++) for (let s = 0; s < Math.min(oldCap, cap); s++) this.cells[b * cap + s] = old[b * oldCap + s];
    this.grid.width = cap;
    this.grid.height = banks;
    this.image = this.gctx.createImageData(cap, banks);
    for (let i = 0; i < banks * cap; i++) this.paint(i);
  }

  clear() {
    const s = this.store;
    const banks = s.scenario ? s.scenario.banks : 32;
    this.banks = 0;
    this.cells = null;
    this.maxSlot = -1;
    this.dims(banks, 1);
    this.anims = [];
    this.opsRead = 0; // the store's pageOps log is read by index, never drained
    this.owners.clear();
    this.pageLevel = false;
    this.byRequest = false;
  }

  paint(i) {
    const c = this.cells[i];
    const col = c ? cellColor(c) : EMPTY;
    const d = this.image.data;
    d[i * 4] = col[0];
    d[i * 4 + 1] = col[1];
    d[i * 4 + 2] = col[2];
    d[i * 4 + 3] = 255;
  }

  set(bank, slot, value) {
    this.maxSlot = Math.max(this.maxSlot, slot);
    if (bank >= this.banks || slot >= this.cap) this.dims(Math.max(this.banks, bank + 1), Math.max(this.cap, 2 ** Math.ceil(Math.log2(slot + 1))));
    const i = bank * this.cap + slot;
    const prev = this.cells[i];
    if (prev) this.owners.set(prev.owner, (this.owners.get(prev.owner) || 1) - 1);
    if (value) this.owners.set(value.owner, (this.owners.get(value.owner) || 0) + 1);
    this.cells[i] = value;
    this.paint(i);
  }

  consume(live) {
    const s = this.store;
    const now = performance.now();
    if (s.banks) {
      const b = s.banks;
      const cap = Math.max(b.capacity, this.maxSlot + 1); // exact capacity unless a slot says otherwise
      if (b.used.length !== this.banks || cap !== this.cap) this.dims(Math.max(b.used.length, 1), cap);
    }
    const ops = s.pageOps;
    if (this.opsRead > ops.length) this.opsRead = 0;
    for (; this.opsRead < ops.length; this.opsRead++) {
      const e = ops[this.opsRead];
      switch (e.kind) {
        case "page_alloc":
          this.pageLevel = true;
          e.banks.forEach((b, j) => this.alloc(b, e.slots[j], e));
          break;
        case "page_free":
          e.banks.forEach((b, j) => this.free(b, e.slots[j], e, live, now));
          break;
        case "page_migrate": {
          const from = this.cells[e.from_bank * this.cap + e.from_slot] || { owner: e.owner, phase: "decode", req: e.request_id ?? null, holders: [] };
          this.set(e.from_bank, e.from_slot, null);
          this.set(e.to_bank, e.to_slot, from);
          if (live) this.anims.push({ type: "move", fb: e.from_bank, fs: e.from_slot, tb: e.to_bank, ts: e.to_slot, start: now });
          break;
        }
        case "page_evict":
          e.banks.forEach((b, j) => {
            this.set(b, e.slots[j], null);
            if (live) this.anims.push({ type: "cell", b, s: e.slots[j], color: FLASH.evict, start: now });
          });
          break;
        case "crc":
          if (live) for (const b of e.bad_banks) this.anims.push({ type: "row", b, color: FLASH.crc, start: now });
          break;
        case "fault":
          if (live) for (const b of e.banks) this.anims.push({ type: "row", b, color: FLASH.crc, start: now });
          break;
        case "alloc_fail":
          if (live) this.anims.push({ type: "all", color: FLASH.fail, start: now });
          break;
        default:
          break;
      }
    }
    if (this.anims.length > 400) this.anims.splice(0, this.anims.length - 400);
    this.gctx.putImageData(this.image, 0, 0);
    this.needsDraw = true;
  }

  alloc(bank, slot, e) {
    const req = e.request_id ?? null;
    if (req !== null) this.byRequest = true;
    const prev = bank < this.banks && slot < this.cap ? this.cells[bank * this.cap + slot] : null;
    if (prev && req !== null && prev.req !== null && prev.req !== req) {
      // held by another request already: the same block shared through the prefix cache
      this.set(bank, slot, { ...prev, holders: [...(prev.holders || []), req], shared: true });
      return;
    }
    this.set(bank, slot, { owner: e.owner, phase: e.phase, req, holders: req === null ? [] : [req], shared: e.owner === "prefix" });
  }

  free(bank, slot, e, live, now) {
    const i = bank * this.cap + slot;
    const prev = bank < this.banks && slot < this.cap ? this.cells[i] : null;
    const req = e.request_id ?? null;
    if (prev && req !== null && (prev.holders || []).length > 1) {
      // one holder of a shared block lets go; the block stays for the others
      const holders = prev.holders.filter((h) => h !== req);
      this.set(bank, slot, { ...prev, holders, req: holders[0], shared: holders.length > 1 });
      return;
    }
    this.set(bank, slot, null);
    if (!live || !prev || prev.req === null || prev.req === undefined) return;
    const r = this.serving && this.serving.requests.get(prev.req);
    const preempted = r && r.state === "preempted";
    this.anims.push({ type: "cell", b: bank, s: slot, color: preempted ? REQUEST_STATE.preempted : requestColor(prev.req), start: now, soft: !preempted });
  }

  cellRect(b, s) {
    const w = this.canvas.width / this.cap;
    const h = this.canvas.height / this.banks;
    return [s * w, b * h, Math.max(w, 2), Math.max(h - 1, 1)];
  }

  // Called every animation frame; returns true when it drew.
  render() {
    const s = this.store;
    const reset = s.ver.reset || 0;
    if (reset !== this.lastReset) {
      this.lastReset = reset;
      this.clear();
      this.consume(false); // a rebuild (seek/load): no animation for history
    }
    const stamp = s.stamp(["banks"]);
    if (stamp !== this.drawnStamp) {
      this.drawnStamp = stamp;
      this.consume(true);
      this.updateInfo();
    }
    if (!this.needsDraw && !this.anims.length) return false;
    this.needsDraw = false;
    const ctx = this.ctx;
    const W = this.canvas.width;
    const H = this.canvas.height;
    ctx.imageSmoothingEnabled = false;
    ctx.clearRect(0, 0, W, H);
    ctx.drawImage(this.grid, 0, 0, W, H);
    if (!this.pageLevel && s.banks) this.drawOccupancy(s.banks);
    // bank separators
    ctx.fillStyle = "rgba(22,22,30,0.9)";
    const rowH = H / this.banks;
    if (rowH >= 4) for (let b = 1; b < this.banks; b++) ctx.fillRect(0, Math.round(b * rowH) - 1, W, 1);
    this.drawAnims(performance.now());
    return true;
  }

  drawOccupancy(b) {
    // no page-level events: fill each bank's row to its used count
    const ctx = this.ctx;
    const rowH = this.canvas.height / this.banks;
    const colW = this.canvas.width / Math.max(b.capacity, 1);
    b.used.forEach((u, i) => {
      ctx.fillStyle = PHASE[this.store.phase] || PHASE.prefill;
      ctx.fillRect(0, i * rowH, u * colW, rowH - 1);
      const r = (b.reserved && b.reserved[i]) || 0;
      if (r) {
        ctx.fillStyle = ownerColor("hint");
        ctx.fillRect(u * colW, i * rowH, r * colW, rowH - 1);
      }
    });
  }

  drawAnims(now) {
    const ctx = this.ctx;
    const keep = [];
    for (const a of this.anims) {
      const age = now - a.start;
      const dur = a.type === "move" ? MOVE_MS : FLASH_MS;
      if (age > dur) continue;
      keep.push(a);
      const f = age / dur;
      ctx.globalAlpha = 1 - f * 0.7;
      if (a.type === "move") {
        const [x0, y0, w, h] = this.cellRect(a.fb, a.fs);
        const [x1, y1] = this.cellRect(a.tb, a.ts);
        const e = f < 0.5 ? 2 * f * f : 1 - (-2 * f + 2) ** 2 / 2; // ease in-out
        ctx.strokeStyle = FLASH.migrate;
        ctx.lineWidth = 1;
        ctx.beginPath();
        ctx.moveTo(x0 + w / 2, y0 + h / 2);
        ctx.lineTo(x1 + w / 2, y1 + h / 2);
        ctx.stroke();
        const x = x0 + (x1 - x0) * e;
        const y = y0 + (y1 - y0) * e;
        ctx.fillStyle = FLASH.migrate;
        ctx.fillRect(x, y, Math.max(w, 3), Math.max(h, 3)); // the page itself, flying to its new slot
        ctx.strokeStyle = "#16161e";
        ctx.strokeRect(x, y, Math.max(w, 3), Math.max(h, 3));
      } else if (a.type === "cell") {
        const [x, y, w, h] = this.cellRect(a.b, a.s);
        ctx.fillStyle = a.color;
        if (a.soft) ctx.fillRect(x, y, w, h); // a freed page fades out in its request's colour
        else ctx.fillRect(x - 2, y - 2, Math.max(w, 6) + 4, h + 4);
      } else if (a.type === "row") {
        const [, y, , h] = this.cellRect(a.b, 0);
        ctx.strokeStyle = a.color;
        ctx.lineWidth = 3;
        ctx.strokeRect(1, y + 1, this.canvas.width - 2, h);
      } else {
        ctx.strokeStyle = a.color;
        ctx.lineWidth = 6;
        ctx.strokeRect(3, 3, this.canvas.width - 6, this.canvas.height - 6);
      }
    }
    ctx.globalAlpha = 1;
    this.anims = keep;
  }

  updateInfo() {
    const s = this.store;
    let used = 0;
    let cap = this.banks * this.cap;
    if (s.banks) {
      used = s.banks.used.reduce((a, b) => a + b, 0);
      cap = s.banks.capacity * s.banks.used.length;
    } else for (const c of this.cells) if (c) used += 1;
    this.info.textContent = `${this.banks} banks × ${s.banks ? s.banks.capacity : this.cap} pages · ${used} used (${((100 * used) / (cap || 1)).toFixed(1)}%)` +
      (s.dropped ? ` · ${s.dropped} snapshots skipped (slow link)` : "");
    const owners = [...this.owners.entries()].filter(([, n]) => n > 0);
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
    if (this.byRequest) {
      const n = this.serving ? this.serving.order.length : 0;
      const ids = this.serving ? this.serving.order.slice(0, 3) : [];
      for (const id of ids) add(requestColor(id), `req ${id}`, `Pages of request ${id} (the same colour as its lane)`);
      if (n > ids.length) add(THEME.text, `… ${n} requests, one colour each`, "Hover a cell for its request");
      add(`rgb(${SHARED.join(",")})`, "shared (prefix cache)", "A block held by several requests at once: a prefix-cache hit");
      add(REQUEST_STATE.preempted, "freed by preemption", "Flashes: the KV of a preempted request is freed, to be recomputed");
      add(FLASH.evict, "evicted / CRC fail", "Flashes: pages evicted under pressure, banks failing the CRC check");
      this.legend.title = "";
      return;
    }
    add(PHASE.prefill, "prefill-written", "KV pages written during prefill (chunk by chunk)");
    add(PHASE.decode, "decode-written", "KV pages opened during decode (one every page_size tokens)");
    add(ownerColor("hint"), "hint-reserved", "Pages reserved for decode by the page hint");
    add(ownerColor("tenant"), "other tenants", "Pages held by other tenants (fragmentation)");
    add(FLASH.evict, "evicted / CRC fail", "Flashes: pages evicted under pressure, banks failing the CRC check");
    this.legend.title = owners.map(([o, n]) => `${o}: ${n} pages`).join(", ");
  }

  hover(ev) {
    if (!this.banks) return;
    const r = this.canvas.getBoundingClientRect();
    const b = Math.floor(((ev.clientY - r.top) / r.height) * this.banks);
    const s = Math.floor(((ev.clientX - r.left) / r.width) * this.cap);
    const c = this.cells && this.cells[b * this.cap + s];
    const used = this.store.banks ? this.store.banks.used[b] : null;
    this.canvas.title =
      `bank ${b}, slot ${s}: ${c ? (c.req !== null && c.req !== undefined ? `request ${(c.holders || [c.req]).join(", ")}${c.shared ? " (shared prefix block)" : ""}, written in ${c.phase}` : `${c.owner}, written in ${c.phase}`) : "free"}` +
      (used !== null && used !== undefined ? `\nbank ${b} holds ${used} of ${this.store.banks.capacity} pages` : "") +
      "\nOne row per KV bank, one cell per page (simulated at full size).";
  }
}
