"""Kernel plans: what one decoder layer launches for a prefill chunk and for a decode step.

A runtime turns a ModelConfig and a token count into a list of Kernels (FLOPs, bytes, GEMM shape, name
as a profiler shows it). It knows nothing of time: hardware/cost.py prices the kernels, the engine
schedules them. One small base class, one file per runtime (Vidur style):

    RuntimePlan.prefill_chunk(model, tokens, context_before) -> [Kernel]   one chunk of a prompt
    RuntimePlan.decode_step(model, context_len, batch)        -> [Kernel]   one new token per sequence
    RuntimePlan.step_kernels(model, batch)                    -> [Kernel]   one engine step of many sequences,
                                                          batch = [(num_new_tokens, num_context_tokens)] per sequence
    RuntimePlan.outside_layer_kernels(model, batch)           -> [Kernel]   paid once per model step, not per layer
    RuntimePlan.switch_over(model)                            -> [Kernel]   fixed costs of the first decode step
    RuntimePlan.topology(model)                               -> Topology   stages and edges per phase

Fused launches: kernels with own_launch=False continue the launch of the kernel before them (the article's
decode pipeline is one launch of five stages, stream "decode_fused"); the engine should lay them end to end
on that stream, and the cost model charges the launch overhead once.
"""

from __future__ import annotations

from dataclasses import dataclass

from layerscope.events import PhaseTopology, Topology, TopologyEdge, TopologyNode
from layerscope.hardware.cost import CostModel
from layerscope.hardware.kernel import Kernel
from layerscope.model.config import DTYPE_BYTES, ModelConfig

ACT_BYTES = 2.0  # activations travel in bf16 between kernels
TOPOLOGY_PREFILL_TOKENS = 4096  # the chunk the topology's edge bytes describe
TOPOLOGY_DECODE_CONTEXT = 8192


def workspace_bytes(model: ModelConfig, tokens: int) -> float:
    """One layer's transient activations for `tokens` tokens, bf16 (x, q, k, v, attention out, MLP)."""
    m = model
    mlp = 3 * m.num_experts_per_tok * m.moe_intermediate_size if m.is_moe else 3 * m.intermediate_size
    return tokens * ACT_BYTES * (2 * m.hidden_size + m.q_dim + 2 * m.kv_dim + mlp)


def weight_bytes(params: float, dtype: str, group: int = 0) -> float:
    """Bytes of `params` weights stored in `dtype`, plus one fp16 scale and zero per group if quantized."""
    b = params * DTYPE_BYTES[dtype]
    if dtype in ("int2", "int4") and group:
        b += params / group * 2 * DTYPE_BYTES["fp16"]
    return b


def stored_weight_dtype(model: ModelConfig) -> str:
    """Weights as a GPU runtime would hold them: fp32/fp16 checkpoints (the scaled numeric presets) run in bf16."""
    return "bf16" if model.weight_dtype in ("fp32", "fp16") else model.weight_dtype


def gemm_kernel(
    name: str,
    stage: str,
    m: int,
    n: int,
    k: int,
    w_dtype: str,
    group: int = 0,
    kind: str = "gemm",
    extra_out_bytes: float = 0.0,
) -> Kernel:
    """x[m, k] @ W[k, n]: weights read once, activations in and out in bf16."""
    flops = 2.0 * m * n * k
    byts = weight_bytes(n * k, w_dtype, group) + ACT_BYTES * (m * k + m * n) + extra_out_bytes
    return Kernel(
        name=name,
        stage=stage,
        kind=kind,  # type: ignore[arg-type]
        flops=flops,
        bytes=byts,
        shapes=f"x[{m},{k}] @ W[{k},{n}] ({w_dtype})",
        gemm=(m, n, k),
        dtype=w_dtype,
    )


