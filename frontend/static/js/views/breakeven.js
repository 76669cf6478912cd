// The sweep panel's break-even view (issue 21): over input length x request rate, which of two deployments gives the
// higher goodput per GPU (request_goodput / GPUs at the SLOs, simulated), and by what margin. The data is
// `layerscope plan --request-rate R --slo ... --break-even 'A;B' --json` (its `cells`), loaded as a sweep file.

import { THEME, plotLayout } from "../colors.js";
import { esc } from "../format.js";

const A_COLOUR = "#7aa2f7";
const B_COLOUR = "#ff9e64";

export function isBreakEven(data) {
  return !!data && Array.isArray(data.cells) && Array.isArray(data.deployments) && data.deployments.length === 2;
}

// cells -> one heatmap: x request rate, y input length, colour the winner (signed margin: A > 0, B < 0), text the margin
export function breakEvenFigure(data) {
  const [a, b] = data.deployments;
  const rates = [...new Set(data.cells.map((c) => c.request_rate))].sort((p, q) => p - q);
  const lens = [...new Set(data.cells.map((c) => c.input_len))].sort((p, q) => p - q);
  const at = new Map(data.cells.map((c) => [`${c.input_len}|${c.request_rate}`, c]));
  const cell = (n, r) => at.get(`${n}|${r}`);
  const signed = (c) => (c ? (c.winner === a ? 1 : -1) * Math.min(1, c.margin ?? 1) : null);
  const label = (c) => (c ? `${c.winner === a ? "A" : "B"} ${c.margin === null ? "only" : `+${Math.round(c.margin * 100)}%`}` : "");
  const hover = (c) => (c ? `input ${c.input_len} tokens · ${c.request_rate} req/s<br>${esc(a)}: ${c.goodput_per_gpu[a].toFixed(4)} req/s/GPU` +
    `<br>${esc(b)}: ${c.goodput_per_gpu[b].toFixed(4)} req/s/GPU<br><b>${esc(c.winner)}</b> ${c.margin === null ? "(the other meets no SLO)" : `by ${(c.margin * 100).toFixed(1)}%`}` : "");
  const z = lens.map((n) => rates.map((r) => signed(cell(n, r))));
  const trace = {
    type: "heatmap", meta: "break-even", x: rates.map(String), y: lens.map(String), z, zmin: -1, zmax: 1,
    colorscale: [[0, B_COLOUR], [0.5, THEME.paper], [1, A_COLOUR]], showscale: false,
    text: lens.map((n) => rates.map((r) => label(cell(n, r)))), texttemplate: "%{text}", textfont: { color: THEME.text, size: 12 },
    customdata: lens.map((n) => rates.map((r) => hover(cell(n, r)))), hovertemplate: "%{customdata}<extra>simulated goodput per GPU</extra>",
  };
  const slo = Object.entries(data.slo || {}).map(([k, v]) => `${k} ${v} ms`).join(", ");
  const layout = plotLayout({
    margin: { l: 70, r: 24, t: 30, b: 40 },
    title: { text: `A ${esc(a)} vs B ${esc(b)}: higher goodput per GPU at ${esc(slo)}`, font: { size: 12, color: THEME.text } },
    xaxis: { title: { text: "request rate (req/s)" }, type: "category" },
    yaxis: { title: { text: "input length (tokens)" }, type: "category" },
  });
  return { traces: [trace], layout };
}
