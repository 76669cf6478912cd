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

// A panel's picture without its title: {url (PNG data URL), w, h} in css px
async function panelPNG(panel) {
  const plot = panel.querySelector(".js-plotly-plot");
  const canvas = panel.querySelector("canvas");
  const svg = panel.querySelector("svg.topo");
  if (plot) {
    const w = plot.clientWidth;
    const h = plot.clientHeight;
    const url = await Plotly.toImage(plot, { format: "png", width: w, height: h, scale: SCALE });
    // what moves with the cursor is drawn on canvases over the plot (overlay.js): the picture shows them too
    const layers = [...panel.querySelectorAll("canvas.plot-overlay")].filter((c) => c.dataset.plot === plot.id && c.style.display === "block");
    if (!layers.length) return { url, w, h };
    const c = document.createElement("canvas");
    c.width = w * SCALE;
    c.height = h * SCALE;
    const ctx = c.getContext("2d");
    ctx.drawImage(await loadImage(url), 0, 0, c.width, c.height);
    for (const o of layers) ctx.drawImage(o, 0, 0, c.width, c.height); // an overlay covers its plot exactly
    return { url: c.toDataURL("image/png"), w, h };
  }
  if (canvas) return { url: canvas.toDataURL("image/png"), w: canvas.clientWidth, h: canvas.clientHeight };
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
    return { url: c.toDataURL("image/png"), w: r.width, h: r.height };
  }
  return null;
}

function panelTitle(panel, scenario) {
  return `${panel.dataset.title || panel.id} · ${scenario}`;
}

async function toPNG(items, W, H, title, sub) {
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
  if (sub) {
    ctx.fillStyle = THEME.text;
    ctx.font = "11px ui-monospace, Menlo, monospace";
    ctx.fillText(sub, 10, 31);
  }
  for (const it of items) {
    ctx.fillStyle = THEME.panel;
    ctx.fillRect(it.x, it.y, it.w, it.h + 18);
    ctx.fillStyle = THEME.bright;
    ctx.font = "600 12px ui-monospace, Menlo, monospace";
    ctx.fillText(it.title, it.x + 4, it.y + 13);
    const img = await loadImage(it.url);
    ctx.drawImage(img, it.x, it.y + 18, it.w, it.h);
  }
  return c.toDataURL("image/png");
}

function toSVG(items, W, H, title, sub) {
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">`,
    `<rect width="${W}" height="${H}" fill="${THEME.bg}"/>`, svgText(10, 20, title, 16, THEME.bright, 600)];
  if (sub) parts.push(svgText(10, 31, sub, 11, THEME.text));
  for (const it of items) {
    parts.push(`<rect x="${it.x}" y="${it.y}" width="${it.w}" height="${it.h + 18}" fill="${THEME.panel}"/>`);
    parts.push(svgText(it.x + 4, it.y + 13, it.title, 12, THEME.bright, 600));
    parts.push(`<image x="${it.x}" y="${it.y + 18}" width="${it.w}" height="${it.h}" href="${it.url}" xlink:href="${it.url}"/>`);
  }
  parts.push("</svg>");
  return `data:image/svg+xml;charset=utf-8,${encodeURIComponent(parts.join(""))}`;
}

export class Exporter {
  constructor(store, stats) {
    this.store = store;
    this.stats = stats; // stats.exports: what was exported (read by tests)
  }

  name() {
    return this.store.scenario ? this.store.scenario.name : "layerscope";
  }

  // one panel with its title; a Plotly panel's SVG stays vector (Plotly's own SVG export)
  async panel(panel, format) {
    const title = panelTitle(panel, this.name());
    const plot = panel.querySelector(".js-plotly-plot");
    let url;
    if (plot && format === "svg") {
      const fig = { data: plot.data, layout: { ...plot.layout, title: { text: title, x: 0.01, font: { size: 14 } }, margin: { ...plot.layout.margin, t: (plot.layout.margin.t || 10) + 34 } } };
      url = await Plotly.toImage(fig, { format: "svg", width: plot.clientWidth, height: plot.clientHeight + 34 });
    } else {
      const pic = await panelPNG(panel);
      if (!pic) throw new Error(`panel ${panel.id} has nothing to export`);
      const items = [{ ...pic, x: 0, y: TITLE_H - 20, title: panel.dataset.title || panel.id }];
      url = format === "svg" ? toSVG(items, pic.w, pic.h + TITLE_H, title, "") : await toPNG(items, pic.w, pic.h + TITLE_H, title, "");
    }
    return this.done(url, `${this.name()}-${panel.id}.${format}`, format);
  }

  // every visible panel of the grid, at its place, under the preset's title and story line
  async dashboard(format) {
    const grid = document.getElementById("panels");
    const g = grid.getBoundingClientRect();
    const head = 44;
    const items = [];
    for (const panel of grid.querySelectorAll(".panel")) {
      if (panel.classList.contains("collapsed") || !panel.offsetParent) continue;
      const pic = await panelPNG(panel);
      if (!pic) continue;
      const r = panel.getBoundingClientRect();
      items.push({ ...pic, x: r.left - g.left, y: r.top - g.top + head, w: r.width, h: Math.min(pic.h, r.height - 18), title: panel.dataset.title || panel.id });
    }
    const sc = this.store.scenario;
    const title = `LayerScope · ${sc ? sc.title || sc.name : ""}`;
    const sub = document.getElementById("delta-line").textContent || document.getElementById("story-line").textContent;
    const W = g.width;
    const H = g.height + head;
    const url = format === "svg" ? toSVG(items, W, H, title, sub) : await toPNG(items, W, H, title, sub);
    return this.done(url, `${this.name()}-dashboard.${format}`, format);
  }

  done(url, name, format) {
    this.stats.exports = this.stats.exports || [];
    this.stats.exports.push({ name, format, bytes: url.length, head: url.slice(0, 30) });
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
      b.dataset.testid = `export-${panel.id}-${f}`;
      b.setAttribute("data-testid", `export-${panel.id}-${f}`);
      b.addEventListener("click", () => exporter.panel(panel, f).then((n) => toast(`exported ${n}`)).catch((e) => toast(`export failed: ${e.message}`, "error")));
      box.append(b);
    }
    h2.append(box);
  }
}
