// Slides: each panel and the whole dashboard as PNG or SVG, with a title. Plotly panels through
// Plotly.toImage (the figure with a title added), the bank map from its canvas, the topology from its SVG;
// the dashboard composes every visible panel at its on-screen place under one title.

import { THEME } from "./colors.js";

const SCALE = 2; // exported pixels per css pixel: sharp on a projector
const TITLE_H = 34;

function download(url, name) {
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
}

function loadImage(url) {
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => resolve(img);
    img.onerror = () => reject(new Error("image did not load"));
    img.src = url;
  });
}

function svgText(x, y, text, size, color, weight = 400) {
  const t = String(text).replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]);
  return `<text x="${x}" y="${y}" font-family="ui-monospace, Menlo, monospace" font-size="${size}" font-weight="${weight}" fill="${color}">${t}</text>`;
}

// the topology SVG with its CSS colours resolved inline, so it renders the same outside the page
function inlineSvg(svg) {
  const clone = svg.cloneNode(true);
  const src = svg.querySelectorAll("*");
  clone.querySelectorAll("*").forEach((n, i) => {
    const cs = getComputedStyle(src[i]);
    for (const p of ["fill", "stroke", "stroke-width", "opacity", "font-size", "font-family"]) n.style.setProperty(p, cs.getPropertyValue(p));
  });
  const r = svg.getBoundingClientRect();
  clone.setAttribute("xmlns", "http://www.w3.org/2000/svg");
  clone.setAttribute("width", r.width);
  clone.setAttribute("height", r.height);
  return new XMLSerializer().serializeToString(clone);
}

