// The article's stated figures beside what LayerScope simulates (from loaded.claims). A claim the article made
// in its own setting is simulated there (a probe run of that setting); "this run" is the open run's own figure.
// A comparison preset adds its compare run's own figure (loaded.compare.claims): columns A and B in the runs'
// colours, so both runs read side by side.

import { esc } from "../format.js";

const VERDICT_CLASS = { consistent: "ok", off: "off" };
const VERDICT_TITLE = {
  consistent: "within the claim's tolerance",
  off: "outside the claim's tolerance",
  "not-exercised": "the setting does not exercise this, or LayerScope does not model it",
  "not-stated": "the article's figure is not quoted in the source material",
  input: "the article's own constant, given to the simulator: nothing to compare",
  setting: "the scenario chose another value than the article's default: a choice, not a claim",
};

export function renderClaims(el, claims, compare, labels = ["this run", "compare run"]) {
  if (!claims || !claims.length) {
    el.innerHTML = '<p class="empty" data-testid="no-claims">No claims for this run.</p>';
    return;
  }
  const other = new Map(((compare && compare.claims) || []).map((c) => [c.id, c]));
  const two = other.size > 0;
  const rows = claims
    .map((c) => {
      const verdict = String(c.verdict || "");
      const cls = VERDICT_CLASS[verdict] || "na";
      const factor = typeof c.factor === "number" && isFinite(c.factor) ? ` (${c.factor.toPrecision(3)}x)` : "";
      const cell = (v, col = "") => `<td class="num"${col ? ` data-col="${col}"` : ""}>${esc(fmt(v))}${v === null || v === undefined ? "" : ` ${esc(c.unit || "")}`}</td>`;
      const title = `${c.explanation || ""}${c.setting ? `\nSimulated in: ${c.setting}` : ""}`;
      const b = other.get(c.id);
      return (
        `<tr title="${esc(title)}" data-verdict="${esc(verdict)}"><td>${esc(c.claim)}</td>` +
        `${cell(c.stated)}${cell(c.simulated)}${cell(c.run, "a")}${two ? cell(b ? b.run : null, "b") : ""}` +
        `<td class="${cls}" title="${esc(VERDICT_TITLE[verdict] || "")}">${esc(verdict + factor)}</td></tr>`
      );
    })
    .join("");
  const runHeads = two
    ? `<th class="a" title="The same figure in run A (${esc(labels[0])}), simulated at full size">A</th>` +
      `<th class="b" title="The same figure in run B (${esc(labels[1])}), simulated at full size">B</th>`
    : '<th title="The same figure in the run on screen (simulated at full size)">this run</th>';
  el.innerHTML =
    (two ? `<p class="hint">A = <span class="a">${esc(labels[0])}</span> · B = <span class="b">${esc(labels[1])}</span>; hover a row for the physics and its setting</p>` : "") +
    '<table data-testid="claims-table">' +
    `<colgroup><col class="c-claim"><col class="c-v"><col class="c-v"><col class="c-v">${two ? '<col class="c-v">' : ""}<col class="c-verdict"></colgroup>` +
    '<thead><tr><th title="What the article states">claim</th><th title="The article\'s figure">stated</th>' +
    '<th title="Simulated at full size in the claim\'s own setting: the article\'s (a probe run) for the figures it ' +
    'measured there, else this run; hover a row for the setting">simulated</th>' +
    runHeads +
    '<th title="consistent, off (how many times apart), not-exercised, not-stated, input or setting; hover a row for ' +
    `the physical explanation">verdict</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function fmt(v) {
  if (v === null || v === undefined) return "—";
  return typeof v === "number" ? (Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3)) : v;
}
