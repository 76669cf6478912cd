// The deployment card: what one GPU of the group holds (weights, activations, CUDA graph pool, KV cache), how
// many KV tokens that leaves and the maximum concurrency, as vLLM's startup log prints them; from the run's
// `deployment` event (the same numbers as `layerscope plan --json`), and the nodes with their replicas or DP ranks and
// GPUs (replicagroups.js nodeDrawing). Its form changes the deployment (tp, ep, dtypes, memory utilisation, CUDA
// graphs, max_model_len, dp, nodes, replicas, router, all-to-all backend, EPLB) and reloads the run; a deployment
// that does not fit shows the server's message here beside the field to change, and the previous run stays on screen.

import { STAGE_KIND, THEME } from "../colors.js";
import { esc } from "../format.js";
import { clearFieldErrors, showFieldError } from "../controls.js";
import { nodeDrawing } from "../replicagroups.js";

const FIELDS = [
  ["tp", "number"], ["ep", "number"], ["weight_dtype", "select"], ["kv_dtype", "select"],
  ["gpu_memory_utilization", "number"], ["cuda_graphs", "checkbox"], ["max_model_len", "number"],
  ["dp", "number"], ["nodes", "number"], ["replicas", "number"], ["router", "select"], ["all2all_backend", "select"],
  ["eplb", "eplb"], // issue 20: number of redundant experts, empty for no EPLB
];
// the slices of one GPU's memory, in the order vLLM's profile run accounts them
const PARTS = [
  ["weights_gib", "weights", () => STAGE_KIND.gemm], ["activation_gib", "activations (peak)", () => STAGE_KIND.elementwise],
  ["cuda_graph_gib", "CUDA graphs", () => STAGE_KIND.overhead], ["non_torch_gib", "non-torch", () => THEME.muted],
  ["kv_cache_gib", "KV cache", () => STAGE_KIND.memory],
];
// scenario.py DeploymentSpec's defaults (vLLM's: one GPU, bf16, --gpu-memory-utilization 0.9, CUDA graphs on)
const DEFAULTS = {
  tp: 1, ep: 1, weight_dtype: "bf16", kv_dtype: "bf16", gpu_memory_utilization: 0.9, cuda_graphs: true, max_model_len: null,
  dp: 1, nodes: 1, replicas: 1, router: "round_robin", all2all_backend: "deepep_low_latency", eplb: null,
};
const EPLB_STEP_INTERVAL = 3000; // deployment.py EplbSpec's default (vLLM's eplb step_interval)

// The input a refusal is about when the server names only the deployment: the fix it names ("set nodes=2"), else
// the field it starts with ("replicas=9 x 1 GPUs ...", "ep=8: ...", "eplb: ..."), else none. The server's prefix
// ("set: field 'deployment': ", scenario.py format_validation_error) is not part of it.
export function fieldOfMessage(message, names) {
  const m = String(message).replace(/^(?:\w+:\s*)?field '[^']*':\s*/, "").replace(/^Value error, /, "");
  const fix = m.match(/\bset (\w+)=/) || m.match(/\blower (\w+)\b/) || m.match(/^(\w+)=/) || m.match(/^(\w+):/);
  return fix && names.includes(fix[1]) ? fix[1] : "";
}
const dpOf = (d) => (d && d.dp) || 1;
const gib = (v) => (Number.isFinite(v) ? `${v.toFixed(2)} GiB` : "–");

