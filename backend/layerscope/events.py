"""Simulator events: one versioned, typed schema, exported as JSON Schema.

Every event carries `kind` and `t_us` (simulated GPU time, microseconds, at full model size).
Events are plain records: the engine makes them, the CLI writes them as JSON lines, the server
batches them into websocket frames, the browser renders them. Nothing else.

Sizes, stated everywhere: timings, bytes and memory are simulated at the real model's size;
`numerics` and `experts.counts` come from the numpy layer run at a scaled size (`scaled_model`).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

EVENT_SCHEMA_VERSION = 2  # 2: instance (and a kernel's rank) on step, kernel, request and page events
_E = TypeVar("_E", bound=BaseModel)

Phase = Literal["prefill", "decode", "idle", "validate"]
Bound = Literal["compute", "memory", "latency"]
StageKind = Literal["norm", "gemm", "attention", "moe", "elementwise", "memory", "overhead", "collective"]


class _Event(BaseModel):
    # inf/NaN (e.g. a NaN-poisoned rel_error) serialize as "Infinity"/"NaN" strings, which parse back.
    # defer_build (every model here): a class's validator and serializer are built when it is first used, not at
    # import. A summary-only run (`layerscope bench`, a sweep point) uses one or two of these ~30 classes; building
    # them all was most of this module's import (bench/README.md, issue 23).
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="strings", defer_build=True)
    t_us: float = Field(..., ge=0.0, description="simulated time of the event, microseconds")


class PhaseEvent(_Event):
    kind: Literal["phase"] = "phase"
    phase: Phase
    detail: str = ""


class KernelEvent(_Event):
    """One kernel launch; t_us == start_us."""

    kind: Literal["kernel"] = "kernel"
    name: str  # as a profiler shows it (qwen3_prefill_flash_attn_chunked, fused_moe_kernel, ...)
    stage: str  # input_norm, qkv_proj, attention, experts, ...
    stage_kind: StageKind
    phase: Phase
    stream: str = "compute"  # one timeline row per stream
    start_us: float
    dur_us: float
    flops: float
    bytes: float
    bound: Bound
    hbm_util: float = Field(..., ge=0.0, le=1.0)
    l2_hit: float = Field(..., ge=0.0, le=1.0)
    chunk: int | None = None  # prefill chunk id
    step: int | None = None  # decode step
    shapes: str = ""  # human-readable shapes, e.g. "x[4096,4096] @ W[4096,9216]"
    # "model": a whole-model cost paid once per step (embedding lookup, the article's switch-over), drawn apart
    # from the one-layer timeline and left out of per-layer stage shares and HBM utilisation
    scope: Literal["layer", "model"] = "layer"
    # where dur_us comes from: "measured" (a measured kernel table, named in `table` as "system · backend version ·
    # file · kernel", hardware/kernel.py TableRef.label) or "analytic" (the roofline of hardware/cost.py; table "")
    source: Literal["measured", "analytic"] = "analytic"
    table: str = ""
    instance: int = Field(default=0, ge=0, description="the engine instance it happened on (0 in a one-instance run)")
    # the GPU of the instance's group it ran on: the engine simulates one GPU of the group (its shard, its collectives)
    rank: int = Field(default=0, ge=0, description="the GPU within the instance's group (0: the one simulated)")


class ChunkEvent(_Event):
    """The chunk scheduler's decision for one prefill chunk: token range, pages written, barrier."""

    kind: Literal["chunk"] = "chunk"
    chunk: int
    token_start: int
    token_end: int  # exclusive
    chunk_size: int
    reason: Literal["default", "low_memory", "disabled"] = "default"
    pages: list[int] = Field(default_factory=list, description="logical KV pages this chunk writes")
    barrier_us: float = 0.0  # time at which the chunk's barrier completes
    instance: int = Field(default=0, ge=0, description="the engine instance it happened on (0 in a one-instance run)")


class BanksEvent(_Event):
    """Occupancy snapshot of every bank (mergeable: a later snapshot supersedes an earlier one)."""

    kind: Literal["banks"] = "banks"
    used: list[int]  # pages in use per bank
    capacity: int  # pages per bank
    reserved: list[int] = Field(default_factory=list, description="hint-reserved pages per bank")


