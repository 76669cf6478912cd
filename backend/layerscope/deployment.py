"""A deployment: its spec (the scenario's `deployment:`), one GPU's shard of the model, and what that GPU's memory
holds (vLLM's accounting). Below the scenario, which refuses a deployment that does not fit (check_fits).

    shard(model, deployment) -> ModelConfig   one GPU's shapes; the runtime plans (runtime/vllm.py) take it as is
        attention heads / tp; KV heads / tp, or 1 per GPU replicated tp / kv times when tp > kv heads
        experts / ep (and top-k / ep: a token's expected local experts, so k/E and the distinct-expert formula hold)
        MoE intermediate / moe_tp (moe_tp = tp / ep); dense intermediate / tp; vocabulary / tp
    place(model, gpu, deployment, ...) -> Placement   what vLLM's Worker.determine_available_memory finds:
        KV cache = gpu_memory_utilization x total_gpu_memory - (weights + activation peak + non-torch + CUDA graphs)
        KV tokens = whole 16-token blocks of that; max concurrency = KV tokens / max_model_len

Sources (vllm/v1/worker/gpu_worker.py determine_available_memory, gpu_model_runner.profile_run,
kv_cache_utils.py "GPU KV cache size", "Maximum concurrency for L tokens per request") and each constant's are
given where the constant is defined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from layerscope.hardware.gpus import GPU, GiB
from layerscope.model.config import DTYPE_BYTES, ModelConfig
from layerscope.strict import MAX_PROMPT_LEN, Strict

BLOCK_SIZE = 16  # vLLM's default KV block (--block-size 16 on CUDA)
FP8_BLOCK = 128  # Qwen3-235B-A22B-FP8 quantization_config.weight_block_size [128, 128], one fp32 scale per block
MAX_NUM_SEQS = 256  # vLLM's default --max-num-seqs: the sampler's dummy run covers that many requests
# fused_moe processes at most VLLM_FUSED_MOE_CHUNK_SIZE tokens at once (vllm/envs.py default 32768): its caches
# are sized for that many, whatever the batch.
FUSED_MOE_CHUNK = 32768
# Non-torch memory (NCCL and custom all-reduce buffers, cuBLAS workspaces) vLLM finds after its profile run:
# 1.79 GiB on one H100 and 3.58 GiB per GPU at tp 2 (vLLM PR #10511's memory-profiling log, Llama-3-8B). Taken as
# is for tp 1 and tp > 1 (NCCL's buffers grow little with more peers on one NVLink switch): a measured figure from
# one model, not fitted here.
NON_TORCH_GIB = {1: 1.79, 2: 3.58}
# Since vLLM PR #25359 (2025-09-22, the week of PR #25444 that v0.11.0 ships; "NCCL buffers (~4.5 GiB for tensor
# parallelism) ... show up as non-torch memory increase") the worker sets up NCCL and the custom all-reduce before its
# memory snapshot (gpu_worker.init_device), so their buffers sit outside the gpu_memory_utilization budget and only
# what the profile run itself adds is subtracted: "non_torch_memory takes 0.16GiB" (PR #12126's H100 log) and
# 0.20 GiB per worker at tp > 1 (PR #14447's log), accounting after PR #12126. DeploymentSpec.comm_buffers_in_kv_budget.
NON_TORCH_FORWARD_GIB = 0.2
# CUDA graph pool, profiled into the KV budget since vLLM v0.21 ("Estimated CUDA graph memory: X GiB total" for 51
# piecewise + 35 full graphs): 0.52 GiB (Qwen3-8B, LMCache issue #3430), 1.62 GiB (Qwen3.5 MoE, vLLM PR #39559),
# 0.09 GiB (27B at tp 2, few sizes). Taken as 0.5 GiB per GPU: an estimate from those logs. Older engines captured
# the graphs after sizing the KV cache, outside the budget ("CUDA graph memory profiling is enabled (default since
# v0.21.0)", vLLM's startup log in gpustack/runner PR #251): DeploymentSpec.cuda_graph_memory_profiled=false.
CUDA_GRAPH_GIB = 0.5
SAMPLER_FP32_COPIES = 3  # logits, softmax probabilities, the top-k/top-p sort: fp32 [max_num_seqs, vocab] each
ACT = 2.0  # bf16 activations
GPUS_PER_NODE = 8  # one HGX/DGX node: 8 GPUs on one NVLink switch (the measured collectives go to 8)
RouterName = Literal["round_robin", "least_outstanding_requests", "prefix_cache_aware"]


MAX_NODES = 8  # the deployments issue 20 asks for: up to 8 nodes of 8 GPUs
All2AllBackend = Literal["naive", "allgather_reducescatter", "pplx", "deepep_high_throughput", "deepep_low_latency"]


class EplbSpec(Strict):
    """vLLM's --enable-eplb with --eplb-config (num_redundant_experts, step_interval): redundant copies of the
    busiest experts, placed so each rank's load evens out, re-placed every step_interval steps."""

    num_redundant_experts: int = Field(32, ge=0, le=1024, description="extra expert copies over all ranks "
                                       "(vLLM's default 0; 32 here, as SGLang's large-scale EP blog ran DeepSeek-V3)")
    step_interval: int = Field(3000, ge=1, le=1_000_000, description="steps between rebalances (vLLM's "
                               "eplb step_interval default 3000)")


