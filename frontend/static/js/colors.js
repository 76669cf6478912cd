// One colour per entity, used by every view and by the offline report (export/report.py reads the same
// values from frontend/static/js/palette.json): stage kinds, phases, the two runs of a comparison, bank
// cell states, thresholds. Two themes: "dark" (the profiler look) and "light" (a high-contrast presenter
// theme with larger fonts, ?theme=light). setTheme() swaps the values in place, so every import stays live.
// Text colours meet WCAG AA (4.5:1) on their theme's panel; graphics colours 3:1 (tests/browser check it).

import PALETTES from "./palette.js";

export const STAGE_KIND = {};
export const PHASE = {};
export const BOUND = {};
export const RUN = {}; // main: the run as set; compare: its compare run (a comparison preset)
export const SERIES = {};
export const CELL = {}; // bank map cell states
export const THEME = {};
export let themeName = "dark";

export function setTheme(name) {
  const p = PALETTES[name] ? name : "dark";
  themeName = p;
  const pal = PALETTES[p];
  for (const [obj, key] of [[STAGE_KIND, "stage_kind"], [PHASE, "phase"], [BOUND, "bound"], [RUN, "run"], [SERIES, "series"], [CELL, "cell"], [THEME, "theme"]]) {
    for (const k of Object.keys(obj)) delete obj[k];
    Object.assign(obj, pal[key]);
  }
  FLASH.evict = CELL.evicted;
  FLASH.crc = CELL.crc_bad;
  FLASH.fail = CELL.evicted;
  FLASH.migrate = THEME.bright;
  return p;
}

export const FLASH = {};
setTheme("dark");

export function runColor(role) {
  return role === "compare" ? RUN.compare : RUN.main;
}

// Owners: the running sequence is coloured by the phase that wrote the page; hint-reserved and other
// tenants have their own cell colours.
export function ownerColor(owner) {
  if (owner === "hint") return CELL.hint;
  if (owner === "tenant") return CELL.tenant;
  return PHASE.decode;
}

export function stageColor(kind) {
  return STAGE_KIND[kind] || STAGE_KIND.overhead;
}

export function rgb(hex) {
  const n = parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

// A cell's colour: hint and tenant pages by owner, the sequence's pages by the phase that wrote them.
export function cellRGB(owner, phase) {
  if (owner === "hint" || owner === "tenant") return rgb(ownerColor(owner));
  return rgb(PHASE[phase] || PHASE.decode);
}

export function plotLayout(extra = {}) {
  const big = themeName === "light";
  const layout = {
    paper_bgcolor: THEME.paper,
    plot_bgcolor: THEME.plot,
    font: { color: THEME.text, size: big ? 13 : 11, family: "ui-monospace, Menlo, Consolas, monospace" },
    margin: { l: 56, r: 12, t: 8, b: 30 },
    showlegend: false,
    hoverlabel: { bgcolor: THEME.hoverbg, bordercolor: THEME.grid, font: { color: THEME.bright } },
    ...extra,
  };
  for (const k of ["xaxis", "yaxis", ...Object.keys(extra).filter((x) => /^[xy]axis\d+$/.test(x))]) {
    layout[k] = { gridcolor: THEME.grid, zerolinecolor: THEME.grid, linecolor: THEME.grid, ...(extra[k] || {}) };
  }
  return layout;
}

// Legends sit in their own strip above the plot (never over data): the plot's top margin makes room.
export function legendAbove(rows = 1) {
  return { orientation: "h", x: 0, xanchor: "left", y: 1, yanchor: "bottom", font: { size: themeName === "light" ? 12 : 10 }, bgcolor: "rgba(0,0,0,0)", _rows: rows };
}

// Plotly's own double-click reset and reset/autoscale buttons return to the ranges of the plot's first draw
// (before a run was loaded: 0-1 µs); time plots get the shared axis's reset instead (views/cursor.js).
export const PLOT_CONFIG = {
  displaylogo: false,
  responsive: true,
  doubleClick: false,
  modeBarButtonsToRemove: ["select2d", "lasso2d", "toImage", "resetScale2d", "autoScale2d"],
};

export function timeConfig(reset) {
  return {
    ...PLOT_CONFIG,
    modeBarButtonsToAdd: [{ name: "reset: the whole run", icon: Plotly.Icons.home, click: reset }],
  };
}
