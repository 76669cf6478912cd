// The article's stated figures beside what LayerScope simulates (from loaded.claims). A claim the article made
// in its own setting is simulated there (a probe run of that setting); "this run" is the open run's own figure.
// A comparison preset adds its compare run's own figure (loaded.compare.claims): columns A and B in the runs'
// colours, so both runs read side by side. Rows that concern the open run (loaded.claims[i].concerns, in either
// run) lead; the rest fold away under a <details>. A serving run, which none of the article's figures concerns,
// leads with its SLO figures instead: TTFT, TPOT and ITL p50 / p99 of each run against the scenario's SLA.

import { esc } from "../format.js";

const VERDICT_HEAD = "; consistent, off (how many times apart), not-exercised, not-stated, input or setting; hover a row for the physical explanation";
const VERDICT_CLASS = { consistent: "ok", off: "off" };
const VERDICT_TITLE = {
  consistent: "within the claim's tolerance",
  off: "outside the claim's tolerance",
  "not-exercised": "the setting does not exercise this, or LayerScope does not model it",
  "not-stated": "the article's figure is not quoted in the source material",
  input: "the article's own constant, given to the simulator: nothing to compare",
  setting: "the scenario chose another value than the article's default: a choice, not a claim",
};

// claims: null while they are computed; runs: [{label, summary}] of the run and its compare run; slaMs: the
// scenario's sla_ms
export function renderClaims(el, claims, compare, labels = ["this run", "compare run"], runs = [], slaMs = null) {
  const slo = sloTable(runs, slaMs);
  if (claims === null) { // the server sends the claims after the first screen (the `details` message)
    el.innerHTML = slo + '<p class="hint" data-testid="claims-computing">Checking the article\'s claims against this run: computing…</p>';
    return;
  }
  if (!claims || !claims.length) {
    el.innerHTML = slo || '<p class="empty" data-testid="no-claims">No claims for this run.</p>';
    return;
  }
  const other = new Map(((compare && compare.claims) || []).map((c) => [c.id, c]));
  const two = other.size > 0;
  const mine = (c) => c.concerns !== false || Boolean(other.get(c.id) && other.get(c.id).concerns);
  const shown = claims.filter(mine);
  const folded = claims.filter((c) => !mine(c));
  const table = (list, testid) => claimsTable(list, other, two, labels, testid);
  const rest = folded.length
    ? `<details class="claims-rest" data-testid="claims-folded"><summary>${folded.length} claim${folded.length === 1 ? "" : "s"} this run does not exercise</summary>${table(folded, "claims-folded-table")}</details>`
    : "";
  el.innerHTML =
    slo +
    (two && shown.length ? `<p class="hint">A = <span class="a">${esc(labels[0])}</span> · B = <span class="b">${esc(labels[1])}</span>; hover a row for the physics and its setting</p>` : "") +
    (shown.length ? table(shown, "claims-table") : `<p class="hint" data-testid="no-claims">None of the article's figures concerns this run${slo ? ": its SLO figures are above" : ""}.</p>`) +
    rest;
}

