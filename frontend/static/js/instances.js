// The engines of a run (events' `instance`, docs/events.md) and what to call them: a data-parallel group's ranks
// (deployment.dp > 1: instance = DP rank, runtime/dp_group.py), a deployment's replicas (deployment.replicas:
// instance = replica, runtime/replicas.py) or a disaggregated run's pools (instances 0..x-1 prefill, then decode).
// The kernel timeline groups its lanes by engine and folds the ranks between the slowest and the median; the step
// composition draws one row per engine shown.

// the run's kind of engines, from its summary (runtime/summary.py: `dp`, `replicas`, `disaggregated`): "rank",
// "replica", "pool" or "" (one engine)
export function engineKind(summary) {
  if (!summary) return "";
  if (summary.disaggregated) return "pool";
  if ((summary.dp || 1) > 1) return "rank";
  if ((summary.replicas || 1) > 1) return "replica";
  return "";
}

// what instance i is called: "rank 3", "replica 1", "prefill 0" / "decode 2", else "engine i"
export function engineLabel(summary, i) {
  const kind = engineKind(summary);
  if (kind === "pool") return i < summary.prefill_instances ? `prefill ${i}` : `decode ${i - summary.prefill_instances}`;
  if (kind === "rank") return `rank ${i}`;
  if (kind === "replica") return `replica ${i}`;
  return `engine ${i}`;
}

// The engines a folded view keeps: the slowest (most busy time) and the median one, by busy µs per engine
// ({instance: µs}); the others are folded. Ties go to the lower instance. Fewer than four engines: all kept.
export function keptEngines(busy) {
  const ids = Object.keys(busy).map(Number).sort((a, b) => a - b);
  if (ids.length < 4) return ids;
  const byBusy = [...ids].sort((a, b) => busy[b] - busy[a] || a - b);
  const slowest = byBusy[0];
  const median = byBusy[Math.floor(byBusy.length / 2)];
  return [slowest, median].sort((a, b) => a - b);
}

// busy µs per engine from kernel launches (each launch's dur_us on its instance)
export function busyByEngine(kernels) {
  const busy = {};
  for (const k of kernels) {
    const i = k.instance || 0;
    busy[i] = (busy[i] || 0) + k.dur_us;
  }
  return busy;
}
