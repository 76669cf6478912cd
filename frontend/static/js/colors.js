// One colour per entity, used by every view: stage kinds, owners, phases, bounds.

export const STAGE_KIND = {
  norm: "#7aa2f7",
  gemm: "#e0af68",
  attention: "#f7768e",
  moe: "#9ece6a",
  elementwise: "#7dcfff",
  memory: "#bb9af7",
  overhead: "#737aa2",
  scheduler: "#ff9e64",
  cache: "#bb9af7",
};

export const PHASE = { prefill: "#ff9e64", decode: "#2ac3de", idle: "#565f89", validate: "#c0caf5" };

export const BOUND = { compute: "#e0af68", memory: "#7dcfff", latency: "#737aa2" };

export const SERIES = {
  used: "#ff9e64",
  free: "#9ece6a",
  largest: "#2ac3de",
  kv: "#bb9af7",
  latency: "#2ac3de",
  sla: "#f7768e",
  band: "rgba(42,195,222,0.18)",
  compare: "#e0af68",
  distinct: "#ff9e64",
};

export const FLASH = { evict: "#ff5370", crc: "#ff5370", migrate: "#ffffff", fail: "#ff5370" };

// Owners: the running sequence is bright, hint-reserved and other tenants are muted.
const OWNER_FIXED = { hint: "#414868", tenant: "#3b3f51" };
const OWNER_PALETTE = ["#ff9e64", "#2ac3de", "#9ece6a", "#e0af68", "#bb9af7", "#7aa2f7", "#f7768e"];
const ownerIndex = new Map();

export function ownerColor(owner) {
  if (OWNER_FIXED[owner]) return OWNER_FIXED[owner];
  if (!ownerIndex.has(owner)) ownerIndex.set(owner, ownerIndex.size);
  return OWNER_PALETTE[ownerIndex.get(owner) % OWNER_PALETTE.length];
}

export function stageColor(kind) {
  return STAGE_KIND[kind] || "#a9b1d6";
}

// A cell's colour: the owner's hue, dimmer for prefill-written pages than decode-written ones.
export function cellRGB(owner, phase) {
  const hex = owner === "seq" || !OWNER_FIXED[owner] ? PHASE[phase] || ownerColor(owner) : OWNER_FIXED[owner];
  const n = parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

export const THEME = {
  paper: "#16161e",
  plot: "#1a1b26",
  grid: "#2a2e42",
  text: "#a9b1d6",
  muted: "#565f89",
};

export function plotLayout(extra = {}) {
  return {
    paper_bgcolor: THEME.paper,
    plot_bgcolor: THEME.plot,
    font: { color: THEME.text, size: 11, family: "ui-monospace, Menlo, Consolas, monospace" },
    margin: { l: 56, r: 12, t: 8, b: 30 },
    showlegend: false,
    hoverlabel: { bgcolor: "#24283b", bordercolor: "#414868", font: { color: "#c0caf5" } },
    xaxis: { gridcolor: THEME.grid, zerolinecolor: THEME.grid, linecolor: THEME.grid },
    yaxis: { gridcolor: THEME.grid, zerolinecolor: THEME.grid, linecolor: THEME.grid },
    ...extra,
  };
}

export const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] };

// Serving: one hue per request (golden-angle steps around the colour wheel, so neighbours differ), and the
// states of a request lane. The same request keeps its colour in the lanes, the bank map and the hovers.
export function requestColor(id) {
  const h = (id * 137.508) % 360;
  return `hsl(${h.toFixed(1)}, 70%, 62%)`;
}

export function requestRGB(id) {
  // hsl(h, 70%, 62%) as [r, g, b] for the bank map's ImageData
  const h = ((id * 137.508) % 360) / 360;
  const s = 0.7;
  const l = 0.62;
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

export const REQUEST_STATE = {
  waiting: "#414868",
  prefill: PHASE.prefill,
  decode: PHASE.decode,
  preempted: "#ff5370",
  recompute: "#e0af68",
  finished: "#9ece6a",
};

export const STEP_MIX = { prefill: PHASE.prefill, decode: PHASE.decode, budget: "#c0caf5", duration: "#bb9af7", cached: "#9ece6a" };
