// The palette: plain JSON after `export default` (export/report.py reads this file too, so the offline
// report uses the same colour per entity). Text colours: WCAG AA 4.5:1 on theme.panel; graphics 3:1.
// request: one hue per request, golden-angle steps inside [hue_start, hue_start + hue_span) degrees, so no request
// takes the reds of errors (evicted, CRC mismatch, SLA: hues 310-40) or reads as one.
export default {
  "dark": {
    "theme": {"bg": "#101014", "panel": "#16161e", "paper": "#16161e", "plot": "#1a1b26", "grid": "#2f3349", "text": "#b8c0e0",
              "bright": "#dfe4ff", "muted": "#8f97bd", "hoverbg": "#24283b", "empty": "#20222f"},
    "stage_kind": {"norm": "#7aa2f7", "gemm": "#e0af68", "attention": "#f7768e", "moe": "#9ece6a", "elementwise": "#7dcfff",
                   "memory": "#bb9af7", "cache": "#bb9af7", "overhead": "#a0a6c4", "scheduler": "#d7b98e",
                   "collective": "#ffe066"},
    "phase": {"prefill": "#ff9e64", "decode": "#2ac3de", "idle": "#8f97bd", "validate": "#c0caf5"},
    "bound": {"compute": "#e0af68", "memory": "#7dcfff", "latency": "#a0a6c4"},
    "run": {"main": "#e8ebff", "compare": "#ff5fd2"},
    "series": {"sla": "#ff5370", "threshold": "#ff5370", "band": "rgba(232,235,255,0.14)", "band_compare": "rgba(255,95,210,0.16)", "error": "#ffcb6b"},
    "cell": {"empty": "#20222f", "hint": "#3350d0", "tenant": "#a3a9c2", "evicted": "#ff3355", "stale": "#fff59d", "crc_bad": "#ff3355", "crc_ok": "#9ece6a"},
    "request": {"hue_start": 40, "hue_span": 270, "saturation": 0.7, "lightness": 0.62}
  },
  "light": {
    "theme": {"bg": "#f4f5f8", "panel": "#ffffff", "paper": "#ffffff", "plot": "#ffffff", "grid": "#d0d4de", "text": "#1f2330",
              "bright": "#000000", "muted": "#4a5068", "hoverbg": "#ffffff", "empty": "#eceef3"},
    "stage_kind": {"norm": "#1f5fd1", "gemm": "#a56a00", "attention": "#c8102e", "moe": "#2e7d32", "elementwise": "#00838f",
                   "memory": "#6a3fb5", "cache": "#6a3fb5", "overhead": "#5f6478", "scheduler": "#8a5a2b",
                   "collective": "#827717"},
    "phase": {"prefill": "#d35400", "decode": "#00796b", "idle": "#5f6478", "validate": "#3949ab"},
    "bound": {"compute": "#a56a00", "memory": "#00838f", "latency": "#5f6478"},
    "run": {"main": "#111111", "compare": "#c2187a"},
    "series": {"sla": "#c62828", "threshold": "#c62828", "band": "rgba(17,17,17,0.10)", "band_compare": "rgba(194,24,122,0.12)", "error": "#8d5d00"},
    "cell": {"empty": "#eceef3", "hint": "#1a3aa8", "tenant": "#9aa0b5", "evicted": "#d50032", "stale": "#f4d03f", "crc_bad": "#d50032", "crc_ok": "#2e7d32"},
    "request": {"hue_start": 40, "hue_span": 270, "saturation": 0.7, "lightness": 0.42}
  }
};