class PageAllocEvent(_Event):
    kind: Literal["page_alloc"] = "page_alloc"
    owner: str  # sequence id, or "hint", or "tenant" for other tenants' pages
    phase: Phase
    logical: list[int]  # logical page index within the owner's block table
    banks: list[int]
    slots: list[int]
    request_id: int | None = None  # the request whose block table this page belongs to (serving runs)
    instance: int = Field(default=0, ge=0, description="the engine instance it happened on (0 in a one-instance run)")


class PageFreeEvent(_Event):
    kind: Literal["page_free"] = "page_free"
    owner: str
    banks: list[int]
    slots: list[int]
    request_id: int | None = None  # the request whose block table this page belongs to (serving runs)
    instance: int = Field(default=0, ge=0, description="the engine instance it happened on (0 in a one-instance run)")


class PageCacheEvent(_Event):
    """A finished or preempted request's blocks that stay in the prefix cache (serving runs, prefix caching on):
    their owner becomes `prefix_cache`; other requests may still share them, or they wait, unused, to be hit
    again or evicted (least recently freed first, `page_evict`)."""

    kind: Literal["page_cache"] = "page_cache"
    owner: str  # the request that lets go of them ("req<id>")
    banks: list[int]
    slots: list[int]
    request_id: int
    instance: int = Field(0, ge=0, description="the engine instance it happened on (0 in a one-instance run)")


class AllocFailEvent(_Event):
    """An allocation that could not be served; free memory may still look ample."""

    kind: Literal["alloc_fail"] = "alloc_fail"
    owner: str
    pages_wanted: int
    contiguous: bool
    free_pages: int
    largest_free_run: int
    reason: str
    instance: int = Field(default=0, ge=0, description="the engine instance it happened on (0 in a one-instance run)")


class PageMigrateEvent(_Event):
    kind: Literal["page_migrate"] = "page_migrate"
    owner: str
    logical: int
    from_bank: int
    from_slot: int
    to_bank: int
    to_slot: int
    bytes: float
    dur_us: float
    reason: Literal["make_room", "compact"] = "make_room"
    request_id: int | None = None  # the request whose block table this page belongs to (serving runs)
    instance: int = Field(default=0, ge=0, description="the engine instance it happened on (0 in a one-instance run)")


class PageEvictEvent(_Event):
    kind: Literal["page_evict"] = "page_evict"
    owner: str
    logical: list[int]
    banks: list[int]
    slots: list[int]
    bytes: float
    request_id: int | None = None  # the request whose block table this page belongs to (serving runs)
    instance: int = Field(default=0, ge=0, description="the engine instance it happened on (0 in a one-instance run)")


class MemoryEvent(_Event):
    kind: Literal["memory"] = "memory"
    hbm_total_bytes: float
    hbm_used_bytes: float
    hbm_free_bytes: float
    kv_bytes: float  # KV cache of the whole model (all layers)
    largest_free_run_bytes: float
    activation_bytes: float = 0.0  # transient workspace (prefill pulses wide, decode narrow)


class DecodeStepEvent(_Event):
    kind: Literal["decode_step"] = "decode_step"
    step: int
    context_len: int
    latency_us: float  # one layer
    model_latency_us: float  # whole model (layer x layers, plus switch-over costs)
    sla_us: float
    jitter_us: float  # deviation from the running median
    over_sla: bool
    stage_us: dict[str, float] = Field(default_factory=dict)
    cross_bank_reads: int = 0
    refetched_pages: int = 0
    instance: int = Field(default=0, ge=0, description="the engine instance it happened on (0 in a one-instance run)")


class RequestEvent(_Event):
    """A request's life in a serving run: sent by the client, first scheduled, first token, preempted, finished."""

    kind: Literal["request"] = "request"
    request_id: int
    # rejected: longer than max_model_len, answered with vLLM's 400 when it arrives (it never runs)
    # transfer_start / transfer_done: a disaggregated run's KV leaving the prefill engine for the decode engine
    # (on the decode instance; runtime/disagg.py); the client's first token comes with transfer_done
    what: Literal["arrive", "scheduled", "first_token", "preempted", "finished", "rejected", "transfer_start",
                  "transfer_done"]
    input_len: int
    output_len: int
    num_computed_tokens: int  # prompt + output tokens whose KV is computed (0 again after a preemption)
    num_output_tokens: int  # generated so far
    # arrive: what lies between the client and the engine (tokenizer, HTTP, SSE; runtime/frontend_latency.py), which
    # the client adds to this request's every token time (TTFT and E2EL include it); 0 on the other events
    frontend_us: float = 0.0
    instance: int = Field(default=0, ge=0, description="the engine instance it happened on (0 in a one-instance run)")