def check_dp_layout(dep: DeploymentSpec) -> None:
    """dp ranks of tp GPUs fill `nodes` nodes; tp never crosses a node; ep is every GPU (vLLM's EP with DP)."""
    world = dep.dp * dep.tp
    if dep.tp > GPUS_PER_NODE or GPUS_PER_NODE % dep.tp:
        raise ValueError(f"tp={dep.tp} must divide the node size {GPUS_PER_NODE}: tensor parallelism stays within "
                         "a node")
    if dep.ep != world:
        raise ValueError(f"ep={dep.ep}: with dp={dep.dp} x tp={dep.tp} the experts spread over all {world} GPUs, "
                         f"so ep must be {world} (vLLM --enable-expert-parallel)")
    if world > dep.nodes * GPUS_PER_NODE:
        raise ValueError(f"dp={dep.dp} x tp={dep.tp} = {world} GPUs do not fit {dep.nodes} node(s) of "
                         f"{GPUS_PER_NODE}: set nodes={-(-world // GPUS_PER_NODE)}")
    if dep.nodes > 1 and world != dep.nodes * GPUS_PER_NODE:
        raise ValueError(f"{world} GPUs over {dep.nodes} nodes of {GPUS_PER_NODE}: fill whole nodes "
                         f"(dp x tp = {dep.nodes * GPUS_PER_NODE})")


class DeploymentError(ValueError):
    """A deployment that cannot run: the message says why and what would."""


# -- issue 21 (prefill and decode apart): the pools of a disaggregated deployment ---------------------------------
class PoolSpec(Strict):
    """One pool of a disaggregated deployment: `instances` engines of tp GPUs each (SGLang's
    --disaggregation-mode prefill|decode workers, vLLM's kv_producer / kv_consumer instances)."""

    instances: int = Field(1, ge=1, le=16, description="engines in the pool (x of xPyD)")
    tp: int = Field(4, ge=1, le=8, description="tensor parallel size of each engine of the pool (4: 1P1D fills "
                    "a node of 8)")
    dp: int = Field(1, ge=1, le=64, description="data-parallel attention ranks of each engine of the pool (SGLang's "
                    "PD with --enable-dp-attention: dp x tp GPUs stepping in lockstep, each rank its own KV cache and "
                    "requests, the experts over all of them, ep = dp x tp)")
    ep: int = Field(1, ge=1, le=512, description="expert parallel size of each engine (divides tp; with dp > 1 "
                    "it is dp x tp, derived when left at 1)")

    @model_validator(mode="after")
    def _ep_divides_tp(self) -> PoolSpec:
        world = self.dp * self.tp
        if self.dp > 1 and self.ep not in (1, world):
            raise ValueError(f"ep={self.ep}: with dp={self.dp} x tp={self.tp} the experts spread over all {world} "
                             f"GPUs of the engine: leave ep at 1 (derived) or set {world}")
        if self.dp == 1 and self.tp % self.ep:
            raise ValueError(f"ep={self.ep} must divide tp={self.tp} (MoE tensor parallel is tp / ep)")
        return self

    @property
    def num_gpus(self) -> int:
        return self.instances * self.tp * self.dp



class DisaggregationSpec(Strict):
    """Prefill and decode on separate pools (xPyD), the KV cache sent from one to the other after prefill."""

    prefill: PoolSpec = Field(default_factory=PoolSpec, description="the prefill pool")
    decode: PoolSpec = Field(default_factory=PoolSpec, description="the decode pool")
    link: Literal["nvlink", "rdma"] = Field(
        "nvlink", description="how the KV travels: NVLink within one node (both pools on its 8 GPUs) or RDMA "
        "between nodes (one NIC per GPU)")
    streaming: bool = Field(
        False, description="send each layer's KV as prefill finishes it (layer-by-layer, Mooncake's and SGLang's "
        "overlap): only the last layer's share waits for the prefill's end")
    routing: Literal["round_robin", "least_loaded"] = Field(
        "round_robin", description="how requests pick a prefill instance and a decode instance (vLLM's disagg "
        "proxy: round robin; SGLang's router / Dynamo: least loaded)")

    @model_validator(mode="after")
    def _fits_the_link(self) -> DisaggregationSpec:
        gpus = self.prefill.num_gpus + self.decode.num_gpus
        if self.link == "nvlink" and gpus > GPUS_PER_NODE:
            raise ValueError(
                f"link nvlink joins the {GPUS_PER_NODE} GPUs of one node; "
                f"{self.prefill.instances}P{self.decode.instances}D at prefill tp {self.prefill.tp}, "
                f"decode tp {self.decode.tp} uses {gpus} GPUs: use link rdma or fewer GPUs")
        return self

    @property
    def num_gpus(self) -> int:
        return self.prefill.num_gpus + self.decode.num_gpus

    def describe(self) -> str:
        """In a few words, as labels show it: '1P1D tp4/tp4 over nvlink'."""
        p, d = self.prefill, self.decode
        dp = "".join(f" {name} dp{pool.dp}" for name, pool in (("prefill", p), ("decode", d)) if pool.dp > 1)
        return f"{p.instances}P{d.instances}D tp{p.tp}/tp{d.tp}{dp} over {self.link}"


