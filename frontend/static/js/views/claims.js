// The article's stated figures beside what this run measured (loaded.claims) and, for a comparison preset,
// beside what its compare run measured (loaded.compare.claims): columns A and B in the runs' colours.

import { esc } from "../format.js";

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
      const cls = /^consistent/i.test(verdict) ? "ok" : /^off/i.test(verdict) ? "off" : "na";
      const b = other.get(c.id);
      const bCell = two ? `<td class="num" data-col="b">${esc(fmt(b ? b.simulated : null))}</td>` : "";
      return (
        `<tr title="${esc(c.explanation || "")}"><td>${esc(c.claim)}</td><td class="num">${esc(fmt(c.stated))} ${esc(c.unit || "")}</td>` +
        `<td class="num" data-col="a">${esc(fmt(c.simulated))}${two ? "" : ` ${esc(c.unit || "")}`}</td>${bCell}<td class="${cls}">${esc(verdict)}</td></tr>`
      );
    })
    .join("");
  const heads = two
    ? `<th class="a" title="Run A: ${esc(labels[0])}">A</th><th class="b" title="Run B: ${esc(labels[1])}">B</th>`
    : '<th title="What this run computes for the chosen model and GPU (simulated at full size)">this run</th>';
  el.innerHTML =
    (two ? `<p class="hint">A = <span class="a">${esc(labels[0])}</span> · B = <span class="b">${esc(labels[1])}</span>; verdict for A; hover a row for the physics</p>` : "") +
    '<table data-testid="claims-table">' +
    `<colgroup><col class="c-claim"><col class="c-stated"><col class="c-v">${two ? '<col class="c-v">' : ""}<col class="c-verdict"></colgroup>` +
    '<thead><tr><th title="What the article states">claim</th><th title="The article\'s figure">stated</th>' +
    `${heads}<th title="Consistent, or off by a stated factor; hover a row for the physical explanation">verdict</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function fmt(v) {
  if (v === null || v === undefined) return "—";
  return typeof v === "number" ? (Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3)) : v;
}
