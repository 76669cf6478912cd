// Numbers with units, the way a profiler prints them.

export function us(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (Math.abs(v) >= 1e6) return `${(v / 1e6).toFixed(3)} s`;
  if (Math.abs(v) >= 1e3) return `${(v / 1e3).toFixed(2)} ms`;
  return `${v.toFixed(1)} µs`;
}

export function bytes(v) {
  if (!Number.isFinite(v)) return String(v);
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v.toFixed(i ? 2 : 0)} ${units[i]}`;
}

export function flops(v) {
  if (!Number.isFinite(v)) return String(v);
  const units = ["", "K", "M", "G", "T", "P"];
  let i = 0;
  while (Math.abs(v) >= 1000 && i < units.length - 1) {
    v /= 1000;
    i += 1;
  }
  return `${v.toFixed(2)} ${units[i]}FLOP`;
}

// A measured figure as a reader quotes it: four significant digits, integers and non-numbers as they are
// (a tour check's "whole run: 10.21", never "10.212078139806106").
export function figure(v) {
  // a ratio over zero (page-hint-jitter's migrations/0), which JSON carries as the string "Infinity"
  if (v === Infinity || v === "Infinity") return "∞";
  if (v === -Infinity || v === "-Infinity") return "−∞";
  if (typeof v !== "number" || !Number.isFinite(v) || Number.isInteger(v)) return String(v);
  return String(+v.toPrecision(4));
}

export function pct(v) {
  return Number.isFinite(v) ? `${(v * 100).toFixed(0)}%` : "–";
}

export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
