"""One GPU of a deployment: the runtime's layer on the GPU's shard, plus the collectives and what runs once per
step outside the 94 layers.

    ShardedRuntime(base, deployment, gpu).prefill_chunk / decode_step(shard, ...)   the layer, with
        all_reduce after o_proj (RowParallelLinear) and after the MoE (FusedMoE reduce_results), stream "comm"
    step_extras(model, shard, deployment, gpu, tokens, seqs) -> StepExtras      once per engine step:
        embedding (vocab-split lookup + all-reduce), final norm, lm_head (vocab-split) + all-gather of the
        logits, sampling; and the engine's host time per step

Expert parallelism with tensor-parallel attention (no data-parallel attention): every GPU holds all the step's
tokens, computes its E/ep experts, and the MoE ends with the same all-reduce as moe_tp would (vLLM uses the
all-to-all dispatch/combine kernels only when data_parallel_size > 1; FusedMoE.use_all2all_kernels). So no
ep_dispatch / ep_combine kernels appear: data-parallel attention is not modelled. The MoE is priced on the busiest
GPU under the deployment's routing (runtime/vllm.py MoePlacement, hardware/routing.py).

All-reduces: vLLM's custom all-reduce for messages up to CUSTOM_AR_MAX_BYTES on 2-8 GPUs (replayed in a CUDA graph,
or launched eagerly), NCCL above; priced from the measured tables (hardware/tables) where they cover the size, else
hardware/collectives.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter, itemgetter

from layerscope.deployment import DeploymentSpec, shard
from layerscope.events import Topology
from layerscope.hardware.collectives import CUSTOM_AR_MAX_BYTES, CollectiveCost, all_gather_us, all_reduce_us
from layerscope.hardware.cost import CostModel
from layerscope.hardware.gpus import GPU
from layerscope.hardware.gpus import gpu as gpu_preset
from layerscope.hardware.kernel import AllReduceOp, Kernel, KernelCost, Op, Scope
from layerscope.hardware.routing import DEFAULT_ROUTING
from layerscope.model.config import PRESETS, ModelConfig
from layerscope.runtime.plan import ACT_BYTES, RuntimePlan
from layerscope.runtime.routing import parse_routing, scenario_traffic
from layerscope.runtime.runtimes import get_runtime
from layerscope.runtime.vllm import VllmRuntime
from layerscope.runtime.vllm_moe import MoePlacement
from layerscope.runtime.vllm_ops import linear
from layerscope.scenario import ScenarioSpec

COMM = "comm"
# stage -> the all-reduce after its last kernel, where each GPU holds a partial sum (RowParallelLinear, FusedMoE)
_STAGE = attrgetter("stage")
REDUCED_AFTER = {"o_proj": "attn_all_reduce", "experts": "moe_all_reduce", "down_proj": "mlp_all_reduce"}
MAX_CAPTURE_TOKENS = 512  # vLLM's largest CUDA graph capture size (cudagraph_capture_sizes up to 512)
# The sizes captured, a step padded to the next one (VllmRuntime.padded_tokens). vLLM V1 up to v0.11 (the rows'
# versions): [1, 2, 4] + every multiple of 8 up to cuda_graph_sizes' default min(2 x max_num_seqs, 512), kept <=
# max_num_batched_tokens (vllm/config/__init__.py VllmConfig._set_cudagraph_sizes, SchedulerConfig.cuda_graph_sizes);
# 512 at every default max_num_seqs >= 256. Every step of <= 512 tokens is padded, mixed ones too (piecewise graphs).
VLLM_CAPTURE_SIZES = (1, 2, 4, *range(8, MAX_CAPTURE_TOKENS + 1, 8))
# SGLang's default cuda_graph_bs without speculative decoding (python/sglang/srt/server_args.py
# _generate_cuda_graph_batch_sizes: [1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + range(512, max_bs
# + 1, 32)), decode batches only; taken up to the same 512 as vLLM (its cuda_graph_max_bs on a B200 node).
SGLANG_CAPTURE_SIZES = (1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), MAX_CAPTURE_TOKENS)
# An eager kernel cannot finish before the host has issued it: one PyTorch op through the dispatcher plus
# cudaLaunchKernel costs on the order of 10 us of CPU time (an assumed typical figure for a modern x86 host, not
# measured here); with CUDA graphs the launches are replayed by the GPU and only a graph node's cost remains (the
# fitted launch cost, at least the GPU's shortest measured kernel: hardware/cost.py CostModel.floor_us).
EAGER_LAUNCH_FLOOR_US = 10.0
# SGLang's eager forward (its prefill batches; runtime/vllm.py `_finish`) issues its kernels from the Python forward
# of each module, one after another: measured, SGLang PR #1401 (sglang.bench_latency, Meta-Llama-3-8B, batch 1,
# flashinfer backend) decodes a token in 8.23 ms eagerly (--disable-cuda-graph) and in 7.35 ms as a CUDA graph, so
# the eager step is bound by its ~400 launches (32 layers x 12: norm, qkv, rope, k and v stores, q copy, decode
# attention, o_proj, norm, gate_up, act, down; ~8 outside the layers): ~20 us of host per launch. A kernel cannot
# start before the host has issued it; the GPU catches up on the small kernels (`sglang_launch_waits`).
SGLANG_EAGER_LAUNCH_US = 20.0
# The engine's host work per step (schedule, prepare inputs, process outputs). Synchronous: vLLM issue #10634
# measured a 5-6 ms gap between decode steps at batch 256 (Llama-2-7B, v1 engine); taken as 0.5 ms + 20 us per
# sequence (256 -> 5.6 ms; the 0.5 ms floor is an assumption). With CUDA graphs and async scheduling (vLLM PR
# #19970, fully overlapped in PR #23569) the host runs a step ahead and only the token hand-over is exposed:
# 0.25 ms, the 200-300 us the same issue estimates. Async scheduling was opt-in (--async-scheduling) through
# vLLM v0.11 and became the default afterwards (vLLM issue #27679, the async scheduling plan of 2025-10-28, item
# PR #27614): a run of v0.11 or older without the flag pays the synchronous time (DeploymentSpec.async_scheduling).
HOST_SYNC_BASE_US = 500.0
HOST_SYNC_PER_SEQ_US = 20.0
HOST_ASYNC_EXPOSED_US = 250.0
CUSTOM_AR_GPUS = (2, 4, 6, 8)  # world sizes vLLM's custom all-reduce supports (CustomAllreduce._SUPPORTED_WORLD_SIZES)


def collective_kernel(name: str, stage: str, cost: CollectiveCost, nbytes: float, n: int,
                      scope: Scope = "layer", op: Op | None = None) -> Kernel:
    """A collective as the timeline shows it: its analytic time as fixed_us (hardware/collectives.py; a measured
    table's price replaces it where one covers `op`), the message size in its shapes."""
    return Kernel(
        name,
        stage,
        "collective",
        0.0,
        0.0,
        shapes=f"{nbytes:,.0f} B over {n} GPUs ({cost.algorithm}; {cost.source})",
        stream=COMM,
        own_launch=False,  # the measured times include the launch
        fixed_us=cost.time_us,
        scope=scope,
        op=op,
    )


def all_reduce_op(n: int, nbytes: float, graphs: bool) -> AllReduceOp:
    """The all-reduce vLLM runs: its custom kernel for small messages on a supported world size, else NCCL."""
    if nbytes <= CUSTOM_AR_MAX_BYTES and n in CUSTOM_AR_GPUS:
        return AllReduceOp(n, nbytes, "custom" if graphs else "custom_eager")
    return AllReduceOp(n, nbytes, "nccl")


def routing_of(spec: ScenarioSpec) -> str:
    """The scenario's expert routing (workload.routing, where the scenario has one; else runtime/routing.py's
    default) as the measured MoE tables name it (hardware/routing.py): a count file becomes its counts."""
    routing = getattr(getattr(spec, "workload", None), "routing", None)
    return parse_routing(routing if isinstance(routing, str) and routing else DEFAULT_ROUTING).table_label


def deployed(spec: ScenarioSpec) -> tuple[RuntimePlan, ModelConfig]:
    """The runtime plan and the model shapes a scenario's engine plans with: one GPU's shard under a deployment,
    the whole layer without one."""
    full = PRESETS[spec.model]
    base = get_runtime(spec.runtime)
    g = gpu_preset(spec.gpu)
    if isinstance(base, VllmRuntime):
        base.arch = g.arch
        base.placement = MoePlacement(routing=routing_of(spec))
        base.experts = scenario_traffic(spec, full)  # the rows and experts its MoE reads (runtime/routing.py)
    if spec.deployment is None:
        return base, full
    return ShardedRuntime(base, spec.deployment, g, full, routing_of(spec)), shard(full, spec.deployment)


def run_topology(spec: ScenarioSpec) -> Topology:
    """The topology the engine builds for a scenario: its deployed plan's (a deployment's collectives included),
    priced on its GPU. A replayed recording is shown with it (the server is handed it: commands/serve.py)."""
    plan, model = deployed(spec)
    return plan.topology(model, CostModel(gpu_preset(spec.gpu)))


class ShardedRuntime(RuntimePlan):
    """A runtime plan on one GPU of a deployment; the model it is given is that GPU's shard (deployment.shard)."""

    def __init__(self, base: RuntimePlan, deployment: DeploymentSpec, gpu: GPU, full: ModelConfig,
                 routing: str = DEFAULT_ROUTING) -> None:
        self.base = base
        if isinstance(base, VllmRuntime):  # its MoE is this GPU's experts, priced on the busiest GPU
            base.arch = gpu.arch
            base.placement = MoePlacement(deployment.ep, deployment.moe_tp, routing, deployment.fused_moe_config)
            base.engine = deployment.engine
            base.capture_sizes = capture_sizes(deployment)
        self.full = full  # the whole model (vocabulary, router width) the shard comes from
        self.dep = deployment
        self.gpu = gpu
        self.cost = CostModel(gpu)
        self.name = base.name
        self.default_page_size = base.default_page_size
        # memoised by shape (Kernels are frozen): a serving run's thousands of steps get the same objects back,
        # so Timing finds their costs by identity instead of pricing new Kernels every step
        self._outside: dict[tuple[ModelConfig, int, int], list[Kernel]] = {}
        self._all_reduce: dict[tuple[ModelConfig, int, str], Kernel] = {}
        # (model, tokens, the step's stages) -> where with_collectives inserts which all-reduce
        self._collectives_at: dict[tuple[ModelConfig, int, tuple[str, ...]], list[tuple[int, Kernel]]] = {}
        self._floored: dict[int, tuple[Kernel, Kernel]] = {}  # id(kernel) -> (kernel, kernel with its floor)
        # (model, tokens, weight dtype) -> vLLM's layer before and after its attention, finished (`_vllm_step`)
        self._finished_parts: dict[tuple[ModelConfig, int, str], tuple[list[Kernel], list[Kernel]]] = {}
        # whether `_vllm_step` gives `_finish`'s kernels: vLLM's, with this class's all-reduces (a DP rank's depend
        # on its group's step, not on its own tokens alone: runtime/dp_plan.py)
        self._split_finish = (isinstance(base, VllmRuntime) and deployment.engine != "sglang"
                              and type(self).with_collectives is ShardedRuntime.with_collectives)
        self._eager_layers: dict[tuple[int, ...], tuple[list[Kernel], list[Kernel]]] = {}  # SGLang's eager layers
        # how launch_floors prices a kernel; an engine hands in its Timing's memoised cost, so that a step's new
        # attention kernel is priced once, not once here and again when it is launched
        self.price: Callable[[Kernel], KernelCost] = self.cost.cost

    def prefill_chunk(self, model: ModelConfig, tokens: int, context_before: int, dtype: str = "bf16") -> list[Kernel]:
        ks = self.base.prefill_chunk(model, tokens, context_before, self.dep.weight_dtype)
        return self._finish(model, ks, tokens, prefill=True)

    def decode_step(self, model: ModelConfig, context_len: int, batch: int = 1, dtype: str = "bf16") -> list[Kernel]:
        ks = self.base.decode_step(model, context_len, batch, self.dep.weight_dtype)
        return self._finish(model, ks, batch, prefill=False)

    def step_kernels(self, model: ModelConfig, batch: list[tuple[int, int]], dtype: str = "bf16") -> list[Kernel]:
        if self._split_finish and isinstance(self.base, VllmRuntime):
            return self._vllm_step(self.base, model, batch)
        ks = self.base.step_kernels(model, batch, self.dep.weight_dtype)
        tokens = sum(map(itemgetter(0), batch))
        # a prefill: a sequence of more than one token (every n >= 1), or one with no context (C-speed scans)
        prefill = tokens > len(batch) or 0 in map(itemgetter(1), batch)
        return self._finish(model, ks, tokens, prefill)

    def _vllm_step(self, base: VllmRuntime, model: ModelConfig, batch: list[tuple[int, int]]) -> list[Kernel]:
        """`_finish` of vLLM's step, its layer around the attention finished once per token count: the all-reduces
        all follow the attention (REDUCED_AFTER's stages come after it) and vLLM's launch floors are per kernel,
        so finishing the parts apart gives the same kernels. (SGLang's eager waits span the whole layer.)"""
        tokens, attn, _ = base.step_attention(model, batch)
        dtype = self.dep.weight_dtype
        key = (model, tokens, dtype)
        parts = self._finished_parts.get(key)
        if parts is None:
            before, after = base.layer_parts(model, tokens, dtype)
            after = self.with_collectives(model, after, self.padded_tokens(tokens))
            parts = self._finished_parts[key] = (self.launch_floors(before, tokens),
                                                 self.launch_floors(after, tokens))
        return [*parts[0], *self.launch_floors(attn, tokens), *parts[1]]

    def outside_layer_kernels(self, model: ModelConfig, batch: list[tuple[int, int]]) -> list[Kernel]:
        """Embedding, final norm, lm_head, logits all-gather, sampling, and the host time the GPU waits for (as a
        fixed-time kernel on stream "host"): once per model step."""
        tokens = sum(map(itemgetter(0), batch))
        key = (model, tokens, len(batch))
        hit = self._outside.get(key)
        if hit is None:
            hit = self._outside[key] = self._outside_layer_kernels(model, tokens, len(batch))
        return hit

    def _outside_layer_kernels(self, model: ModelConfig, tokens: int, seqs: int) -> list[Kernel]:
        # embedding and final norm run in the graph at its padded size; lm_head and sampling only the real rows
        # (vLLM's logits_indices); a batch with a prefill (more tokens than sequences) is SGLang's eager one
        eager = tokens > seqs and self.dep.engine == "sglang"
        extras = step_extras(self.full, model, self.dep, self.gpu, tokens, seqs, self.padded_tokens(tokens, eager))
        host = Kernel("engine step (schedule, prepare inputs, outputs)", "host", "overhead", 0.0, 0.0,
                      shapes=f"{seqs} sequences; {'overlapped' if overlapped(self.dep) else 'synchronous'}",
                      stream="host", own_launch=False, fixed_us=extras.host_us, scope="model")
        return [*self.launch_floors(extras.kernels, tokens), host]

    def switch_over(self, model: ModelConfig) -> list[Kernel]:
        return self.base.switch_over(model)

    def stage_info(self, stage: str) -> tuple[str, str]:
        return self.base.stage_info(stage)

    def _finish(self, model: ModelConfig, kernels: list[Kernel], tokens: int, prefill: bool) -> list[Kernel]:
        # SGLang captures CUDA graphs for decode batches only (CudaGraphRunner; server_args
        # enable_piecewise_cuda_graph is off by default): its prefill ("extend") batches launch eagerly
        eager = prefill and self.dep.engine == "sglang"
        ks = self.with_collectives(model, kernels, self.padded_tokens(tokens, eager))  # the graph's all-reduces
        return self.launch_floors(ks, tokens, eager)

    def padded_tokens(self, tokens: int, eager: bool = False) -> int:
        """The token count the step's graph runs (VllmRuntime.padded_tokens); unpadded for other runtimes."""
        return self.base.padded_tokens(tokens, eager) if isinstance(self.base, VllmRuntime) else tokens

    def with_collectives(self, model: ModelConfig, kernels: list[Kernel], tokens: int) -> list[Kernel]:
        """An all-reduce of the [tokens, hidden] bf16 activations after the attention output projection and after
        the MLP/MoE, where each GPU holds a partial sum."""
        n = self.dep.tp
        if n == 1:
            return kernels
        # where the all-reduces go depends only on the stages (and model, tokens): worked out once per layout,
        # a serving run's steps reuse it (their attention kernels differ, their stages do not)
        stages = tuple(map(_STAGE, kernels))
        key = (model, tokens, stages)
        inserts = self._collectives_at.get(key)
        if inserts is None:
            inserts = self._collectives_at[key] = self._collective_inserts(model, tokens, stages)
        out = list(kernels)
        for i, k in inserts:  # from the back, so earlier indices stay put
            out.insert(i + 1, k)
        return out

    def _collective_inserts(self, model: ModelConfig, tokens: int, stages: tuple[str, ...]
                            ) -> list[tuple[int, Kernel]]:
        """(index of the last kernel of each reduced stage, its all-reduce), from the back."""
        backwards, last = stages[::-1], len(stages) - 1
        # index of the last kernel of each reduced stage -> its all-reduce's stage (C-speed scans, no Python walk)
        at = {last - backwards.index(s): reduced for s, reduced in REDUCED_AFTER.items() if s in stages}
        return [(i, self._all_reduce_kernel(model, tokens, at[i])) for i in sorted(at, reverse=True)]

    def _all_reduce_kernel(self, model: ModelConfig, tokens: int, stage: str) -> Kernel:
        key = (model, tokens, stage)
        k = self._all_reduce.get(key)
        if k is None:
            n = self.dep.tp
            nbytes = tokens * model.hidden_size * ACT_BYTES
            cost = all_reduce_us(self.gpu, n, nbytes, self._graphs(tokens))
            op = all_reduce_op(n, nbytes, self._graphs(tokens))
            k = self._all_reduce[key] = collective_kernel("all_reduce", stage, cost, nbytes, n, op=op)
        return k

    def launch_floors(self, kernels: list[Kernel], tokens: int, eager: bool = False) -> list[Kernel]:
        """Eager launches (no CUDA graphs, more tokens than the largest captured graph, or `eager`) last at least
        the host's time to issue them; SGLang's wait for their launch in a queue (`_sglang_eager`)."""
        if self._graphs(tokens) and not eager:
            return kernels
        if self.dep.engine == "sglang":
            return self._sglang_eager(kernels)
        out = []
        floored = self._floored
        for k in kernels:
            hit = floored.get(id(k))
            if hit is None or hit[0] is not k:
                t = self.price(k).time_us
                f = k.evolve(fixed_us=k.fixed_us + EAGER_LAUNCH_FLOOR_US - t) if t < EAGER_LAUNCH_FLOOR_US else k
                hit = floored[id(k)] = (k, f)  # holds k, so its id is not reused meanwhile
            out.append(hit[1])
        return out

    def _sglang_eager(self, kernels: list[Kernel]) -> list[Kernel]:
        """One layer's kernels launched eagerly by SGLang's forward: each waits for its launch (see
        `sglang_launch_waits`), the wait added to its fixed time."""
        key = tuple(map(id, kernels))
        hit = self._eager_layers.get(key)
        if hit is None:
            waits = sglang_launch_waits([self.price(k).time_us for k in kernels], SGLANG_EAGER_LAUNCH_US)
            for i, k in enumerate(kernels):  # a collective's fixed_us is its price: the kernel before idles instead
                before = next((j for j in range(i - 1, i - len(kernels), -1) if kernels[j].kind != "collective"), None)
                if k.kind == "collective" and waits[i] > 0.0 and before is not None:
                    waits[before] += waits[i]
                    waits[i] = 0.0
            out = [k.evolve(fixed_us=k.fixed_us + w) if w > 0.0 else k for k, w in zip(kernels, waits, strict=True)]
            hit = self._eager_layers[key] = (list(kernels), out)  # holds the kernels, so their ids are not reused
        return hit[1]

    def _graphs(self, tokens: int) -> bool:
        return self.dep.cuda_graphs and tokens <= MAX_CAPTURE_TOKENS


def capture_sizes(dep: DeploymentSpec) -> tuple[int, ...]:
    """The batch sizes the deployment's engine captures CUDA graphs for; none without graphs (enforce_eager)."""
    if not dep.cuda_graphs:
        return ()
    return SGLANG_CAPTURE_SIZES if dep.engine == "sglang" else VLLM_CAPTURE_SIZES


def sglang_launch_waits(times_us: list[float], launch_us: float, max_layers: int = 8) -> list[float]:
    """How long each of a layer's eagerly launched kernels waits for the host, the layer repeated layer after layer.

    The host issues a kernel every `launch_us`; the GPU runs each once it is issued and the one before has finished.
    With more GPU time than host time the host runs ahead and nothing waits. Otherwise the GPU catches up with the
    host in every layer and the waits repeat from one layer to the next: a layer then lasts its launches' time. The
    waits are those of that repeating layer (queued layer after layer until two agree)."""
    n = len(times_us)
    if n == 0 or n * launch_us <= sum(times_us):
        return [0.0] * n
    end, last = 0.0, None  # when the GPU finishes the kernel before; the previous layer's waits
    for layer in range(max_layers):
        waits = []
        for i, t in enumerate(times_us):
            waits.append(max(0.0, (layer * n + i) * launch_us - end))
            end += waits[-1] + t
        if last is not None and all(abs(a - b) < 1e-9 for a, b in zip(waits, last, strict=True)):
            break
        last = waits
    return waits


@dataclass(frozen=True)
class StepExtras:
    """What one engine step pays outside the decoder layers."""

    kernels: list[Kernel]  # embedding, final norm, lm_head, logits gather, sampling (one GPU, once per step)
    host_us: float  # the engine's host time the GPU waits for (exposed part only)


def overlapped(dep: DeploymentSpec | None) -> bool:
    """Whether the engine's host work hides behind the GPU: CUDA graphs and async scheduling, both on."""
    return dep is not None and dep.cuda_graphs and dep.async_scheduling


def host_step_us(num_seqs: int, overlapped: bool) -> float:
    if overlapped:
        return HOST_ASYNC_EXPOSED_US
    return HOST_SYNC_BASE_US + HOST_SYNC_PER_SEQ_US * num_seqs


def step_extras(model: ModelConfig, local: ModelConfig, dep: DeploymentSpec | None, gpu: GPU, tokens: int,
                seqs: int, padded: int | None = None) -> StepExtras:
    """Kernels run once per step: `tokens` scheduled tokens, `seqs` of which are sampled (one per sequence); the
    embedding and the final norm run the CUDA graph's `padded` rows (default `tokens`).

    Embedding: each GPU looks up the rows of its vocabulary slice (others masked to zero), then an all-reduce
    (VocabParallelEmbedding). lm_head: each GPU computes logits for its slice, all-gathered to the whole
    vocabulary before sampling (vLLM's LogitsProcessor). Sampling: softmax / top-k / top-p over [seqs, vocab]
    fp32 (three passes). Without a deployment: one GPU, eager launches excluded, synchronous host time."""
    h, v_local, v = model.hidden_size, local.vocab_size, model.vocab_size
    tp = dep.tp if dep is not None else 1
    graphs = dep is not None and dep.cuda_graphs and tokens <= MAX_CAPTURE_TOKENS
    note = f" (CUDA graph padded {tokens} -> {padded})" if padded is not None and padded != tokens else ""
    tokens = tokens if padded is None else padded
    act = tokens * h * ACT_BYTES
    ks = [
        Kernel("indexSelectLargeIndex", "embedding", "memory", 0.0, 2 * act + tokens * 8.0,
               shapes=f"rows of [{v_local},{h}] for {tokens} tokens{note}", ctas=tokens, scope="model"),
    ]
    if tp > 1:
        cost = all_reduce_us(gpu, tp, act, graphs)
        ks.append(collective_kernel("all_reduce", "embedding_all_reduce", cost, act, tp, scope="model",
                                    op=all_reduce_op(tp, act, graphs)))
    ks.append(Kernel("rms_norm_kernel", "final_norm", "norm", 4.0 * tokens * h, 2 * act + 2 * h,
                     shapes=f"[{tokens},{h}]{note}", ctas=tokens, scope="model"))
    w = "bf16"  # the FP8 checkpoint keeps lm_head in bf16
    ks += [k.evolve(scope="model") for k in linear(w, "lm_head", seqs, v_local, h)]
    if tp > 1:
        logits = seqs * v * ACT_BYTES
        cost = all_gather_us(gpu, tp, logits)
        ks.append(collective_kernel("all_gather", "logits_all_gather", cost, logits, tp, scope="model"))
    ks.append(Kernel("sampler (softmax, top-k/top-p, argmax)", "sampling", "elementwise", 5.0 * seqs * v,
                     3 * seqs * v * 4.0, shapes=f"logits[{seqs},{v}] fp32", ctas=seqs, scope="model"))
    return StepExtras(kernels=ks, host_us=host_step_us(seqs, overlapped(dep)))
