// Replicas behind a router (deployment.replicas, deployment.router; backend runtime/replicas.py): one colour per
// replica, the request lanes grouped by the replica that served each request (its `instance`), and the deployment
// card's drawing of the nodes: each GPU box coloured by the replica or the DP rank that runs on it, free GPUs grey.

import { THEME } from "./colors.js";
import { esc } from "./format.js";

// one hue per replica, distinct on the dark and the light panel alike (the request lanes' own hues are per request)
const HUES = [210, 140, 35, 330, 265, 185, 15, 95];
export const replicaColor = (i) => `hsl(${HUES[i % HUES.length]}, 60%, 55%)`;

// DeploymentSpec's replicas and router as the run's spec names them (left out of the spec at their defaults)
export function replicasOf(dep) {
  return { replicas: (dep && dep.replicas) || 1, router: (dep && dep.router) || "round_robin" };
}

// Insert request r's id into the lanes' order: grouped by replica, arrival order within each (one replica: appended).
export function insertLane(order, requests, r) {
  let at = order.length;
  while (at > 0 && requests.get(order[at - 1]).instance > r.instance) at -= 1;
  order.splice(at, 0, r.id);
}

// Plotly shapes and labels marking each engine's group of lanes (rows row0 ..): a coloured strip at the left edge,
// named by `name` (instances.js engineLabel: "replica 1", or "rank 3" for a DP group's ranks).
export function replicaBands(sv, row0, name = (i) => `replica ${i}`) {
  const shapes = [];
  const annotations = [];
  const order = sv.order;
  if (!order.length || order.every((id) => !sv.requests.get(id).instance)) return { shapes, annotations };
  let start = 0;
  for (let i = 1; i <= order.length; i++) {
    const inst = sv.requests.get(order[start]).instance;
    if (i < order.length && sv.requests.get(order[i]).instance === inst) continue;
    shapes.push({ type: "rect", xref: "paper", x0: 0, x1: 0.008, yref: "y", y0: row0 + start - 0.5, y1: row0 + i - 0.5,
      fillcolor: replicaColor(inst), line: { width: 0 }, layer: "above" });
    annotations.push({ xref: "paper", x: 0.01, xanchor: "left", yref: "y", y: row0 + start - 0.5, yanchor: "top", showarrow: false,
      text: name(inst), font: { size: 10, color: replicaColor(inst) }, bgcolor: THEME.panel });
    start = i;
  }
  return { shapes, annotations };
}

// The deployment card's drawing, nodes -> replicas or DP ranks -> GPUs: each node of 8 GPUs a row of boxes, each GPU
// coloured by the replica or the DP rank running on it (free GPUs grey), its experts in its title when the run's
// dp_group event names them. "" for one engine on one node (the card's table says it all).
const GPUS_PER_NODE = 8; // layerscope/deployment.py GPUS_PER_NODE
export function nodeDrawing(dep, gpu, group = null) {
  const { replicas, router } = replicasOf(dep);
  const dp = (dep && dep.dp) || 1;
  const nodes = (dep && dep.nodes) || 1;
  if (replicas < 2 && dp < 2 && nodes < 2) return "";
  const tp = (dep && dep.tp) || 1;
  const perReplica = tp * dp;
  const used = replicas * perReplica;
  const total = GPUS_PER_NODE * nodes;
  const experts = {}; // GPU -> [first, last] expert id, from the dp_group event's ranks
  for (const r of (group && group.ranks) || []) (r.gpus || []).forEach((g, j) => { if (r.experts && r.experts[j]) experts[g] = r.experts[j]; });
  const rows = [];
  for (let n = 0; n < nodes; n++) {
    const boxes = [];
    for (let g = n * GPUS_PER_NODE; g < (n + 1) * GPUS_PER_NODE; g++) {
      const r = Math.floor(g / perReplica);
      const rank = Math.floor((g % perReplica) / tp);
      const owner = dp > 1 && replicas < 2 ? rank : r; // a DP group's ranks, else the replicas
      const free = g >= used;
      const ex = experts[g] ? `, experts ${experts[g][0]}-${experts[g][1]}` : "";
      const who = replicas > 1 ? `replica ${r}${dp > 1 ? ` DP rank ${rank}` : ""}` : dp > 1 ? `DP rank ${rank}` : "engine 0";
      const title = free ? `GPU ${g} (node ${n}): free` : `GPU ${g} (node ${n}): ${who} (tp ${tp})${ex}`;
      const attrs = free ? 'data-replica=""' : `data-replica="${r}" data-rank="${dp > 1 ? rank : ""}"`;
      boxes.push(`<i ${attrs} title="${esc(title)}" style="background:${free ? THEME.muted : replicaColor(owner)}">${g}</i>`);
    }
    rows.push(`<div class="replica-row"><span class="node-name">node ${n}</span><div class="replica-gpus">${boxes.join("")}</div></div>`);
  }
  const engines = replicas > 1
    ? `${replicas} replicas × ${perReplica} ${esc(gpu)} behind a <b>${esc(router)}</b> router · `
    : `${dp} DP ranks × tp ${tp} (${esc(gpu)}), experts over all ${used} GPUs (ep ${used}), all-to-all <b>${esc((dep && dep.all2all_backend) || "deepep_low_latency")}</b> · `;
  const each = replicas > 1 ? "each its own KV cache and scheduler" : "each rank its own KV cache and requests, in lockstep";
  const link = nodes > 1 ? " · collectives between nodes on the node link" : "";
  return `<div class="replica-node" data-testid="replica-node"><div class="replica-caption">${engines}${used} of ${total} GPUs · ` +
    `${each}${link}; the timeline draws ${replicas > 1 ? "replica 0's kernels and every replica's steps" : "one GPU of each rank"}</div>${rows.join("")}</div>`;
}