// A panel's picture without its title: {url (PNG data URL), w, h, el (what was drawn)} in css px
async function panelPNG(panel, plot = panel.querySelector(".js-plotly-plot")) {
  const canvas = panel.querySelector("canvas:not(.plot-overlay)");
  const svg = panel.querySelector("svg.topo");
  if (plot) {
    const w = plot.clientWidth;
    const h = plot.clientHeight;
    const url = await Plotly.toImage(plot, { format: "png", width: w, height: h, scale: SCALE });
    // what moves with the cursor is drawn on canvases over the plot (overlay.js): the picture shows them too
    const layers = [...panel.querySelectorAll("canvas.plot-overlay")].filter((c) => c.dataset.plot === plot.id && c.style.display === "block");
    if (!layers.length) return { url, w, h, el: plot };
    const c = document.createElement("canvas");
    c.width = w * SCALE;
    c.height = h * SCALE;
    const ctx = c.getContext("2d");
    ctx.drawImage(await loadImage(url), 0, 0, c.width, c.height);
    for (const o of layers) ctx.drawImage(o, 0, 0, c.width, c.height); // an overlay covers its plot exactly
    return { url: c.toDataURL("image/png"), w, h, el: plot };
  }
  if (canvas) return { url: canvas.toDataURL("image/png"), w: canvas.clientWidth, h: canvas.clientHeight, el: canvas };
  if (svg) {
    const r = svg.getBoundingClientRect();
    const url = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(inlineSvg(svg))}`;
    const img = await loadImage(url);
    const c = document.createElement("canvas");
    c.width = r.width * SCALE;
    c.height = r.height * SCALE;
    const ctx = c.getContext("2d");
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(0, 0, c.width, c.height);
    ctx.drawImage(img, 0, 0, c.width, c.height);
    return { url: c.toDataURL("image/png"), w: r.width, h: r.height, el: svg };
  }
  return null;
}

// A panel's HTML legends (the timeline's stage kinds, the lanes' states, the bank map's cells, ...): each key's
// swatch colour, text and place relative to `origin` (a DOMRect) shifted down by dy, so the picture keeps them.
function legendKeys(panel, origin, dy) {
  const out = [];
  for (const key of panel.querySelectorAll(".legend .key")) {
    if (!key.offsetParent || !key.textContent.trim()) continue;
    const r = key.getBoundingClientRect();
    const sw = key.querySelector("i");
    const cs = sw ? getComputedStyle(sw) : null;
    const bg = cs && cs.backgroundColor !== "rgba(0, 0, 0, 0)" ? cs.backgroundColor : cs ? cs.borderTopColor : null;
    out.push({ x: r.left - origin.left, y: r.top - origin.top + dy, h: r.height, text: key.textContent.trim(), color: getComputedStyle(key).color, swatch: bg });
  }
  return out;
}

// The text of an HTML panel's body (leaf elements outside its title, legends and forms), placed as on screen.
function panelTexts(panel, origin, dy) {
  const out = [];
  for (const n of panel.querySelectorAll("*")) {
    if (n.childElementCount || !n.offsetParent || n.closest("h2, form, .legend, .export, .form-error")) continue;
    const text = n.textContent.trim();
    if (!text) continue;
    const r = n.getBoundingClientRect();
    out.push({ x: r.left - origin.left, y: r.top - origin.top + dy, h: r.height, text, color: getComputedStyle(n).color, swatch: null });
  }
  return out;
}

// Text wrapped to maxW css px in the export font (the story and delta lines are never cut).
function wrap(text, maxW, size = 11) {
  const ctx = document.createElement("canvas").getContext("2d");
  ctx.font = `${size}px ui-monospace, Menlo, monospace`;
  const lines = [];
  let line = "";
  for (const word of String(text).split(/\s+/).filter(Boolean)) {
    const next = line ? `${line} ${word}` : word;
    if (line && ctx.measureText(next).width > maxW) {
      lines.push(line);
      line = word;
    } else line = next;
  }
  if (line) lines.push(line);
  return lines;
}

const LINE_H = 14;
const headHeight = (lines) => 26 + lines.length * LINE_H;

function panelTitle(panel, scenario) {
  return `${panel.dataset.title || panel.id} · ${scenario}`;
}

// A picture: {W, H, title, lines (text under the title), items: [{box: {x, y, w, h}, title, url, x, y, w, h}], keys}
async function toPNG(pic) {
  const { W, H, title, lines, items, keys } = pic;
  const c = document.createElement("canvas");
  c.width = W * SCALE;
  c.height = H * SCALE;
  const ctx = c.getContext("2d");
  ctx.scale(SCALE, SCALE);
  ctx.fillStyle = THEME.bg;
  ctx.fillRect(0, 0, W, H);
  ctx.fillStyle = THEME.bright;
  ctx.font = "600 16px ui-monospace, Menlo, monospace";
  ctx.fillText(title, 10, 20);
  ctx.fillStyle = THEME.text;
  ctx.font = "11px ui-monospace, Menlo, monospace";
  lines.forEach((l, i) => ctx.fillText(l, 10, 34 + i * LINE_H));
  for (const it of items) {
    if (it.box) {
      ctx.fillStyle = THEME.panel;
      ctx.fillRect(it.box.x, it.box.y, it.box.w, it.box.h);
      ctx.fillStyle = THEME.bright;
      ctx.font = "600 12px ui-monospace, Menlo, monospace";
      ctx.fillText(it.title, it.box.x + 6, it.box.y + 15);
    }
    if (!it.url) continue;
    const img = await loadImage(it.url);
    ctx.drawImage(img, it.x, it.y, it.w, it.h);
  }
  ctx.font = "11px ui-monospace, Menlo, monospace";
  ctx.textBaseline = "middle";
  for (const k of keys) {
    ctx.save();
    if (k.clip) {
      ctx.beginPath();
      ctx.rect(k.clip.x, k.clip.y, k.clip.w - 6, k.clip.h); // a long line stays inside its panel, as on screen
      ctx.clip();
    }
    if (k.swatch) {
      ctx.fillStyle = k.swatch;
      ctx.fillRect(k.x, k.y + k.h / 2 - 5, 10, 10);
    }
    ctx.fillStyle = k.color;
    ctx.fillText(k.text, k.x + (k.swatch ? 14 : 0), k.y + k.h / 2);
    ctx.restore();
  }
  return c.toDataURL("image/png");
}

function toSVG(pic) {
  const { W, H, title, lines, items, keys } = pic;
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">`,
    `<rect width="${W}" height="${H}" fill="${THEME.bg}"/>`, svgText(10, 20, title, 16, THEME.bright, 600)];
  lines.forEach((l, i) => parts.push(svgText(10, 34 + i * LINE_H, l, 11, THEME.text)));
  for (const it of items) {
    if (it.box) {
      parts.push(`<rect x="${it.box.x}" y="${it.box.y}" width="${it.box.w}" height="${it.box.h}" fill="${THEME.panel}"/>`);
      parts.push(svgText(it.box.x + 6, it.box.y + 15, it.title, 12, THEME.bright, 600));
    }
    if (it.url) parts.push(`<image x="${it.x}" y="${it.y}" width="${it.w}" height="${it.h}" href="${it.url}" xlink:href="${it.url}"/>`);
  }
  for (const k of keys) {
    if (k.swatch) parts.push(`<rect x="${k.x}" y="${k.y + k.h / 2 - 5}" width="10" height="10" fill="${k.swatch}"/>`);
    parts.push(svgText(k.x + (k.swatch ? 14 : 0), k.y + k.h / 2 + 4, k.text, 11, k.color));
  }
  parts.push("</svg>");
  return `data:image/svg+xml;charset=utf-8,${encodeURIComponent(parts.join(""))}`;
}

