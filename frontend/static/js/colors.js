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

// Serving: one hue per request (golden-angle steps around the colour wheel, so neighbours differ), and the
// states of a request lane. The same request keeps its colour in the lanes, the bank map and the hovers.
// Lighter on the dark theme, darker on the light one, so a request's colour keeps 3:1 against the panel. The hues
// skip the error reds (palette.js "request"; export/palette.py request_colour gives the report the same colours).
const requestPal = () => PALETTES[themeName].request;

export function requestHue(id) {
  const p = requestPal();
  return p.hue_start + ((id * 137.508) % p.hue_span);
}

export function requestColor(id) {
  const p = requestPal();
  return `hsl(${requestHue(id).toFixed(1)}, ${Math.round(p.saturation * 100)}%, ${Math.round(p.lightness * 100)}%)`;
}

export function requestRGB(id) {
  // requestColor as [r, g, b] for the bank map's ImageData
  const h = requestHue(id) / 360;
  const s = requestPal().saturation;
  const l = requestPal().lightness;
  const q = l + s - l * s;
  const p = 2 * l - q;
  const f = (t) => {
    const u = t < 0 ? t + 1 : t > 1 ? t - 1 : t;
    if (u < 1 / 6) return p + (q - p) * 6 * u;
    if (u < 1 / 2) return q;
    if (u < 2 / 3) return p + (q - p) * (2 / 3 - u) * 6;
    return p;
  };
  return [f(h + 1 / 3), f(h), f(h - 1 / 3)].map((v) => Math.round(v * 255));
}

// a request's colour as "#rrggbb" (the bank map paints hex colours); shared blocks mixed two parts in three with white
export function requestHex(id, shared = false) {
  let c = requestRGB(id);
  if (shared) c = c.map((v) => Math.round((v + 2 * 245) / 3));
  return `#${c.map((v) => v.toString(16).padStart(2, "0")).join("")}`;
}

// getters: the theme's colours at the time of drawing (setTheme swaps PHASE, CELL, THEME in place)
export const REQUEST_STATE = {
  get waiting() { return THEME.muted; },
  get prefill() { return PHASE.prefill; },
  get decode() { return PHASE.decode; },
  get preempted() { return CELL.evicted; },
  get recompute() { return STAGE_KIND.memory; }, // KV computed again: the memory kind's hue, apart from prefill's
  get kv_wait() { return STAGE_KIND.scheduler; }, // prefilled, waiting for decode blocks (disaggregated back-pressure)
  get transfer() { return STAGE_KIND.collective; }, // the KV crossing between pools: GPU-to-GPU traffic's hue
  get finished() { return CELL.crc_ok; },
};

export const STEP_MIX = {
  get prefill() { return PHASE.prefill; },
  get decode() { return PHASE.decode; },
  get budget() { return THEME.bright; },
  get duration() { return STAGE_KIND.memory; },
  get cached() { return CELL.crc_ok; },
};
