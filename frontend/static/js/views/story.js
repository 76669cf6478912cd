// The story bar: one line saying what the user is looking at, and for a comparison preset the delta line
// ("naive allocator: +1.2% decode step; the article claims +165%"). Where physics makes the article's
// effect small, the line says so loudly with the numbers: that is the preset's lesson.

import { esc, us } from "../format.js";

// headline figures of a pair, in the order a reader cares about (summary keys)
// [one layer's key, the whole model's key (ms) or null, name]: the units switch picks the column
const FIGURES = [
  ["prefill_layer_us", "prefill_model_ms", "prefill"],
  ["decode_step_p50_us", "decode_model_step_ms", "decode step"],
  ["jitter_us", null, "decode jitter"],
  ["cross_bank_reads", null, "cross-bank reads"],
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

// A length range of vLLM's random dataset: [len * (1 - r), len * (1 + r)] (runtime/workload.py _lengths)
function lengths(n, r) {
  if (!r) return `${n}`;
  return `${Math.max(1, Math.floor(n * (1 - r)))}-${Math.max(1, Math.floor(n * (1 + r)))}`;
}

// A serving run's workload and deployment: "40 requests, 200-7800 in / 6-249 out, Poisson 4/s, 8 x H200 tp 8"
export function workloadText(sc) {
  const w = sc.workload;
  const d = sc.deployment || {};
  const tp = d.tp || 1;
  const gpus = tp * (d.pp || 1);
  const src = w.trace ? `trace ${esc(String(w.trace).split("/").pop())}` : `${lengths(w.input_len, w.range_ratio)} in / ${lengths(w.output_len, w.range_ratio)} out`;
  const rate = w.request_rate === null || w.request_rate === undefined || !Number.isFinite(Number(w.request_rate)) ? "all at once" : `Poisson ${+Number(w.request_rate).toPrecision(3)}/s`;
  const cap = w.max_concurrency ? `, at most ${w.max_concurrency} in flight` : "";
  return `${w.num_requests} requests, ${src}, ${rate}${cap}, ${gpus} x ${esc(String(sc.gpu).toUpperCase())} tp ${tp}`;
}

export function isServing(sc) {
  return Boolean(sc && sc.workload && sc.workload.num_requests > 1);
}

// The run's length in the units on screen (the clock's: axis.clockUs), and what those units are.
function runLength(store) {
  const ax = store.axis;
  const what = ax.units === "model" ? "the whole model" : ax.clock === "model" ? "one layer of each step" : "one layer";
  return `${us(ax.clockUs(store.extent))} of ${what}`;
}

export function storyLine(store) {
  const sc = store.scenario;
  if (!sc) return "";
  const runs = store.runs;
  const head = `<b>${esc(sc.title || sc.name)}</b> — ${esc(sc.model)} / ${esc(sc.runtime)} on ${esc(sc.gpu)}: `;
  const body = isServing(sc) ? `${workloadText(sc)}, ${runLength(store)}`
    : `${sc.prompt_len}-token prompt in ${sc.chunk_size}-token chunks, ${sc.decode_steps} decode steps, ${runLength(store)}`;
  const two = runs.length > 1 ? `, run twice: <span class="a">A ${esc(runs[0].label)}</span> vs <span class="b">B ${esc(runs[1].label)}</span>` : "";
  return `${head}${body}${two}. The whole run is drawn; the bright line is the playback time.`;
}

// Serving figures of a pair, as vllm bench serve names them: [summary key, name, "ratio" (x3.75) or "pct"]
const SERVING = [
  ["p99_itl_ms", "p99 ITL", "pct"],
  ["median_tpot_ms", "median TPOT", "pct"],
  ["mean_ttft_ms", "mean TTFT", "ratio"],
  ["output_throughput", "output tok/s", "pct"],
];

function ms(v) {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toPrecision(3);
}

// One layer of an engine step (units "one layer"): the mean and p99 step as one decoder layer runs it.
function layerDelta(a, b) {
  const parts = [];
  for (const [key, name] of [["step_layer_mean_us", "mean step"], ["step_layer_p99_us", "p99 step"]]) {
    const va = Number(a.summary[key]);
    const vb = Number(b.summary[key]);
    if (Number.isFinite(va) && Number.isFinite(vb) && va > 0) parts.push(`${name} ${us(va)} → ${us(vb)} (${signed(pct(va, vb))})`);
  }
  return parts.join(", ") || "no per-layer step figures";
}

// "p99 ITL 688 → 206 ms (−70%), mean TTFT ×3.75 (2920 → 10964 ms)": serving figures are whole-model (what a
// client measures) whatever the units on screen.
function servingDelta(a, b) {
  const parts = [];
  for (const [key, name, how] of SERVING) {
    const va = Number(a.summary[key]);
    const vb = Number(b.summary[key]);
    if (!Number.isFinite(va) || !Number.isFinite(vb) || va <= 0) continue;
    const unit = key.endsWith("_ms") ? " ms" : "";
    const ratio = vb / va;
    if (how === "ratio" && (ratio >= 1.5 || ratio <= 1 / 1.5)) parts.push(`${name} ×${ratio >= 1 ? ratio.toFixed(2) : ratio.toPrecision(2)} (${ms(va)} → ${ms(vb)}${unit})`);
    else if (Math.abs(pct(va, vb)) >= 0.05) parts.push(`${name} ${ms(va)} → ${ms(vb)}${unit} (${signed(pct(va, vb))})`);
  }
  return parts.join(", ") || "no difference on the serving figures (ITL, TPOT, TTFT, throughput)";
}

export function deltaLine(store) {
  const [a, b] = store.runs;
  if (!a || !b) return "";
  if (a.summary.p99_itl_ms !== undefined && b.summary.p99_itl_ms !== undefined) {
    const vs = `<span class="b">${esc(b.label)}</span> vs <span class="a">${esc(a.label)}</span>`;
    if (store.axis.units === "model") return `${vs}, whole model (what a client measures): ${servingDelta(a, b)}`;
    return `${vs}, one layer of each step: ${layerDelta(a, b)}; whole model: ${servingDelta(a, b)}`;
  }
  const parts = [];
  let biggest = 0;
  let timed = 0; // time figures both runs have
  const model = store.axis.units === "model";
  for (const [layerKey, modelKey, label] of FIGURES) {
    const key = model && modelKey ? modelKey : layerKey;
    const k = key.endsWith("_ms") ? 1e3 : 1; // to µs
    const va = Number(a.summary[key]) * k;
    const vb = Number(b.summary[key]) * k;
    const name = layerKey.endsWith("_us") ? `${label} (${model && modelKey ? "whole model" : "one layer"})` : label;
    if (!Number.isFinite(va) || !Number.isFinite(vb) || (va === 0 && vb === 0)) continue;
    const p = pct(va, vb);
    if (p === null) continue;
    if (layerKey.endsWith("_us")) {
      biggest = Math.max(biggest, Math.abs(p) / 100); // "small" is judged on times
      timed += 1;
    }
    if (Math.abs(p) < 0.05) continue;
    const fmtv = layerKey.endsWith("_us") ? (v) => us(v) : (v) => String(v);
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
