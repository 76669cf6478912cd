"""What a run costs before it runs (the budget that stops it while it runs: layerscope/budget.py).

    estimate_work(spec)   engine steps weighted by what makes a step dear (batch width, numerics), counted from
                          what really bounds them (the requests that fit the KV pool at once, not max_num_seqs),
                          with the compare run's own cost added: the server refuses a run over its limit upfront

The estimate cannot foresee everything (preemptions, a trace's lengths): the budget is what holds.
"""

from __future__ import annotations

from layerscope.budget import Work
from layerscope.runtime.deployment import kv_pool_bytes, scenario_placement
from layerscope.runtime.sharded import deployed
from layerscope.scenario import ScenarioSpec

CHECK_EVERY = 16  # engine steps between checks (the loops' literal 16): free, and 16 steps last < 0.5 s with numerics
# Thread CPU per engine step relative to a plain one (decode-pulses, 200 decode steps, bench/README.md "Hardening"):
# 0.14 ms plain, x3.8 with the tiny numpy layer, x50 with the small one.
NUMERICS_WEIGHT = {"tiny": 4, "small": 50}
# A serving step's cost grows with the requests in its batch (the scheduler and the events walk each of them):
# each 16 running requests cost about one more plain step (serving-64-h200-tp8: 0.26 ms a step with 8 running,
# 1.9 ms with 128; bench/README.md "Hardening").
REQUESTS_PER_STEP_WEIGHT = 16


def estimate_work(spec: ScenarioSpec) -> Work:
    own = _run_work(spec)
    if spec.compare is None:
        return own
    other = spec.with_overrides({**spec.compare.set, "compare": None, "tour": []})
    return Work(own.units + _run_work(other).units, own.field)


def _run_work(spec: ScenarioSpec) -> Work:
    weight = NUMERICS_WEIGHT[spec.numerics_model] if spec.numerics else 1
    if spec.workload is None:
        chunks = -(-spec.prompt_len // min(spec.chunk_size, spec.low_mem_chunk_size))
        name = "prompt_len" if chunks > spec.decode_steps else "decode_steps"
        return Work((chunks + spec.decode_steps) * weight, name)
    w = spec.workload
    if w.trace is not None:  # only a preset's shipped trace gets here (the server refuses client paths)
        return Work(w.num_requests * weight, "workload.trace")
    if spec.deployment is not None and spec.deployment.disaggregation is not None:
        return _pools_work(spec, weight)
    r = w.range_ratio
    longest = w.shared_prefix_len + int(w.input_len * (1 + r)) + int(w.output_len * (1 + r))
    engines = _engines(spec)
    requests = -(-w.num_requests // engines)  # each replica's share (the router's even split)
    prompt = requests * (w.shared_prefix_len + int(w.input_len * (1 + r)))
    limits = spec.scheduler_limits
    budget = limits.max_num_batched_tokens if spec.runtime == "vllm" else spec.chunk_size
    client = -(-w.max_concurrency // engines) if w.max_concurrency else requests
    concurrent = max(1, min(requests, limits.max_num_seqs, client, _requests_fitting_pool(spec, longest)))
    waves = -(-requests // concurrent)
    steps = engines * (-(-prompt // budget) + waves * int(w.output_len * (1 + r)))
    width = 1 + concurrent / REQUESTS_PER_STEP_WEIGHT
    name = "workload.num_requests" if waves > 1 else "deployment.replicas" if engines > 1 else "workload.output_len"
    return Work(int(steps * width * weight), name)


def _engines(spec: ScenarioSpec) -> int:
    """Engines that step on their own in a colocated run, each recording its steps: every replica
    (runtime/replicas.py). A DP group's ranks (runtime/dp_group.py) count as one engine here: at low concurrency
    their lockstep rank steps cost up to ~3x what the units say (dp-attention-ep8 at max_concurrency 8: 5.0 s CPU for
    11,846 units), and the run budget's CPU and event limits (server/settings.py) are what bound such a run."""
    dep = spec.deployment
    return 1 if dep is None else dep.replicas


def _pools_work(spec: ScenarioSpec, weight: int) -> Work:
    """A disaggregated run (runtime/pd_run.py): the prefill pool's chunks, and every decode rank's steps. Each
    decode engine, and each DP rank of one, steps (and records its kernels) on its own: DP ranks in lockstep, an
    idle one running the dummy batch (vLLM's DP), so a pool of E engines of R ranks steps E x R times per token."""
    w, dis = spec.workload, spec.deployment.disaggregation  # type: ignore[union-attr]
    assert w is not None and dis is not None
    r = w.range_ratio
    prompt = w.num_requests * (w.shared_prefix_len + int(w.input_len * (1 + r)))
    output = int(w.output_len * (1 + r))
    ranks = dis.decode.instances * dis.decode.dp
    per_rank = -(-w.num_requests // ranks)
    concurrent = max(1, min(per_rank, spec.scheduler_limits.max_num_seqs, w.max_concurrency or per_rank))
    decode_steps = ranks * -(-per_rank // concurrent) * output
    width = 1 + concurrent / REQUESTS_PER_STEP_WEIGHT
    steps = -(-prompt // spec.scheduler_limits.max_num_batched_tokens) + int(decode_steps * width)
    return Work(steps * weight, "deployment.disaggregation.decode.dp" if dis.decode.dp > 1 else "workload.output_len")


def _requests_fitting_pool(spec: ScenarioSpec, tokens: int) -> int:
    """Requests of `tokens` tokens the KV pool holds at once (at least one: a request that fits no pool is the
    engine's own refusal)."""
    _, model = deployed(spec)
    page = spec.effective_page_size
    pages_per_request = -(-tokens // page)
    pool_pages = int(kv_pool_bytes(spec, scenario_placement(spec)) // (page * model.kv_bytes_per_token()))
    return max(1, pool_pages // max(1, pages_per_request))