class RuntimePlan:
    name: str = ""
    default_page_size: int = 16

    def prefill_chunk(self, model: ModelConfig, tokens: int, context_before: int, dtype: str = "bf16") -> list[Kernel]:
        raise NotImplementedError

    def decode_step(self, model: ModelConfig, context_len: int, batch: int = 1, dtype: str = "bf16") -> list[Kernel]:
        raise NotImplementedError

    def step_kernels(self, model: ModelConfig, batch: list[tuple[int, int]], dtype: str = "bf16") -> list[Kernel]:
        """One layer's kernels for a mixed step; each entry is (num_new_tokens, num_context_tokens) of one sequence.
        One sequence alone gives exactly prefill_chunk (new > 1, or no context yet) or decode_step (new == 1):
        both engines plan through here, so a deployment (sharded shapes, collectives) changes one place."""
        raise NotImplementedError

    def outside_layer_kernels(self, model: ModelConfig, batch: list[tuple[int, int]]) -> list[Kernel]:
        """What a model step runs outside its decoder layers (embedding, final norm, lm_head, sampling, host
        time): priced once per step. None without a deployment (one layer's study); ShardedRuntime (sharded.py)
        returns them under one."""
        return []

    def switch_over(self, model: ModelConfig) -> list[Kernel]:
        return []

    # -- topology --------------------------------------------------------------------------------------------
    def stage_info(self, stage: str) -> tuple[str, str]:
        """(label, memory access pattern) of a stage; runtimes override for their own stages."""
        return STAGE_INFO.get(stage, (stage.replace("_", " "), ""))

    def topology(
        self,
        model: ModelConfig,
        cost: CostModel | None = None,
        prefill_tokens: int = TOPOLOGY_PREFILL_TOKENS,
        decode_context: int = TOPOLOGY_DECODE_CONTEXT,
    ) -> Topology:
        """Stages in launch order per phase (node ids == Kernel.stage), edges carrying the activation bytes of
        one prefill chunk of `prefill_tokens` / one decode step at `decode_context`. With a cost model, each
        stage also gets its bound (that of its slowest kernel)."""
        prefill = self.prefill_chunk(model, prefill_tokens, 0)
        decode = self.switch_over(model) + self.decode_step(model, decode_context)
        return Topology(
            model=model.name,
            runtime=self.name,
            prefill=self._phase(model, prefill, prefill_tokens, cost),
            decode=self._phase(model, decode, 1, cost),
        )

    def _phase(self, model: ModelConfig, kernels: list[Kernel], tokens: int, cost: CostModel | None) -> PhaseTopology:
        groups = by_stage(kernels)
        order = list(groups)
        nodes = []
        for stage, ks in groups.items():
            label, access = self.stage_info(stage)
            main = max(ks, key=lambda k: k.bytes + k.flops / 100)
            bound = None
            if cost is not None:
                costs = [cost.cost(k) for k in ks]
                bound = max(costs, key=lambda c: c.time_us).bound
            nodes.append(
                TopologyNode(
                    id=stage,
                    label=label,
                    kind=main.kind,
                    kernels=[k.name for k in ks],
                    precision=", ".join(sorted({k.dtype for k in ks if k.dtype})),
                    access=access,
                    bound=bound,
                )
            )
        hidden_bytes = tokens * model.hidden_size * ACT_BYTES
        edges = [TopologyEdge(source=a, target=b, bytes=hidden_bytes) for a, b in zip(order, order[1:], strict=False)]
        if "attention" in groups:  # the KV cache the attention reads and the projection writes
            kv = sum(k.bytes for k in groups["attention"] if k.kind in ("memory", "attention"))
            nodes.append(TopologyNode(id="kv_cache", label="KV cache (paged)", kind="cache", access="paged"))
            edges.append(TopologyEdge(source="kv_cache", target="attention", bytes=kv))
        return PhaseTopology(nodes=nodes, edges=edges)


STAGE_INFO: dict[str, tuple[str, str]] = {
    "embedding": ("embedding lookup", "gather one row per token"),
    "input_norm": ("input RMSNorm", "row-wise stream"),
    "qkv_proj": ("QKV projection", "streamed weights"),
    "qk_norm_rope": ("q/k norm + RoPE", "row-wise in place"),
    "attention": ("attention", "paged KV gather"),
    "o_proj": ("output projection", "streamed weights"),
    "post_norm": ("residual add + RMSNorm", "row-wise stream"),
    "router": ("router (top-k softmax)", "small GEMM, row-wise"),
    "experts": ("experts (fused MoE)", "expert-gathered weights"),
    "gate_up_proj": ("gate/up projection", "streamed weights"),
    "act": ("SiLU x up", "elementwise stream"),
    "down_proj": ("down projection", "streamed weights"),
    "residual_add": ("residual add", "elementwise stream"),
    "chunk_scheduler": ("chunk scheduler", "page-table remap"),
    "ffn": ("SwiGLU FFN", "streamed quantized weights"),
    "switch_over": ("decode switch-over", "fixed costs"),
    "attn_all_reduce": ("all-reduce (attention out)", "NVLink, tensor parallel"),
    "moe_all_reduce": ("all-reduce (MoE out)", "NVLink, tensor/expert parallel"),
    "mlp_all_reduce": ("all-reduce (MLP out)", "NVLink, tensor parallel"),
    "embedding_all_reduce": ("all-reduce (embedding)", "NVLink, vocab parallel"),
    "final_norm": ("final RMSNorm", "row-wise stream"),
    "lm_head": ("lm_head (vocab slice)", "streamed weights"),
    "logits_all_gather": ("all-gather (logits)", "NVLink, vocab parallel"),
    "sampling": ("sampling", "row-wise over the vocabulary"),
}


@dataclass(frozen=True)
class StageCost:
    name: str
    kind: str
    time_us: float
    flops: float
    bytes: float
    bound: str
    kernels: list[str]


def by_stage(kernels: list[Kernel]) -> dict[str, list[Kernel]]:
    """Kernels grouped per stage, stages in first-launch order (dicts keep insertion order)."""
    groups: dict[str, list[Kernel]] = {}
    for k in kernels:
        groups.setdefault(k.stage, []).append(k)
    return groups


def stage_costs(kernels: list[Kernel], cost: CostModel) -> list[StageCost]:
    """Kernels merged per stage in launch order; kind and bound are those of the stage's slowest kernel."""
    out = []
    for stage, ks in by_stage(kernels).items():
        costs = [cost.cost(k) for k in ks]
        slow = max(costs, key=lambda c: c.time_us)
        out.append(
            StageCost(
                name=stage,
                kind=slow.kernel.kind,
                time_us=sum(c.time_us for c in costs),
                flops=sum(k.flops for k in ks),
                bytes=sum(k.bytes for k in ks),
                bound=slow.bound,
                kernels=[k.name for k in ks],
            )
        )
    return out