class DeploymentSpec(Strict):
    """How the model is spread over GPUs and stored (vLLM's --tensor-parallel-size, --enable-expert-parallel, ...).

    MoE tensor parallelism is tp / ep, as SGLang's --tp/--ep: ep = tp is vLLM's --enable-expert-parallel.
    One node of up to 8 GPUs, or with dp > 1 (issue 20) up to MAX_NODES nodes of GPUS_PER_NODE."""

    tp: int = Field(1, ge=1, le=64, description="tensor parallel size: GPUs sharing attention and dense parts "
                    "(within one node of 8)")
    ep: int = Field(1, ge=1, le=512, description="expert parallel size (divides tp; with dp > 1 it is dp x tp); "
                    "MoE tensor parallel is tp / ep")
    weight_dtype: Literal["bf16", "fp8"] = Field(
        "bf16", description="fp8: e4m3 with 128x128 block scales, as Qwen/Qwen3-235B-A22B-FP8"
    )
    kv_dtype: Literal["bf16", "fp8"] = Field("bf16", description="KV cache precision (vLLM --kv-cache-dtype)")
    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=1.0, description="share of GPU memory vLLM may use")
    cuda_graphs: bool = Field(True, description="decode steps replay CUDA graphs (vLLM's default; off = eager)")
    cuda_graph_memory_profiled: bool = Field(
        True, description="the KV budget leaves room for the CUDA graph pool (vLLM's default since v0.21.0, "
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS; before, graphs were captured after the KV cache was sized, outside "
        "the budget)"
    )
    comm_buffers_in_kv_budget: bool = Field(
        True, description="the KV budget subtracts the communicators' buffers (NCCL, custom all-reduce) with the "
        "non-torch memory, as vLLM before PR #25359 (v0.10 and older) did; false: v0.11.0 on, where they are set up "
        "before the memory snapshot, outside the budget, and only the profile run's own ~0.2 GiB is subtracted"
    )
    async_scheduling: bool = Field(
        True, description="the engine schedules step N+1 while step N runs (vLLM --async-scheduling: opt-in up to "
        "v0.11, the default since; off = the host's step work is exposed between steps)"
    )
    max_model_len: int | None = Field(
        None, ge=16, le=MAX_PROMPT_LEN, description="longest request in tokens (default: the model's context)"
    )
    engine: Literal["vllm", "sglang"] = Field(
        "vllm", description="the serving engine imitated: its front of engine (tokenizer, HTTP, SSE; "
        "runtime/frontend_latency.py) and, for sglang, prefill batches launched eagerly (CUDA graphs for decode only)"
    )
    # issue 21 (prefill and decode apart): xPyD pools; absent: prefill and decode colocated on each engine
    disaggregation: DisaggregationSpec | None = Field(
        None, description="prefill and decode on separate pools, the KV transferred between them (xPyD); each "
        "pool's tp/ep replace the deployment's for its engines")

    fused_moe_config: Literal["tuned", "default"] = Field(
        "tuned", description="the Triton fused_moe kernel's tiles: tuned (the engine ships a config file for this GPU "
        "and expert shape) or default (it found none, logged 'Using default MoE config', and ran get_default_config's "
        "small tiles, whose few loads in flight bound a small grid's weight stream)"
    )

    # -- issue 20, replicas and a router: engines of this shape side by side, a router in front (runtime/router.py)
    replicas: int = Field(
        1, ge=1, le=64, description="engines of this shape on the node(s), each on its own GPU group with its own "
        "KV cache and scheduler (as N `vllm serve` processes behind a router)"
    )
    router: RouterName = Field(
        "round_robin", description="how the router in front of the replicas picks one for a request (runtime/router.py)"
    )

    # -- issue 20, data-parallel attention + expert parallelism, several nodes (dpep) --------------------------
    dp: int = Field(1, ge=1, le=64, description="attention data-parallel ranks, each with tp GPUs, its own KV cache "
                    "and requests; the experts split over all dp x tp GPUs (vLLM --data-parallel-size N "
                    "--enable-expert-parallel, SGLang --enable-dp-attention --dp N --ep N)")
    nodes: int = Field(1, ge=1, le=MAX_NODES, description=f"nodes of {GPUS_PER_NODE} GPUs the dp x tp GPUs fill, "
                       "joined by a 400 Gb/s per GPU InfiniBand/RoCE link (hardware/all_to_all.py)")
    all2all_backend: All2AllBackend = Field(
        "deepep_low_latency", description="MoE dispatch/combine kernels with dp > 1 (vLLM --all2all-backend; "
        "deepep_*: normal kernels for prefill steps, low-latency for decode steps)")
    eplb: EplbSpec | None = Field(None, description="expert-parallel load balancing: redundant experts, "
                                  "rebalanced every N steps (vLLM --enable-eplb); null: off")

    @model_validator(mode="before")
    @classmethod
    def _ep_over_dp(cls, data: Any) -> Any:
        """dp > 1 with ep left at 1: the experts spread over every GPU (ep = dp x tp), as `--data-parallel-size N
        --enable-expert-parallel` does; so `--set deployment.dp=8` and a sweep over dp need no ep of their own."""
        if isinstance(data, dict) and isinstance(data.get("dp"), int) and data["dp"] > 1 and data.get("ep", 1) == 1:
            tp = data.get("tp", 1)
            data = {**data, "ep": data["dp"] * (tp if isinstance(tp, int) else 1)}
        return data

    @model_validator(mode="after")
    def _ep_divides_tp(self) -> DeploymentSpec:
        if self.dp > 1:
            check_dp_layout(self)
        elif self.tp % self.ep:
            raise ValueError(f"ep={self.ep} must divide tp={self.tp} (MoE tensor parallel is tp / ep)")
        elif self.tp > GPUS_PER_NODE:
            raise ValueError(f"tp={self.tp} spans nodes: tensor parallelism stays within a node of {GPUS_PER_NODE} "
                             "GPUs (use dp for more GPUs)")
        elif self.nodes > 1 and self.disaggregation is None and self.replicas == 1:
            raise ValueError(f"nodes={self.nodes} with one engine of dp=1: only data-parallel ranks, replicas or "
                             "disaggregated pools spread over nodes (set dp, replicas or disaggregation)")
        if self.eplb is not None and self.dp == 1:
            raise ValueError("eplb: expert-parallel load balancing needs dp > 1 (experts over all ranks)")
        return self

    # fields of newer deployments left out of a dump while at their default (Strict._omit_unused), so a recording of
    # a deployment that does not use them (its `run` line, the event digests) stays byte for byte what it was
    OMITTED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("replicas", "router", "dp", "nodes", "all2all_backend", "eplb",
                                                     "disaggregation", "comm_buffers_in_kv_budget")

    def _omit_derived(self, out: dict[str, Any]) -> None:
        if self.dp > 1 and "ep" in out:  # derived from dp x tp: a sweep over dp or tp derives it afresh
            del out["ep"]

    @model_validator(mode="after")
    def _pools_fit(self) -> DeploymentSpec:
        dis = self.disaggregation
        if dis is not None and dis.num_gpus > self.gpus_available:
            raise ValueError(
                f"{dis.prefill.instances}P{dis.decode.instances}D needs {dis.num_gpus} GPUs (prefill "
                f"{dis.prefill.instances} x tp {dis.prefill.tp}, decode {dis.decode.instances} x tp {dis.decode.tp}); "
                f"the deployment has {self.gpus_available} ({self.nodes} node(s) of {GPUS_PER_NODE}): raise nodes")
        return self

    @model_validator(mode="after")
    def _replicas_fit(self) -> DeploymentSpec:
        if self.replicas > 1 and self.dp > 1:
            # replicas of DP groups (each its own lockstep group and all-to-all) are not built: refused, naming the fix
            raise ValueError(f"replicas={self.replicas} with dp={self.dp}: replicas of a data-parallel group are not "
                             f"simulated; set replicas=1 (one group of dp x tp = {self.dp * self.tp} GPUs) or dp=1 "
                             f"(replicas of tp={self.tp} GPUs each)")
        need, have = self.replicas * self.gpus_per_replica, self.gpus_available
        if need > have:
            raise ValueError(
                f"replicas={self.replicas} x {self.gpus_per_replica} GPUs each (tp={self.tp}"
                f"{f' x dp={self.dp}' if self.dp > 1 else ''}) need {need} GPUs; "
                f"the deployment has {have} ({self.nodes} node(s) of {GPUS_PER_NODE}): lower replicas or tp"
            )
        return self

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.dp

    @property
    def gpus_available(self) -> int:
        return GPUS_PER_NODE * self.nodes

    def replica_gpus(self, replica: int) -> list[int]:
        """The GPUs (node-major global ids) replica `replica` runs on: consecutive groups of gpus_per_replica."""
        n = self.gpus_per_replica
        return list(range(replica * n, (replica + 1) * n))

    @property
    def moe_tp(self) -> int:
        return self.tp // self.ep if self.dp == 1 else 1

    @property
    def world_size(self) -> int:
        """Every GPU of the deployment: dp ranks of tp GPUs each."""
        return self.dp * self.tp

    def describe(self) -> str:
        """In a few words, as labels show it: 'dp 8 x tp 1, ep 8, fp8 weights, deepep_low_latency'; settings left at
        their defaults are not named, the others as name=value (so two deployments that differ never read alike)."""
        if self.disaggregation is not None:
            return self.disaggregation.describe()
        shape = f"dp {self.dp} x tp {self.tp}" if self.dp > 1 else f"tp {self.tp}"
        parts = [f"{self.replicas} x {shape}" if self.replicas > 1 else shape]
        parts += [f"ep {self.ep}"] if self.ep > 1 else []
        parts += [f"{self.nodes} nodes"] if self.nodes > 1 else []
        parts += [f"{self.weight_dtype} weights"] if self.weight_dtype != "bf16" else []
        parts += [f"{self.kv_dtype} KV"] if self.kv_dtype != "bf16" else []
        parts += [self.all2all_backend] if self.dp > 1 else []
        parts += [self.router] if self.replicas > 1 else []
        named = {"tp", "dp", "ep", "replicas", "nodes", "weight_dtype", "kv_dtype", "all2all_backend", "router"}
        fields = type(self).model_fields
        parts += [f"{name}={value}" for name, value in self if name not in named and name != "disaggregation"
                  and value != fields[name].default]
        return ", ".join(parts)