// One panel laid out as on screen, relative to `origin` (a DOMRect) and dy px down: its box, title, picture, legends.
// A panel with several plots (HBM memory and the KV blocks under it) gives one item per visible plot.
async function panelItem(panel, origin, dy) {
  const plots = [...panel.querySelectorAll(".js-plotly-plot")].filter((p) => p.offsetParent);
  const pics = plots.length ? await Promise.all(plots.map((p) => panelPNG(panel, p))) : [await panelPNG(panel, null)];
  const r = panel.getBoundingClientRect();
  const box = { x: r.left - origin.left, y: r.top - origin.top + dy, w: r.width, h: r.height };
  if (!pics[0]) {
    // an HTML panel (the deployment card): its box, title, text and legends, as on screen
    const keys = [...legendKeys(panel, origin, dy), ...panelTexts(panel, origin, dy)].map((k) => ({ ...k, clip: box }));
    return keys.length ? { items: [{ box, title: panel.dataset.title || panel.id, url: null }], keys } : null;
  }
  const items = pics.map((pic, i) => {
    const e = pic.el.getBoundingClientRect();
    return { ...pic, x: e.left - origin.left, y: e.top - origin.top + dy, box: i ? null : box, title: panel.dataset.title || panel.id };
  });
  return { items, keys: legendKeys(panel, origin, dy) };
}

export class Exporter {
  constructor(store, stats) {
    this.store = store;
    this.stats = stats; // stats.exports: what was exported (read by tests)
  }

  name() {
    return this.store.scenario ? this.store.scenario.name : "layerscope";
  }

  // one panel with its title and legends; a Plotly panel's SVG stays vector (Plotly's own SVG export)
  async panel(panel, format) {
    const title = panelTitle(panel, this.name());
    const plot = panel.querySelector(".js-plotly-plot");
    let url;
    if (plot && format === "svg") {
      const fig = { data: plot.data, layout: { ...plot.layout, title: { text: title, x: 0.01, font: { size: 14 } }, margin: { ...plot.layout.margin, t: (plot.layout.margin.t || 10) + 34 } } };
      url = await Plotly.toImage(fig, { format: "svg", width: plot.clientWidth, height: plot.clientHeight + 34 });
    } else {
      const r = panel.getBoundingClientRect();
      const got = await panelItem(panel, r, TITLE_H);
      if (!got) throw new Error(`panel ${panel.id} has nothing to export`);
      const pic = { W: r.width, H: r.height + TITLE_H, title, lines: [], items: got.items, keys: got.keys };
      url = format === "svg" ? toSVG(pic) : await toPNG(pic);
    }
    return this.done(url, `${this.name()}-${panel.id}.${format}`, format);
  }

  // every visible panel of the grid, at its place with its legends, under the preset's title, its story line and
  // its whole delta line (wrapped, never cut)
  async dashboard(format) {
    const grid = document.getElementById("panels");
    const g = grid.getBoundingClientRect();
    const text = (id) => document.getElementById(id).textContent.trim();
    const lines = [...wrap(text("story-line"), g.width - 20), ...wrap(text("delta-line"), g.width - 20)];
    const head = headHeight(lines);
    const items = [];
    const keys = [];
    for (const panel of grid.querySelectorAll(".panel")) {
      if (panel.classList.contains("collapsed") || !panel.offsetParent) continue;
      const got = await panelItem(panel, g, head);
      if (!got) continue;
      items.push(...got.items);
      keys.push(...got.keys);
    }
    const sc = this.store.scenario;
    const pic = { W: g.width, H: g.height + head, title: `LayerScope · ${sc ? sc.title || sc.name : ""}`, lines, items, keys };
    this.lastPicture = { lines, keys: keys.map((k) => k.text), items: items.filter((it) => it.box).map((it) => it.title), plots: items.length }; // read by tests
    const url = format === "svg" ? toSVG(pic) : await toPNG(pic);
    return this.done(url, `${this.name()}-dashboard.${format}`, format);
  }

  done(url, name, format) {
    this.stats.exports = this.stats.exports || [];
    this.stats.exports.push({ name, format, bytes: url.length, head: url.slice(0, 30) });
    this.lastUrl = url; // the last picture (tests decode it)
    download(url, name);
    return name;
  }
}

// export buttons in each panel's title bar
export function addPanelButtons(exporter, toast) {
  for (const panel of document.querySelectorAll("#panels .panel")) {
    const h2 = panel.querySelector("h2");
    if (!h2 || h2.querySelector(".export")) continue;
    const box = document.createElement("span");
    box.className = "export";
    for (const f of ["png", "svg"]) {
      const b = document.createElement("button");
      b.textContent = f.toUpperCase();
      b.title = `Export this panel as ${f.toUpperCase()} with a title (for slides)`;
      b.setAttribute("aria-label", `export ${(panel.dataset.title || panel.id).toLowerCase()} as ${f.toUpperCase()}`);
      b.dataset.testid = `export-${panel.id}-${f}`;
      b.setAttribute("data-testid", `export-${panel.id}-${f}`);
      b.addEventListener("click", () => exporter.panel(panel, f).then((n) => toast(`exported ${n}`)).catch((e) => toast(`export failed: ${e.message}`, "error")));
      box.append(b);
    }
    h2.append(box);
  }
}