function claimsTable(claims, other, two, labels, testid) {
  const rows = claims
    .map((c) => {
      const verdict = String(c.verdict || "");
      const cls = VERDICT_CLASS[verdict] || "na";
      const factor = typeof c.factor === "number" && isFinite(c.factor) ? ` (${c.factor.toPrecision(3)}x)` : "";
      // the unit once, under the claim: a number per column keeps the two-run table inside the side column
      const cell = (v, col = "") => `<td class="num"${col ? ` data-col="${col}"` : ""}>${esc(fmt(v))}</td>`;
      const unit = c.unit ? ` <span class="unit">(${breakable(c.unit)})</span>` : "";
      const title = `${c.explanation || ""}${c.setting ? `\nSimulated in: ${c.setting}` : ""}`;
      const b = other.get(c.id);
      const said = `class="${cls}" title="${esc(VERDICT_TITLE[verdict] || "")}">${breakable(verdict + factor)}`;
      // two runs: the verdict sits under the claim, so six columns of figures fit the side column at 1280 px
      return (
        `<tr title="${esc(title)}" data-verdict="${esc(verdict)}"><td>${breakable(c.claim)}${unit}${two ? `<br><span ${said}</span>` : ""}</td>` +
        `${cell(c.stated)}${cell(c.simulated)}${cell(c.run, "a")}${two ? cell(b ? b.run : null, "b") : ""}` +
        `${two ? "" : `<td ${said}</td>`}</tr>`
      );
    })
    .join("");
  const runHeads = two
    ? `<th class="a" title="The same figure in run A (${esc(labels[0])}), simulated at full size">A</th>` +
      `<th class="b" title="The same figure in run B (${esc(labels[1])}), simulated at full size">B</th>`
    : '<th title="The same figure in the run on screen (simulated at full size)">this run</th>';
  return (
    `<table data-testid="${testid}">` +
    `<colgroup><col class="c-claim"><col class="c-v"><col class="c-v"><col class="c-v">${two ? '<col class="c-v">' : '<col class="c-verdict">'}</colgroup>` +
    `<thead><tr><th title="What the article states${two ? VERDICT_HEAD : ""}">${two ? "claim, verdict" : "claim"}</th><th title="The article's figure">stated</th>` +
    '<th title="Simulated at full size in the claim\'s own setting: the article\'s (a probe run) for the figures it ' +
    'measured there, else this run; hover a row for the setting">simulated</th>' +
    runHeads +
    `${two ? "" : `<th title="${VERDICT_HEAD.slice(2)}">verdict</th>`}</tr></thead><tbody>${rows}</tbody></table>`
  );
}

const SLO = [["ttft", "TTFT", false], ["tpot", "TPOT", true], ["itl", "ITL", true]];

// A serving run's latency figures (whole model, as vllm bench serve reports them) against the scenario's SLA
// (sla_ms, on TPOT and ITL as the latency distributions draw it; the scenario states none for TTFT).
function sloTable(runs, slaMs) {
  const served = runs.filter((r) => r.summary && typeof r.summary.median_ttft_ms === "number");
  if (!served.length) return "";
  const heads = served.map((r, i) => `<th class="${"ab"[i]}" title="${esc(r.label)}">${served.length > 1 ? "AB"[i] + " " : ""}p50</th><th class="${"ab"[i]}" title="${esc(r.label)}">${served.length > 1 ? "AB"[i] + " " : ""}p99</th>`).join("");
  const ms = (v) => (typeof v === "number" && isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toPrecision(3)) : "—");
  const rows = SLO.map(([key, name, bound]) => {
    const sla = bound && typeof slaMs === "number" ? slaMs : null;
    const cells = served.map((r) => {
      const p99 = r.summary[`p99_${key}_ms`];
      const miss = sla !== null && typeof p99 === "number" && p99 > sla;
      return `<td class="num">${ms(r.summary[`median_${key}_ms`])}</td><td class="num ${sla === null ? "" : miss ? "off" : "ok"}" data-slo="${key}">${ms(p99)}</td>`;
    }).join("");
    return `<tr><td>${name}</td>${cells}<td class="num">${sla === null ? "—" : `≤ ${ms(sla)}`}</td></tr>`;
  }).join("");
  return (
    '<p class="hint">SLO figures of this run, whole model (simulated at full size), against the scenario\'s SLA ' +
    "(sla_ms, on TPOT and ITL); red: the p99 misses it</p>" +
    `<table data-testid="slo-table" class="slo"><thead><tr><th title="milliseconds, whole model">ms</th>${heads}<th title="The scenario's sla_ms">SLA</th></tr></thead><tbody>${rows}</tbody></table>`
  );
}

// escaped text that may wrap after a hyphen or a slash ("not-exercised", "bits/weight"), never mid-word
function breakable(s) {
  return esc(s).replace(/([-/])/g, "$1<wbr>");
}

function fmt(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v !== "number") return v;
  if (v !== 0 && Math.abs(v) < 1e-3) return v.toExponential(2); // 4.53e-5, not 0.0000453
  return Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3);
}
