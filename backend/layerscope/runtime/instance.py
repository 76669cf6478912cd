"""An instance: one engine on one GPU group, the part of a run the loop (loop.py) steps.

    Instance(plan, shard, kv, timing, scheduler, recorder, placement).step(t):
        scheduler.schedule()            -> SchedulerOutput (which requests run, how many tokens each)
        plan.step_kernels(shard, batch) -> [Kernel]        (one layer's kernels for the batch)
        timing.launch(kernels)          -> when they end   (CostModel prices; laid on streams)
        scheduler.update_from_output()  -> StepResult      (the tokens sampled: the one place that rule lives)
        recorder                        -> events

This module holds what every instance has: its deployment's shard and plan, its KV pool, its Timing, its memory
snapshot, the page-migration price and the whole-model step time. ServingInstance (serving.py: many requests, vLLM's
scheduler or the article's) and RequestInstance (request_run.py: one request through chunked prefill and decode,
faults and actions) are the two step policies on it. The instance's clock is stated by its `clock` (result.py).
"""

from __future__ import annotations

from layerscope.hardware.gpus import gpu as gpu_preset
from layerscope.hardware.kernel import Kernel, KernelCost
from layerscope.model.config import PRESETS
from layerscope.result import Clock
from layerscope.runtime.deployment import kv_pool_bytes, pool_workspace_bytes, scenario_placement
from layerscope.runtime.kv.manager import KVManager
from layerscope.runtime.plan import workspace_bytes
from layerscope.runtime.recorder import Recorder
from layerscope.runtime.request import Request
from layerscope.runtime.routing import scenario_traffic
from layerscope.runtime.sharded import ShardedRuntime
from layerscope.runtime.shared_plans import shared_deployed
from layerscope.runtime.timing import COPY, Timing, default_costs, memo_price
from layerscope.scenario import ScenarioSpec


class Instance:
    """`workspace_tokens`: the most tokens one step runs (the pool leaves room for their activations)."""

    clock: Clock = "model"

    def __init__(self, spec: ScenarioSpec, recorder: Recorder, workspace_tokens: int) -> None:
        self.spec = spec
        self.recorder = recorder
        self.emit = recorder.emit_gpu  # the GPU's events (a replica past the first keeps only requests and steps)
        self.gpu = gpu_preset(spec.gpu)
        # With a deployment: one GPU of the group (its shard, its collectives, its KV pool from the placement).
        self.full_model = PRESETS[spec.model]
        self.placement = scenario_placement(spec)
        self.plan, self.model = shared_deployed(spec)  # the same plan again for the same deployment
        self.traffic = scenario_traffic(spec, self.full_model)  # the routing the MoE runs with
        self.page_size = spec.effective_page_size
        cost_model, costs = default_costs(self.gpu)  # prices memoised across the process's runs on this GPU
        self.timing = Timing(cost_model, recorder.emit_gpu if recorder.keeps else None, costs, recorder.instance)
        if isinstance(self.plan, ShardedRuntime):  # its launch floors priced from the same memo as the launches,
            self.plan.price = memo_price(cost_model, costs)  # holding no run (the plan may outlive it: shared_plans)
        self.free_start = kv_pool_bytes(spec, self.placement)
        self.kv = KVManager(self.model, self.page_size, spec.banks, spec.allocator, self.free_start,
                            pool_workspace_bytes(spec, self.placement, workspace_bytes(self.model, workspace_tokens)))
        self.peak_used_bytes = 0.0
        self.num_steps = 0

    # -- what the loop asks ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Events before the first step (the deployment, the pool's setup)."""

    def has_work(self) -> bool:
        raise NotImplementedError

    def seen(self, t: float) -> float:
        """The latest arrival a step starting at t takes in (frontend_latency.lagged_arrival)."""
        return t

    def receive(self, req: Request, t: float) -> bool:
        """Take a request the client sent at t; False when the instance refuses it."""
        raise NotImplementedError(f"{type(self).__name__} takes no requests from a client")

    def step(self, t: float) -> tuple[float, int]:
        """Run one step from t: (when it ends, how many requests finished in it)."""
        raise NotImplementedError

    def finish(self, t: float) -> None:
        """Events after the last step."""

    def num_unfinished(self) -> int:
        """Requests received and not yet finished."""
        return 0

    def progress(self) -> float:
        """The share of the instance's work done (the loop reports the run's)."""
        return 0.0

    # -- shared by every step policy ---------------------------------------------------------------------------
    def free_bytes(self) -> float:
        return self.free_start - self.kv.used_pages * self.kv.page_bytes

    def hbm(self, activation: float) -> tuple[float, float]:
        """(HBM total, HBM used) now, with `activation` bytes of workspace; the peak is kept."""
        kv = self.kv
        total = self.placement.capacity_bytes if self.placement is not None else self.gpu.hbm_bytes
        used = total - self.free_start + kv.used_pages * kv.page_bytes + activation
        self.peak_used_bytes = max(self.peak_used_bytes, used)
        return total, used

    def migration_cost(self) -> KernelCost:
        """One page moved (read + write) in every layer: paid once per model step, on the copy stream."""
        k = Kernel("kv_page_migrate", "kv_migrate", "memory", 0.0, 2 * self.kv.page_bytes, stream=COPY,
                   shapes=f"1 page x {self.model.num_hidden_layers} layers (read + write)", scope="model")
        return self.timing.cost(k)

    def model_step_us(self, layer_us: float, model_scope_us: float, *once_us: float) -> float:
        """The whole model's step: the layer's kernels once per layer, whole-model kernels (scope "model": an
        embedding lookup, the article's switch-over) and `once_us` (outside-layer kernels, migrations, re-fetches,
        added in the order given) once per step."""
        t = (layer_us - model_scope_us) * self.model.num_hidden_layers + model_scope_us
        for x in once_us:
            t += x
        return t

    def summary_header(self, allocator: str) -> dict[str, float | int | bool | str]:
        return {"model": self.model.name, "runtime": self.spec.runtime, "gpu": self.gpu.name, "allocator": allocator,
                "num_hidden_layers": self.model.num_hidden_layers}