export class DeploymentView {
  constructor(root, store, serving, load) {
    this.root = root;
    this.body = root.querySelector("#deployment-body");
    this.form = root.querySelector("#deployment-form");
    this.error = root.querySelector("#deployment-error");
    this.store = store;
    this.serving = serving;
    this.load = load; // load(set): reload the run with these overrides
    this.pending = false;
    this.drawn = "";
    this.form.addEventListener("input", (ev) => {
      if (ev.target && ev.target.name === "dp") this.syncEp();
    });
    this.form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.apply();
    });
  }

  settings() {
    return (this.store.scenario && this.store.scenario.deployment) || null;
  }

  apply() {
    const cur = this.settings() || DEFAULTS;
    const set = {};
    for (const [name, kind] of FIELDS) {
      const input = this.form.elements[name];
      if (!input) continue;
      let v = kind === "checkbox" ? input.checked : kind === "number" ? (input.value === "" ? null : Number(input.value)) : input.value;
      if (kind === "eplb") v = input.value === "" ? null : { ...(cur.eplb || { step_interval: EPLB_STEP_INTERVAL }), num_redundant_experts: Number(input.value) };
      if (JSON.stringify(cur[name] ?? DEFAULTS[name] ?? null) !== JSON.stringify(v)) set[`deployment.${name}`] = v;
    }
    // dp > 1: ep is every GPU's (dp x tp), derived by the spec from ep 1 (DeploymentSpec._ep_over_dp)
    const dp = Number(this.form.elements.dp && this.form.elements.dp.value) || 1;
    if (dp > 1) {
      delete set["deployment.ep"];
      if ((cur.ep ?? 1) !== 1) set["deployment.ep"] = 1;
    }
    this.error.textContent = "";
    this.error.classList.add("hidden");
    this.pending = true;
    this.load(set);
  }

  // ep follows dp x tp when dp > 1: its select is then disabled and says so
  syncEp() {
    const ep = this.form.elements.ep;
    const dp = this.form.elements.dp;
    if (!ep || !dp) return;
    const on = (Number(dp.value) || 1) > 1;
    ep.disabled = on;
    ep.title = on ? "ep = dp x tp with dp > 1: the experts spread over every GPU" : "";
  }

  // A websocket `error` (kept connection): shown here when it answers this card's apply or names the deployment.
  onError(msg) {
    const about = msg.field && /deployment|^set\.(tp|ep|gpu)/.test(msg.field);
    if (!this.pending && !about && !/weights need|does not fit|deployment/i.test(msg.message)) return;
    this.pending = false;
    let name = msg.field ? msg.field.replace(/^(set|spec)\./, "").replace(/^deployment\./, "") : "";
    if (!this.form.elements[name]) name = fieldOfMessage(msg.message, FIELDS.map(([n]) => n)) || name;
    if (name) showFieldError(this.form, this.error, name, msg.message); // the field and the fix, the input marked
    else this.error.textContent = msg.message;
    this.error.classList.remove("hidden");
  }

  onLoaded() {
    this.pending = false;
    clearFieldErrors(this.form, this.error);
    this.error.classList.add("hidden");
    this.drawn = "";
    const d = this.settings() || DEFAULTS; // no deployment yet: the form starts from DeploymentSpec's defaults
    this.root.dataset.empty = this.settings() ? "false" : "true";
    for (const [name, kind] of FIELDS) {
      const input = this.form.elements[name];
      if (!input) continue;
      if (kind === "checkbox") input.checked = Boolean(d[name]);
      else if (kind === "eplb") input.value = d.eplb ? d.eplb.num_redundant_experts : "";
      else input.value = d[name] ?? DEFAULTS[name] ?? "";
    }
    this.syncEp();
  }

  render() {
    const stamp = this.store.stamp(["deployment", "theme"]);
    if (stamp === this.drawn) return false;
    this.drawn = stamp;
    // the run's deployment event: from the whole-run overview (drawn before play), else as it streams
    const main = this.store.main;
    const e = (main && main.deployment && main.deployment[0]) || this.serving.deployment;
    const s = this.store.scenario;
    if (!e) {
      const d = this.settings();
      this.body.innerHTML = d
        ? `<p class="hint">${esc(s.gpu)} · tp ${d.tp} · ep ${d.ep} · weights ${esc(d.weight_dtype)} · KV ${esc(d.kv_dtype)}: the plan arrives with the run's first event.</p>`
        : '<p class="empty">This run has no deployment (one GPU, the layer alone).</p>';
      return true;
    }
    const g = e.per_gpu;
    const cap = g.capacity_gib || 1;
    const bar = PARTS.map(([k, label, color]) => {
      const pct = (100 * (g[k] || 0)) / cap;
      return `<i style="width:${pct.toFixed(2)}%;background:${color()}" title="${esc(label)}: ${gib(g[k])} (${pct.toFixed(1)}% of ${gib(cap)})"></i>`;
    }).join("");
    const legend = PARTS.map(([k, label, color]) => `<span class="key"><i style="background:${color()}"></i>${esc(label)} ${gib(g[k])}</span>`).join("");
    const mml = this.form.elements.max_model_len;
    if (mml) mml.placeholder = String(e.max_model_len); // empty: the model's context
    const row = (k, v, title) => `<tr title="${esc(title)}"><th>${esc(k)}</th><td>${v}</td></tr>`;
    this.body.innerHTML =
      `<table class="dep" data-testid="deployment-plan">` +
      row("GPUs", `${e.num_gpus} × ${esc(e.gpu)}`, "GPUs in the group; the timeline shows one of them") +
      row("parallelism", `${dpOf(this.settings()) > 1 ? `dp ${dpOf(this.settings())} · ` : ""}tp ${e.tp} · ep ${e.ep} · moe_tp ${e.moe_tp}`, "attention data-parallel ranks, tensor parallel, expert parallel, and the MoE tensor split tp / ep") +
      row("dtypes", `weights ${esc(e.weight_dtype)} · KV ${esc(e.kv_dtype)}`, "storage precision of the weights and of the KV cache") +
      row("weights / GPU", gib(g.weights_gib), "this GPU's shard of the weights (with fp8 block scales)") +
      row("KV cache / GPU", gib(g.kv_cache_gib), `gpu_memory_utilization ${e.gpu_memory_utilization} × capacity, minus weights, activations, CUDA graphs and non-torch memory`) +
      row("KV tokens", `${g.kv_tokens.toLocaleString("en-US")} (${(g.kv_bytes_per_token / 1024).toFixed(1)} KiB / token)`, "GPU KV cache size, whole KV blocks, all layers") +
      row("KV pool", `${esc(String(this.store.scenario && this.store.scenario.free_hbm_gib ? `free_hbm_gib ${this.store.scenario.free_hbm_gib} GiB (set by the scenario)` : "sized by the placement"))}`, "The simulation's KV pool: the placement's KV cache, unless the scenario sets free_hbm_gib") +
      (e.max_num_seqs ? row("scheduler", `max_num_seqs ${e.max_num_seqs.toLocaleString("en-US")} · max_num_batched_tokens ${e.max_num_batched_tokens.toLocaleString("en-US")} · prefix caching ${e.prefix_caching ? "on" : "off"}`, `${e.scheduler_source} (vLLM's EngineArgs.get_batch_defaults: 1024 / 8192 on GPUs of 70 GiB or more other than A100, else 256 / 2048)`) : "") +
      row("max concurrency", `${g.max_concurrency.toFixed(2)}× at ${e.max_model_len.toLocaleString("en-US")} tokens / request`, "vLLM: Maximum concurrency for max_model_len tokens per request") +
      `</table><div class="membar" title="One GPU's ${gib(cap)}, as vLLM's profile run divides it">${bar}</div><div class="legend">${legend}</div>` +
      nodeDrawing(this.settings(), e.gpu, main && main.dp_group && main.dp_group[0]) +
      `<p class="hint">vLLM would log: "Available KV cache memory: ${g.kv_cache_gib.toFixed(2)} GiB" · "GPU KV cache size: ${g.kv_tokens.toLocaleString("en-US")} tokens" · ` +
      `"Maximum concurrency for ${e.max_model_len.toLocaleString("en-US")} tokens per request: ${g.max_concurrency.toFixed(2)}x" (simulated placement at full size)</p>`;
    return true;
  }
}
