// Replicas behind a router (deployment.replicas, deployment.router; backend runtime/replicas.py): one colour per
// replica, the request lanes grouped by the replica that served each request (its `instance`), and the deployment
// card's drawing of the node: each GPU box coloured by the replica that runs on it, free GPUs grey.

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

// Plotly shapes and labels marking each replica's group of lanes (rows row0 ..): a coloured strip at the left edge.
export function replicaBands(sv, row0) {
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
      text: `replica ${inst}`, font: { size: 10, color: replicaColor(inst) }, bgcolor: THEME.panel });
    start = i;
  }
  return { shapes, annotations };
}

// The deployment card's node: every GPU of the node(s), each coloured by the replica running on it.
export function nodeDrawing(dep, gpu) {
  const { replicas, router } = replicasOf(dep);
  if (replicas < 2) return "";
  const perReplica = (dep.tp || 1) * (dep.dp || 1);
  const total = 8 * (dep.nodes || 1); // GPUS_PER_NODE x nodes (layerscope/deployment.py)
  const boxes = [];
  for (let g = 0; g < total; g++) {
    const r = Math.floor(g / perReplica);
    const used = r < replicas;
    const title = used ? `GPU ${g}: replica ${r} (tp ${dep.tp || 1})` : `GPU ${g}: free`;
    boxes.push(`<i data-replica="${used ? r : ""}" title="${esc(title)}" style="background:${used ? replicaColor(r) : THEME.muted}">${g}</i>`);
  }
  return `<div class="replica-node" data-testid="replica-node"><div class="replica-caption">${replicas} replicas × ${perReplica} ${esc(gpu)} ` +
    `behind a <b>${esc(router)}</b> router · ${replicas * perReplica} of ${total} GPUs · each its own KV cache and scheduler; ` +
    `the timeline shows one GPU of replica 0</div><div class="replica-gpus">${boxes.join("")}</div></div>`;
}

// The deployment card's form gains the two fields (before its apply button), once.
const ROUTERS = ["round_robin", "least_outstanding_requests", "prefix_cache_aware"]; // DeploymentSpec.router
export function addReplicaInputs(form) {
  if (!form || form.elements.replicas) return;
  const button = form.querySelector("button[type=submit]");
  const add = (html) => button.insertAdjacentHTML("beforebegin", html);
  add('<label title="Engines of this shape on the node, each on its own GPUs with its own KV cache, behind a router">' +
    'replicas <input name="replicas" type="number" min="1" max="64" step="1"></label>');
  add('<label title="How the router picks a replica: in turn, the fewest outstanding requests, or the one holding the ' +
    `longest prefix (SGLang's cache_aware)">router <select name="router">${ROUTERS.map((r) => `<option>${r}</option>`).join("")}</select></label>`);
}