class StepEvent(_Event):
    """One engine step of a serving run: what the scheduler put in it and how long it took; t_us == start_us."""

    kind: Literal["step"] = "step"
    index: int
    start_us: float
    dur_us: float  # one layer
    model_dur_us: float  # the whole model step (what a client sees)
    num_seqs: int
    prefill_tokens: int
    decode_tokens: int
    token_budget: int
    request_ids: list[int]
    num_tokens: list[int]  # tokens scheduled per request this step, parallel to request_ids
    cached_blocks: int | None = None  # prefix-cache blocks reused by requests admitted this step
    # tokens each request sampled at the step's end, parallel to request_ids (the scheduler's StepResult: 1 when the
    # step computed all of its known tokens, else 0): what metrics and the dashboard read, never replaying the rule
    num_sampled: list[int] = Field(default_factory=list)
    instance: int = Field(default=0, ge=0, description="the engine instance it happened on (0 in a one-instance run)")


class FaultEvent(_Event):
    kind: Literal["fault"] = "fault"
    fault: str  # a FaultKind, or crc_mismatch, alloc_fail, ...
    action: Literal["injected", "detected", "recovered"]
    detail: str
    banks: list[int] = Field(default_factory=list)
    step: int | None = None
    chunk: int | None = None


class CrcEvent(_Event):
    """A validation pass: CRC32 of each bank's cached K/V against the value recorded when written."""

    kind: Literal["crc"] = "crc"
    checked_banks: int
    bad_banks: list[int]
    source: Literal["numpy", "metadata"]  # numpy: real cached data at the scaled size


class NumericsEvent(_Event):
    """Error of the numpy layer (scaled size) against a clean reference run of the same schedule."""

    kind: Literal["numerics"] = "numerics"
    phase: Phase
    scaled_model: str
    tokens: int
    rel_error: float  # ||y - y_ref|| / ||y_ref||; inf when non-finite values appear
    max_abs_error: float
    nan_count: int
    inf_count: int
    step: int | None = None
    chunk: int | None = None


class ExpertsEvent(_Event):
    kind: Literal["experts"] = "experts"
    phase: Phase
    step: int | None = None
    chunk: int | None = None
    scaled_model: str
    counts: list[int]  # tokens routed to each expert by the scaled numpy router
    distinct_full: float  # expected distinct experts whose weights this step reads at full size
    assumed: Literal["balanced", "skewed"]


class SummaryEvent(_Event):
    kind: Literal["summary"] = "summary"
    figures: dict[str, float | int | bool | str]


class DeploymentPerGpu(BaseModel):
    """One GPU's memory, as `layerscope plan --json` gives it (vLLM's startup accounting)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    capacity_gib: float
    weights_gib: float
    activation_gib: float
    cuda_graph_gib: float
    non_torch_gib: float
    kv_cache_gib: float
    kv_tokens: int
    kv_bytes_per_token: float  # all layers, as one token occupies this GPU's cache
    max_concurrency: float


class DeploymentEvent(_Event):
    """The deployment the run simulates (one event at t_us=0); the timeline is one GPU of the group."""

    kind: Literal["deployment"] = "deployment"
    gpu: str
    num_gpus: int
    tp: int
    ep: int
    moe_tp: int
    weight_dtype: str
    kv_dtype: str
    gpu_memory_utilization: float
    cuda_graphs: bool
    async_scheduling: bool
    cuda_graph_memory_profiled: bool
    max_model_len: int
    per_gpu: DeploymentPerGpu
    # the engine's scheduler limits (vLLM's defaults for `vllm serve` on this GPU unless the scenario sets them)
    max_num_batched_tokens: int
    max_num_seqs: int
    prefix_caching: bool
    scheduler_source: str  # where the two limits come from


class DPGroupEvent(_Event):
    """A data-parallel group (deployment.dp > 1, issue 20), once at t_us=0: its ranks, where each sits, the experts
    each GPU holds, and how its MoE tokens move between them."""

    kind: Literal["dp_group"] = "dp_group"
    dp: int
    tp: int
    ep: int
    nodes: int
    all2all_backend: str
    eplb: dict[str, int] | None = None
    ranks: list[dict[str, Any]]  # per DP rank: rank, node, gpus, experts ([first, last] per GPU), per_gpu memory


class DPStepEvent(_Event):
    """One lockstep step of a data-parallel group (t_us == start_us): every rank runs it, a rank with nothing
    scheduled a dummy batch; the slowest rank sets its duration, the others idle until it ends. Each rank's own
    step is its `step` event (instance = the rank), whose model_dur_us is this group step's."""

    kind: Literal["dp_step"] = "dp_step"
    index: int
    start_us: float
    dur_us: float  # the whole model step, the slowest rank's
    slowest_rank: int
    busy_us: list[float]  # per rank: its own model step's work (attention on its batch, the group's MoE, all-to-all)
    tokens: list[int]  # per rank: tokens it scheduled (0: a dummy step)
    a2a_us: float  # dispatch + combine over every MoE layer of the step
    moe_us: float  # the routed experts over every MoE layer (the busiest GPU's, on the group's tokens)
    a2a_kernels: str  # which dispatch/combine kernels ran (DeepEP normal or low-latency, pplx, ...)
    expert_rows: list[float]  # per GPU of the group: token-expert rows its experts computed, per layer (mean)
    eplb_rebalanced: bool = False  # EPLB re-placed the experts before this step