# -- one GPU's shapes ----------------------------------------------------------------------------------------
def shard(model: ModelConfig, dep: DeploymentSpec) -> ModelConfig:
    tp, ep, moe_tp = dep.tp, dep.ep, dep.moe_tp
    if model.num_attention_heads % tp:
        raise DeploymentError(f"tp={tp} must divide the {model.num_attention_heads} attention heads of {model.name}")
    kv = model.num_key_value_heads
    if tp % kv and kv % tp:
        raise DeploymentError(f"tp={tp} and the {kv} KV heads of {model.name} must divide one another")
    changes: dict[str, Any] = dict(
        num_attention_heads=model.num_attention_heads // tp,
        num_key_value_heads=max(1, kv // tp),
        vocab_size=-(-model.vocab_size // tp),
        intermediate_size=model.intermediate_size // tp,
        weight_dtype=dep.weight_dtype,
        kv_dtype=dep.kv_dtype,
    )
    if model.is_moe:
        e, k, mi = model.num_experts, model.num_experts_per_tok, model.moe_intermediate_size
        if e % ep or (k % ep and dep.dp == 1):
            raise DeploymentError(f"ep={ep} must divide the {e} experts and the top-{k} of {model.name}")
        if mi % moe_tp:
            raise DeploymentError(f"moe tp={moe_tp} (tp / ep) must divide moe_intermediate_size {mi}")
        if dep.weight_dtype == "fp8" and (mi // moe_tp) % FP8_BLOCK:
            raise DeploymentError(
                f"fp8 block scales need moe_intermediate_size / moe_tp = {mi // moe_tp} to be a multiple of "
                f"{FP8_BLOCK} (vLLM refuses it too): use ep={dep.tp} (expert parallel) or a smaller tp"
            )
        # with dp > 1 a GPU's expected local top-k (k / ep) may be under one: kept at one, as the DP group prices
        # its MoE from the whole model's top-k (runtime/dp_group.py)
        changes.update(num_experts=e // ep, num_experts_per_tok=max(1, k // ep), moe_intermediate_size=mi // moe_tp)
    return replace(model, **changes)


def kv_replication(model: ModelConfig, tp: int) -> int:
    """How many GPUs hold a copy of each KV head (1 while tp <= KV heads)."""
    return max(1, tp // model.num_key_value_heads)


# -- weights per GPU --------------------------------------------------------------------------------------------
def _matrix_bytes(n: int, k: int, dtype: str) -> float:
    """A [n, k] weight; fp8 adds one fp32 scale per 128x128 block."""
    b = n * k * DTYPE_BYTES[dtype]
    if dtype == "fp8":
        b += math.ceil(n / FP8_BLOCK) * math.ceil(k / FP8_BLOCK) * 4.0
    return b


def layer_weight_bytes(model: ModelConfig, local: ModelConfig) -> float:
    """One layer's weights on one GPU. Linear layers in the deployment's dtype; norms and the router stay bf16
    (vLLM builds Qwen3-MoE's gate with quant_config=None); the router is replicated on every GPU."""
    w, h, d = local.weight_dtype, local.hidden_size, local.head_dim
    b = _matrix_bytes(local.q_dim, h, w) + 2 * _matrix_bytes(local.kv_dim, h, w) + _matrix_bytes(h, local.q_dim, w)
    b += ACT * (2 * h + (2 * d if local.qk_norm else 0))
    if model.is_moe:
        mi = local.moe_intermediate_size
        b += local.num_experts * (_matrix_bytes(2 * mi, h, w) + _matrix_bytes(h, mi, w))
        b += ACT * h * model.num_experts
    else:
        i = local.intermediate_size
        b += _matrix_bytes(2 * i, h, w) + _matrix_bytes(h, i, w)
    return b


def weight_bytes_per_gpu(model: ModelConfig, local: ModelConfig) -> float:
    """All layers, plus the vocab-split embedding and lm_head (bf16, as the FP8 checkpoint keeps them) and the
    final norm."""
    tables = 1 if model.tie_word_embeddings else 2
    return (
        model.num_hidden_layers * layer_weight_bytes(model, local)
        + tables * local.vocab_size * model.hidden_size * ACT
        + ACT * model.hidden_size
    )


# -- activations of the profile run ------------------------------------------------------------------------------
def activation_bytes(model: ModelConfig, local: ModelConfig, max_num_batched_tokens: int,
                     max_num_seqs: int = MAX_NUM_SEQS) -> float:
    """Peak of vLLM's profile_run: a dummy forward of max_num_batched_tokens, then the sampler on max_num_seqs.

    The layer's peak is the MoE block: hidden and residual [T, h], the router logits [T, E] fp32 and fused_moe's
    three caches (gate_up out [T, k, 2 mi], activated [T*k, mi], down out [T, k, h]; sized for the full top-k,
    since an expert-parallel rank keeps the whole top-k and masks the experts it lacks). Attention's q/k/v are
    freed by then. The sampler's logits are gathered over the whole vocabulary."""
    t = max_num_batched_tokens
    h = model.hidden_size
    if model.is_moe:
        tm = min(t, FUSED_MOE_CHUNK)
        k, mi = model.num_experts_per_tok, local.moe_intermediate_size
        mlp = tm * k * (2 * mi + mi + h) * ACT + t * model.num_experts * 4.0
    else:
        mlp = t * 3 * local.intermediate_size * ACT
    attn = t * (local.q_dim + 2 * local.kv_dim + local.q_dim) * ACT
    hidden = 2 * t * h * ACT  # hidden states and residual
    layer = hidden + max(mlp, attn)
    sampler = min(max_num_seqs, t) * model.vocab_size * 4.0 * SAMPLER_FP32_COPIES
    # profile_run frees the forward's activations before _dummy_sampler_run(last_hidden_states)
    # (vllm/v1/worker/gpu_model_runner.py): the peak is the larger of the two, not their sum
    return max(layer, hidden + sampler)


# -- placement ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Placement:
    """What one GPU of the deployment holds, in bytes, and the KV cache that leaves (vLLM's startup log)."""

    gpu: str
    num_gpus: int
    capacity_bytes: float
    budget_bytes: float  # gpu_memory_utilization x capacity
    weights_bytes: float
    activation_bytes: float
    cuda_graph_bytes: float
    non_torch_bytes: float
    kv_bytes_per_token: float  # all layers, as one token occupies this GPU's cache
    kv_blocks: int
    max_model_len: int
    kv_replication: int

    @property
    def kv_cache_bytes(self) -> float:
        return self.budget_bytes - self.weights_bytes - self.activation_bytes - self.cuda_graph_bytes - \
            self.non_torch_bytes

    @property
    def kv_tokens(self) -> int:
        return self.kv_blocks * BLOCK_SIZE

    @property
    def max_concurrency(self) -> float:
        return self.kv_tokens / self.max_model_len

    def per_gpu(self) -> dict[str, float | int]:
        """The figures of `layerscope plan --json` and of the deployment event, GiB rounded to 0.01."""
        return {
            "capacity_gib": _gib(self.capacity_bytes),
            "weights_gib": _gib(self.weights_bytes),
            "activation_gib": _gib(self.activation_bytes),
            "cuda_graph_gib": _gib(self.cuda_graph_bytes),
            "non_torch_gib": _gib(self.non_torch_bytes),
            "kv_cache_gib": _gib(self.kv_cache_bytes),
            "kv_tokens": self.kv_tokens,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "max_concurrency": round(self.max_concurrency, 2),
        }

    def log_lines(self) -> list[str]:
        """The lines vLLM logs at startup for the same figures."""
        return [
            f"Model loading took {self.weights_bytes / GiB:.4f} GiB memory",
            f"Available KV cache memory: {self.kv_cache_bytes / GiB:.2f} GiB",
            f"GPU KV cache size: {self.kv_tokens:,} tokens",
            f"Maximum concurrency for {self.max_model_len:,} tokens per request: {self.max_concurrency:.2f}x",
        ]


def _gib(b: float) -> float:
    return round(b / GiB, 2)


def non_torch_gib(dep: DeploymentSpec) -> float:
    """The non-torch memory vLLM's profiler subtracts from the KV budget: with the communicators' buffers (the
    accounting before vLLM PR #25359) or without them (NON_TORCH_FORWARD_GIB)."""
    if dep.comm_buffers_in_kv_budget:
        return NON_TORCH_GIB[min(dep.world_size, 2)]
    return NON_TORCH_FORWARD_GIB


def place(model: ModelConfig, gpu: GPU, dep: DeploymentSpec, max_num_batched_tokens: int = 8192,
          max_num_seqs: int = MAX_NUM_SEQS) -> Placement:
    """One GPU's memory; raises DeploymentError when the weights, or one max_model_len request, do not fit."""
    local = shard(model, dep)
    capacity = gpu.memory_bytes
    budget = dep.gpu_memory_utilization * capacity
    max_len = dep.max_model_len or model.max_position_embeddings
    kv_per_token = local.kv_bytes_per_token(dep.kv_dtype)
    p = Placement(
        gpu=gpu.name,
        num_gpus=dep.world_size,
        capacity_bytes=capacity,
        budget_bytes=budget,
        weights_bytes=weight_bytes_per_gpu(model, local) + eplb_bytes_per_gpu(model, local, dep),
        activation_bytes=activation_bytes(model, local, max_num_batched_tokens, max_num_seqs),
        cuda_graph_bytes=CUDA_GRAPH_GIB * GiB if dep.cuda_graphs and dep.cuda_graph_memory_profiled else 0.0,
        non_torch_bytes=non_torch_gib(dep) * GiB,
        kv_bytes_per_token=kv_per_token,
        kv_blocks=0,
        max_model_len=max_len,
        kv_replication=kv_replication(model, dep.tp),
    )
    if p.weights_bytes > budget:
        raise DeploymentError(_too_big(model, gpu, dep, p.weights_bytes, max_num_batched_tokens))
    if p.kv_cache_bytes <= 0:
        raise DeploymentError(
            f"{p.weights_bytes / GiB:.1f} GiB of weights, {p.activation_bytes / GiB:.1f} GiB of activations and "
            f"{(p.cuda_graph_bytes + p.non_torch_bytes) / GiB:.1f} GiB of graphs and buffers leave no KV cache in "
            f"{dep.gpu_memory_utilization:g} x {capacity / GiB:.1f} GiB per GPU on {gpu.name}: raise tp, "
            "gpu_memory_utilization, or lower max_num_batched_tokens"
        )
    p = replace(p, kv_blocks=int(p.kv_cache_bytes // (BLOCK_SIZE * kv_per_token)))
    if p.kv_tokens < max_len:  # vLLM refuses to start in this case (kv_cache_utils.check_enough_kv_cache_memory)
        raise DeploymentError(
            f"max_model_len {max_len} needs {max_len * kv_per_token / GiB:.2f} GiB of KV cache per GPU, more than "
            f"the {p.kv_cache_bytes / GiB:.2f} GiB available ({p.kv_tokens} tokens): lower max_model_len or raise tp"
        )
    return p


def eplb_bytes_per_gpu(model: ModelConfig, local: ModelConfig, dep: DeploymentSpec) -> float:
    """EPLB's redundant experts: ceil(redundant / ep) more experts on each GPU, in every MoE layer (vLLM's EPLB
    holds each physical expert's full weights)."""
    if dep.eplb is None or not model.is_moe or not dep.eplb.num_redundant_experts:
        return 0.0
    mi, h, w = local.moe_intermediate_size, local.hidden_size, local.weight_dtype
    per_expert = _matrix_bytes(2 * mi, h, w) + _matrix_bytes(h, mi, w)
    return model.num_hidden_layers * math.ceil(dep.eplb.num_redundant_experts / dep.ep) * per_expert


@dataclass(frozen=True)
class RankPlacement:
    """One data-parallel rank of a dp > 1 deployment: its GPUs, node, experts (logical ids each GPU holds) and the
    memory of each of its GPUs (every rank is the same shape: vLLM sizes each rank's KV cache alike)."""

    rank: int
    node: int
    gpus: tuple[int, ...]
    experts: tuple[tuple[int, int], ...]  # per GPU: [first, last] logical expert id, before EPLB's redundant ones
    redundant_experts: int  # EPLB copies per GPU
    per_gpu: dict[str, float | int]


def rank_placements(model: ModelConfig, p: Placement, dep: DeploymentSpec) -> list[RankPlacement]:
    """vLLM's layout with --data-parallel-size dp --enable-expert-parallel: rank r holds GPUs r*tp .. r*tp+tp-1
    (ranks fill node 0 first), GPU g holds experts g*E/ep .. (g+1)*E/ep-1 (FusedMoE's linear expert map)."""
    per = model.num_experts // dep.ep if model.is_moe else 0
    extra = math.ceil(dep.eplb.num_redundant_experts / dep.ep) if dep.eplb is not None else 0
    out = []
    for r in range(dep.dp):
        gpus = tuple(range(r * dep.tp, (r + 1) * dep.tp))
        out.append(RankPlacement(r, gpus[0] // GPUS_PER_NODE, gpus, tuple((g * per, (g + 1) * per - 1) for g in gpus),
                                 extra, p.per_gpu()))
    return out


def _too_big(model: ModelConfig, gpu: GPU, dep: DeploymentSpec, weights: float, tokens: int) -> str:
    hint = []
    for tp in (2, 4, 8):
        if tp <= dep.tp or model.num_attention_heads % tp:
            continue
        try:
            place(model, gpu, dep.model_copy(update={"tp": tp, "ep": 1}), tokens)
        except DeploymentError:
            continue
        hint.append(f"tp>={tp}")
        break
    if dep.weight_dtype == "bf16":
        try:
            place(model, gpu, dep.model_copy(update={"weight_dtype": "fp8"}), tokens)
            hint.append("weight_dtype=fp8")
        except DeploymentError:
            pass
    advice = f": use {' or '.join(hint)}" if hint else ": it does not fit on one node of 8"
    return (
        f"weights need {weights / GiB:.1f} GiB per GPU at tp={dep.tp} in {dep.weight_dtype}; an {gpu.name} has "
        f"{gpu.memory_bytes / GiB:.1f} GiB{advice}"
    )


# -- does it fit -------------------------------------------------------------------------------------------------
def pool_deployment(dep: DeploymentSpec, pool: PoolSpec) -> DeploymentSpec:
    """The deployment one engine of a disaggregated pool runs: the pool's tp and ep, no pools of its own; with
    dp > 1 a DP group of dp x tp GPUs, the experts over all of them, on the nodes those GPUs fill."""
    if pool.dp == 1:
        return dep.model_copy(update={"tp": pool.tp, "ep": pool.ep, "disaggregation": None})
    world = pool.dp * pool.tp
    return DeploymentSpec.model_validate({**dep.model_dump(), "tp": pool.tp, "dp": pool.dp, "ep": world,
                                          "nodes": -(-world // GPUS_PER_NODE), "replicas": 1,
                                          "disaggregation": None})


def check_fits(model: ModelConfig, gpu: GPU, runtime: str, dep: DeploymentSpec | None, free_hbm_gib: float | None,
               serving: bool, max_num_batched_tokens: int, max_num_seqs: int) -> None:
    """Raise DeploymentError (a ValueError: a validation error of the scenario) if the deployment cannot run."""
    if dep is not None:
        if runtime != "vllm":
            raise DeploymentError("a deployment shards the real model: it needs runtime vllm")
        if dep.replicas > 1 and not serving:
            raise DeploymentError(f"field 'deployment.replicas': {dep.replicas} replicas serve a workload; the "
                                  "one-request shorthand (prompt_len, decode_steps) runs on one engine")
        if dep.disaggregation is not None:
            if dep.replicas > 1:
                raise DeploymentError("field 'deployment.replicas': a disaggregated deployment's engines are its "
                                      "pools' (disaggregation.prefill/decode.instances); leave replicas at 1")
            if not serving:
                raise DeploymentError("deployment.disaggregation serves a workload: give workload (many requests)")
            for name in ("prefill", "decode"):  # each pool's engines must fit, the message naming the pool
                try:
                    place(model, gpu, pool_deployment(dep, getattr(dep.disaggregation, name)),
                          max_num_batched_tokens, max_num_seqs)
                except DeploymentError as e:
                    raise DeploymentError(f"deployment.disaggregation.{name}: {e}") from None
            return
        place(model, gpu, dep, max_num_batched_tokens, max_num_seqs)
    check_free_hbm(model, gpu, runtime, dep, free_hbm_gib, serving)


def check_free_hbm(model: ModelConfig, gpu: GPU, runtime: str, dep: DeploymentSpec | None,
                   free_hbm_gib: float | None, serving: bool) -> None:
    """free_hbm_gib of a deployment, or of a serving run (whole-model times: one GPU at tp 1 when it names no
    deployment), must fit beside the weights on that GPU: a pool the weights leave no room for is refused like
    any deployment that does not fit, naming both figures. A one-request run without a deployment is a study
    of one layer, and the article runtime the article's layer, not a vLLM deployment: both keep free_hbm_gib
    as given."""
    if free_hbm_gib is None or runtime != "vllm" or (dep is None and not serving):
        return
    dep = dep or DeploymentSpec()
    weights = weight_bytes_per_gpu(model, shard(model, dep))
    free = free_hbm_gib * GiB
    if weights + free > gpu.memory_bytes:
        where = f"{model.name} at tp={dep.tp} in {dep.weight_dtype}"
        room = [tp for tp in (2, 4, 8) if tp > dep.tp and not model.num_attention_heads % tp
                and weight_bytes_per_gpu(model, shard(model, dep.model_copy(update={"tp": tp, "ep": 1}))) + free
                <= gpu.memory_bytes]
        advice = f"use deployment.tp>={room[0]} or lower free_hbm_gib" if room else "lower free_hbm_gib"
        raise DeploymentError(
            f"free_hbm_gib {free_hbm_gib:g} GiB and {weights / GiB:.1f} GiB of weights per GPU ({where}) "
            f"exceed the {gpu.memory_bytes / GiB:.1f} GiB of an {gpu.name}: {advice}"
        )
