// The story bar: one line saying what the user is looking at, and for a comparison preset the delta line
// ("naive allocator: +1.2% decode step; the article claims +165%"). Where physics makes the article's
// effect small, the line says so loudly with the numbers: that is the preset's lesson.

import { esc, us } from "../format.js";

// headline figures of a pair, in the order a reader cares about (summary keys)
const FIGURES = [
  ["prefill_layer_us", "prefill layer"],
  ["decode_step_p50_us", "decode step"],
  ["jitter_us", "decode jitter"],
  ["cross_bank_reads", "cross-bank reads"],
];
// the article's own figures for a pair, from its claims: [claim id of B, claim id of A]
const ARTICLE = { allocator: ["decode_no_allocator", "decode_step", "decode step"] };
const SMALL = 0.05; // an effect under 5% is "small" and said loudly

function pct(a, b) {
  return a ? (100 * (b - a)) / a : null;
}

function signed(p) {
  return `${p >= 0 ? "+" : "−"}${Math.abs(p) < 10 ? Math.abs(p).toFixed(1) : Math.abs(p).toFixed(0)}%`;
}

export function storyLine(store) {
  const sc = store.scenario;
  if (!sc) return "";
  const runs = store.runs;
  const what = `<b>${esc(sc.title || sc.name)}</b> — ${esc(sc.model)} / ${esc(sc.runtime)} on ${esc(sc.gpu)}: ` +
    `${sc.prompt_len}-token prompt in ${sc.chunk_size}-token chunks, ${sc.decode_steps} decode steps, ${us(store.extent)} of one layer`;
  const two = runs.length > 1 ? `, run twice: <span class="a">A ${esc(runs[0].label)}</span> vs <span class="b">B ${esc(runs[1].label)}</span>` : "";
  return `${what}${two}. The whole run is drawn; the bright line is the playback time.`;
}

export function deltaLine(store) {
  const [a, b] = store.runs;
  if (!a || !b) return "";
  const parts = [];
  let biggest = 0;
  let timed = 0; // time figures both runs have
  for (const [key, name] of FIGURES) {
    const va = Number(a.summary[key]);
    const vb = Number(b.summary[key]);
    if (!Number.isFinite(va) || !Number.isFinite(vb) || (va === 0 && vb === 0)) continue;
    const p = pct(va, vb);
    if (p === null) continue;
    if (key.endsWith("_us")) {
      biggest = Math.max(biggest, Math.abs(p) / 100); // "small" is judged on times
      timed += 1;
    }
    if (Math.abs(p) < 0.05) continue;
    const fmtv = key.endsWith("_us") ? (v) => us(v) : (v) => String(v);
    parts.push(`${signed(p)} ${name} (${fmtv(va)} → ${fmtv(vb)})`);
  }
  let text = `<span class="b">${esc(b.label)}</span> vs <span class="a">${esc(a.label)}</span>: ${parts.slice(0, 3).join(", ") || (timed ? "no difference on the headline figures" : "none of the headline figures (prefill layer, decode step, jitter) applies to both runs: compare them in the panels")}`;
  const varied = store.scenario.compare ? Object.keys(store.scenario.compare.set || {}) : [];
  const art = varied.map((k) => ARTICLE[k]).find(Boolean);
  const claims = store.loaded ? store.loaded.claims || [] : [];
  if (art) {
    const cb = claims.find((c) => c.id === art[0]);
    const ca = claims.find((c) => c.id === art[1]);
    if (cb && ca && cb.stated && ca.stated) text += `; the article claims ${signed(pct(ca.stated, cb.stated))} ${art[2]} (${ca.stated} → ${cb.stated} ${esc(ca.unit)})`;
  }
  if (timed && biggest < SMALL) text += `. <span class="loud">Physics says the effect is small here: under ${SMALL * 100}% on every time figure.</span>`;
  return text;
}