class RunEvent(_Event):
    """First line of a recording (`layerscope run --events`, `POST /api/events`), never made by the engine: the
    spec the events were simulated from, so a replay shows that run and no other."""

    kind: Literal["run"] = "run"
    scenario: str = Field(..., description="the spec's name")
    spec: dict[str, Any] = Field(..., description="the validated scenario spec, defaults filled in")


Event = Annotated[
    PhaseEvent
    | KernelEvent
    | ChunkEvent
    | BanksEvent
    | PageAllocEvent
    | PageFreeEvent
    | PageCacheEvent
    | AllocFailEvent
    | PageMigrateEvent
    | PageEvictEvent
    | MemoryEvent
    | DecodeStepEvent
    | RequestEvent
    | StepEvent
    | FaultEvent
    | CrcEvent
    | NumericsEvent
    | ExpertsEvent
    | SummaryEvent
    | DeploymentEvent
    | DPGroupEvent
    | DPStepEvent
    | RunEvent,
    Field(discriminator="kind"),
]

# built on its first use too (a recording read back, the JSON Schema): the union's schema is every event's
EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event, config=ConfigDict(defer_build=True))
# Snapshots a slow viewer may lose (a later one supersedes them); everything else is never dropped.
MERGEABLE_KINDS = frozenset({"banks", "memory"})


# -- topology: the layer as a graph of stages, per phase -------------------------------------
class TopologyNode(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    id: str  # stage id, matches KernelEvent.stage
    label: str
    kind: StageKind | Literal["scheduler", "cache"]
    kernels: list[str] = Field(default_factory=list)
    precision: str = ""
    access: str = ""  # memory access pattern, e.g. "streamed weights", "paged gather"
    bound: Bound | None = None


class TopologyEdge(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    source: str
    target: str
    bytes: float  # bytes moved along the edge for one prefill chunk / one decode step


class PhaseTopology(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    nodes: list[TopologyNode]
    edges: list[TopologyEdge]


class Topology(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    model: str
    runtime: str
    prefill: PhaseTopology
    decode: PhaseTopology


def trusted_event(cls: type[_E], values: dict[str, Any]) -> _E:
    """An event built without validation, for the simulator's hottest path (one kernel event per launch, ~3x
    cheaper). `values` must hold every field, in declaration order, already of its type (floats as float):
    then the event equals, and serialises byte for byte like, the validated one (tests/runtime/test_timing.py
    checks the kernel events Timing makes)."""
    e = _new(cls)
    _set(e, "__dict__", values)
    _set(e, "__pydantic_fields_set__", _every_field(cls))
    _set(e, "__pydantic_extra__", None)
    _set(e, "__pydantic_private__", None)
    return e


@cache
def _every_field(cls: type[BaseModel]) -> set[str]:
    """One fields-set for every trusted event of a class (a set of 20 names was ~700 bytes an event, a third of a
    kernel event's memory: bench/README.md, hardening). Sharing it is safe: events are frozen (nothing adds to
    it) and pydantic's model_copy copies it."""
    return set(cls.model_fields)


_new = object.__new__  # BaseModel has no __new__ of its own: cls.__new__ is this one
_set = object.__setattr__  # bound once: ~70k events a serving run


def event_json(event: BaseModel) -> str:
    """Canonical JSON of one event (stable key order, no whitespace): byte-identical across runs."""
    return event.model_dump_json()


def parse_event(data: dict[str, Any]) -> Any:
    return EVENT_ADAPTER.validate_python(data)
