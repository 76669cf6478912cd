// Prefill and decode pools (deployment.disaggregation; backend runtime/disagg.py): a request is prefilled on a
// prefill engine (instances 0 .. x-1), its KV read by a decode engine (instances x ..), which decodes it. The request
// lanes are grouped by the pair of engines that served it (prefill-major, arrival order within), each group marked
// by a strip in its decode engine's colour and labelled "prefill i → decode j"; a lane shows its waiting, prefill
// chunks, the wait for decode blocks (back-pressure), the KV transfer and its decode.

import { THEME } from "./colors.js";
import { replicaColor } from "./replicagroups.js";

// A disaggregated run's pools as its events number them: x, the prefill pool's instances (its engines, or with
// prefill.dp > 1 their DP ranks), then the decode pool's; pdp / ddp, each pool's DP ranks an engine (1: none). From
// the run's summary (disaggregated, prefill_instances, prefill_dp, decode_dp: docs/events.md) or its spec's
// deployment (disaggregation.prefill/decode); x 0 when it is not disaggregated.
export function poolsOf(of) {
  const dis = of && !of.disaggregated ? of.disaggregation : null;
  if (!of || (!of.disaggregated && !dis)) return { x: 0, pdp: 1, ddp: 1 };
  const engines = of.disaggregated ? of.prefill_instances || 1 : (dis.prefill && dis.prefill.instances) || 1;
  const pdp = (of.disaggregated ? of.prefill_dp : dis.prefill && dis.prefill.dp) || 1;
  const ddp = (of.disaggregated ? of.decode_dp : dis.decode && dis.decode.dp) || 1;
  return { x: engines * pdp, pdp, ddp };
}

// An instance's name in its pool: below x a prefill engine (or a DP rank of one), the rest decode engines (or ranks).
export function engineName(instance, pools) {
  const [pool, k, dp] = instance < pools.x ? ["prefill", instance, pools.pdp] : ["decode", instance - pools.x, pools.ddp];
  return dp > 1 ? `${pool} ${Math.floor(k / dp)} rank ${k % dp}` : `${pool} ${k}`;
}

// The order a lane sorts by: its prefill engine, then its decode engine (not yet known: before every known one).
const key = (r) => [r.instance, r.decodeInstance === undefined ? -1 : r.decodeInstance];
const before = (a, b) => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);

// Request r's decode engine is now known (its transfer_start): its lane moves to the end of its pair's group. Lanes
// still on their prefill engine (no decode engine yet) float where they arrived: the scan passes over them, so the
// lanes that have one stay sorted by pair, arrival order within (the requests read in order).
export function regroupLane(order, requests, r) {
  const at = order.indexOf(r.id);
  if (at >= 0) order.splice(at, 1);
  const k = key(r);
  let i = order.length;
  while (i > 0) {
    const q = requests.get(order[i - 1]);
    const floating = q.decodeInstance === undefined && q.instance >= r.instance;
    if (!floating && !before(k, key(q))) break;
    i -= 1;
  }
  order.splice(i, 0, r.id);
}

// Plotly shapes and labels marking each pair's group of lanes (rows row0 ..); none unless a lane has a decode engine.
export function poolBands(sv, row0, pools) {
  const shapes = [];
  const annotations = [];
  const order = sv.order;
  const reqs = sv.requests;
  if (!order.some((id) => reqs.get(id).decodeInstance !== undefined)) return { shapes, annotations };
  const label = (r) => (r.decodeInstance === undefined ? `${engineName(r.instance, pools)} only`
    : `${engineName(r.instance, pools)} → ${engineName(r.decodeInstance, pools)}`);
  let start = 0;
  for (let i = 1; i <= order.length; i++) {
    const r = reqs.get(order[start]);
    if (i < order.length && label(reqs.get(order[i])) === label(r)) continue;
    const colour = replicaColor(r.decodeInstance === undefined ? r.instance : r.decodeInstance);
    shapes.push({ type: "rect", xref: "paper", x0: 0, x1: 0.008, yref: "y", y0: row0 + start - 0.5, y1: row0 + i - 0.5,
      fillcolor: colour, line: { width: 0 }, layer: "above" });
    annotations.push({ xref: "paper", x: 0.01, xanchor: "left", yref: "y", y: row0 + start - 0.5, yanchor: "top", showarrow: false,
      text: label(r), font: { size: 10, color: colour }, bgcolor: THEME.panel });
    start = i;
  }
  return { shapes, annotations };
}

// The hover's line on where each phase ran: "prefill on prefill 0 · KV wait 3.1 ms · KV transfer 151 ms (NVLink)
// · decode on decode 1" (timeline ms: the KV's own times, which no step stretches).
export function phasesLine(r, pools, prefillEndUs) {
  if (r.decodeInstance === undefined) return pools.x ? `prefill and its only token on ${engineName(r.instance, pools)}` : "";
  const ms = (us) => `${(us / 1e3).toFixed(us >= 1e5 ? 0 : 1)} ms`;
  const wait = prefillEndUs !== null && r.transferAt > prefillEndUs ? ` · KV wait ${ms(r.transferAt - prefillEndUs)}` : "";
  const sent = r.transferDone !== undefined ? ` · KV transfer ${ms(r.transferDone - r.transferAt)}` : " · KV on its way";
  return `prefill on ${engineName(r.instance, pools)}${wait}${sent} · decode on ${engineName(r.decodeInstance, pools)}`;
}
