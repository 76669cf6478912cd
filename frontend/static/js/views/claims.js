// The article's stated figures beside what this run measured (from loaded.claims).

import { esc } from "../format.js";

export function renderClaims(el, claims) {
  if (!claims || !claims.length) {
    el.innerHTML = '<p class="empty" data-testid="no-claims">No claims for this run.</p>';
    return;
  }
  const rows = claims
    .map((c) => {
      const verdict = String(c.verdict || "");
      const cls = /^consistent/i.test(verdict) ? "ok" : /^off/i.test(verdict) ? "off" : "na";
      return (
        `<tr title="${esc(c.explanation || "")}"><td>${esc(c.claim)}</td><td class="num">${esc(fmt(c.stated))} ${esc(c.unit || "")}</td>` +
        `<td class="num">${esc(fmt(c.simulated))} ${esc(c.unit || "")}</td><td class="${cls}">${esc(verdict)}</td></tr>`
      );
    })
    .join("");
  el.innerHTML =
    '<table><thead><tr><th title="What the article states">claim</th><th title="The article\'s figure">stated</th>' +
    '<th title="What this run computes for the chosen model and GPU (simulated at full size)">simulated</th>' +
    `<th title="Consistent, or off by a stated factor; hover a row for the physical explanation">verdict</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function fmt(v) {
  if (v === null || v === undefined) return "—";
  return typeof v === "number" ? (Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3)) : v;
}
