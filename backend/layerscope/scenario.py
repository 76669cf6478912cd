"""The scenario spec: one pydantic model, the single source of truth for YAML files, REST and websocket.

Every bound here is also what keeps a request from making the server allocate without limit.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from layerscope.deployment import DeploymentSpec, check_fits
from layerscope.hardware.gpus import GpuName
from layerscope.hardware.gpus import gpu as gpu_preset
from layerscope.hardware.routing import DEFAULT_ROUTING, RoutingError, check_routing
from layerscope.model.config import PRESETS
from layerscope.paths import scenarios_dir
from layerscope.strict import MAX_PROMPT_LEN, Strict

Runtime = Literal["article", "vllm"]
AllocatorPolicy = Literal["bank_aware", "naive"]
FaultKind = Literal["stale_chunk_metadata", "chunk_scheduler_disabled", "ecc_bitflips", "memory_contention"]
ActionKind = Literal["compact", "pressure", "release", "validate"]

# Hard limits: no scenario may exceed them (they bound server memory and CPU per request).
MAX_DECODE_STEPS = 8_192
MAX_BANKS = 256
MAX_PAGES = 65_536  # pages of one sequence (prompt + decode + hint)
MAX_REQUESTS = 10_000
MAX_REQUEST_TOKENS = 262_144  # input (with the shared prefix) or output length of one request
MAX_WORKLOAD_TOKENS = 20_000_000  # input + output tokens of a whole workload (bounds CPU and memory per run)
INFINITY_WORDS = frozenset({"inf", "+inf", ".inf", "infinity", "+infinity"})
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")

DEFAULT_PAGE_SIZE: dict[str, int] = {"article": 256, "vllm": 16}
DEFAULT_FREE_HBM_GIB = 40.0  # the KV pool of a scenario that names neither free_hbm_gib nor a deployment


class FaultSpec(Strict):
    """A fault injected into the run. Where and how hard depends on the kind."""

    kind: FaultKind
    at_chunk: int | None = Field(None, ge=0, le=1024, description="prefill chunk at which it strikes")
    at_step: int | None = Field(None, ge=0, le=MAX_DECODE_STEPS, description="decode step at which it strikes")
    rate: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="ecc_bitflips: fraction of quantized weight words hit; "
        "memory_contention: fraction of HBM bandwidth stolen",
    )
    count: int = Field(1, ge=1, le=10_000, description="how many bit flips, corrupted entries or steps")


class ActionSpec(Strict):
    """Something the operator does (or the environment does) at a point of the run."""

    do: ActionKind
    at_chunk: int | None = Field(None, ge=0, le=1024)
    at_step: int | None = Field(None, ge=0, le=MAX_DECODE_STEPS)
    amount_gib: float = Field(0.0, ge=0.0, le=1024.0, description="pressure/release: HBM taken or given back")


class TourCheck(Strict):
    """A claim a tour step makes, checked against the run's summary figures."""

    metric: str = Field(..., min_length=1, max_length=64, description="a key of the run summary")
    op: Literal["==", "!=", ">", ">=", "<", "<="]
    value: float | int | bool | str


class TourZoom(Strict):
    """The window of the shared time axis a tour step zooms to, around its moment (simulated µs of the run)."""

    before_us: float = Field(..., ge=0.0, le=1e12, description="from this long before the moment")
    after_us: float = Field(..., ge=0.0, le=1e12, description="to this long after it")


class TourStep(Strict):
    title: str = Field(..., min_length=1, max_length=120)
    text: str = Field(..., min_length=1, max_length=2000)
    at_us: float | None = Field(None, ge=0.0, description="simulated time at which to pause")
    at_event: str | None = Field(
        None, max_length=120, description="pause at the first event matching 'kind' or 'kind:name' (e.g. 'fault')"
    )
    at_nth: int | None = Field(
        None, ge=-100_000, le=100_000, description="the n-th event at_event matches instead of the first (-1: the last)"
    )
    at_max: str | None = Field(
        None, max_length=40, pattern=r"^[a-z_]+$",
        description="the event at_event matches with the largest value of this field (model_dur_us: the longest step)",
    )
    zoom: TourZoom | None = Field(None, description="zoom the time axis around the moment (absent: the whole run)")
    highlight: list[str] = Field(default_factory=list, max_length=12, description="panel ids or element ids")
    check: TourCheck | None = None

    @model_validator(mode="after")
    def _one_pick(self) -> TourStep:
        if (self.at_nth is not None or self.at_max is not None) and not self.at_event:
            raise ValueError("at_nth and at_max pick among the events at_event matches: give at_event")
        if self.at_nth is not None and self.at_max is not None:
            raise ValueError("give at_nth or at_max, not both")
        if self.at_nth == 0:
            raise ValueError("at_nth counts from 1 (the first) or from -1 (the last)")
        return self


class SweepSpec(Strict):
    """The grid the dashboard's sweep panel opens with (and `layerscope sweep` runs without --grid)."""

    grid: dict[str, list[float | int | bool | str]] = Field(..., min_length=1, max_length=3)
    metric: str | None = Field(
        None, max_length=64,
        description="a one-request run's summary figure drawn against the first grid field (absent: a serving "
        "sweep's output throughput per GPU against median TPOT)",
    )


class WorkloadSpec(Strict):
    """Many requests, as `vllm bench serve --dataset-name random` sends them (or as a trace file lists them)."""

    # request_rate defaults to inf: JSON carries it as the string "Infinity", which parses back
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, ser_json_inf_nan="strings")

    num_requests: int = Field(100, ge=1, le=MAX_REQUESTS, description="requests to send (--num-prompts)")
    input_len: int = Field(1024, ge=1, le=MAX_REQUEST_TOKENS, description="mean prompt tokens (--random-input-len)")
    output_len: int = Field(128, ge=1, le=MAX_REQUEST_TOKENS, description="mean output tokens (--random-output-len)")
    range_ratio: float = Field(
        0.0, ge=0.0, le=1.0, description="each length uniform in [L(1-r), L(1+r)] (--random-range-ratio)"
    )
    max_concurrency: int | None = Field(
        None, ge=1, le=MAX_REQUESTS, description="requests in flight at once, client side (null: no cap)"
    )
    request_rate: float = Field(
        float("inf"), gt=0.0, description="requests per second, Poisson arrivals (inf: all at once)"
    )
    seed: int = Field(0, ge=0, le=2**31 - 1, description="lengths, arrivals and token ids")
    shared_prefix_len: int = Field(
        0, ge=0, le=MAX_REQUEST_TOKENS, description="tokens every prompt starts with (--random-prefix-len)"
    )
    trace: str | None = Field(
        None, max_length=4096, description="CSV (Azure) or JSONL (Mooncake) trace of request sizes; CLI only"
    )
    # issue 20 (replicas behind a router): several shared prefixes, what a prefix-aware router keys on
    num_prefixes: int = Field(
        1, ge=1, le=1024, description="distinct shared prefixes of shared_prefix_len tokens, the requests spread "
        "evenly over them in a seeded order (vllm bench serve --dataset-name prefix_repetition "
        "--prefix-repetition-num-prefixes)"
    )
    routing: str = Field(
        DEFAULT_ROUTING, max_length=200,
        description="how tokens spread over the experts: uniform, balanced, power_law:ALPHA or file:NAME.json "
        "(measured counts, a shipped file under scenarios/routing/); runtime/routing.py",
    )

    @field_validator("request_rate", mode="before")
    @classmethod
    def _rate_infinity(cls, v: Any) -> Any:
        """The one string a number field takes: infinity as JSON ("Infinity"), YAML (.inf) or --set (inf) spell it."""
        return float("inf") if isinstance(v, str) and v.strip().lower() in INFINITY_WORDS else v

    @field_serializer("request_rate", when_used="json")
    def _rate_json(self, v: float) -> float | str:
        """JSON has no inf: "Infinity", which pydantic reads back (model_dump(mode="json") too, for the server)."""
        return "Infinity" if math.isinf(v) else v

    @field_validator("routing")
    @classmethod
    def _routing(cls, v: str) -> str:
        try:
            return check_routing(v)  # a count file is read when the run starts, not on every validation
        except RoutingError as e:
            raise ValueError(str(e)) from None

    @model_serializer(mode="wrap")
    def _omit_unused(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """num_prefixes left out at its default, so recordings of one-prefix workloads stay as they were."""
        out: dict[str, Any] = handler(self)
        if self.num_prefixes == 1:
            out.pop("num_prefixes", None)
        return out

    @model_validator(mode="after")
    def _prefixes_have_a_length(self) -> WorkloadSpec:
        if self.num_prefixes > 1 and self.shared_prefix_len == 0:
            raise ValueError(f"num_prefixes={self.num_prefixes} needs shared_prefix_len > 0 (the prefixes' length)")
        return self

    @model_validator(mode="after")
    def _bounded_tokens(self) -> WorkloadSpec:
        r = self.range_ratio
        most = self.num_requests * (
            self.shared_prefix_len + int(self.input_len * (1 + r)) + int(self.output_len * (1 + r))
        )
        if self.trace is None and most > MAX_WORKLOAD_TOKENS:
            raise ValueError(
                f"num_requests x (shared_prefix_len + input_len + output_len) may reach {most} tokens; "
                f"the limit is {MAX_WORKLOAD_TOKENS}"
            )
        return self


class SchedulerSpec(Strict):
    """vLLM V1 scheduler limits (the vllm runtime; the article runtime keeps its chunk scheduler). Null limits are
    vLLM's defaults for `vllm serve` on the scenario's GPU (`ScenarioSpec.scheduler_limits`)."""

    max_num_batched_tokens: int | None = Field(
        None, ge=16, le=262_144, description="token budget of one engine step (null: vLLM's default for the OpenAI "
        "server on this GPU: 8192 on H100/H200/B200, 2048 on A100; max_model_len without chunked prefill)",
    )
    max_num_seqs: int | None = Field(
        None, ge=1, le=4096, description="running requests at most (null: vLLM's default on this GPU, 1024 on "
        "H100/H200/B200, 256 on A100, at most max_num_batched_tokens)",
    )
    # vLLM V1 turns prefix caching on by default (CacheConfig.enable_prefix_caching)
    prefix_caching: bool = Field(True, description="reuse cached full KV blocks of identical prefixes "
                                 "(--enable-prefix-caching, on by default in vLLM V1)")
    enable_chunked_prefill: bool = Field(
        True, description="a prompt longer than the budget left is cut into chunks (--enable-chunked-prefill, V1's "
        "default); off: it waits for a step with room for all of it",
    )
    long_prefill_token_threshold: int = Field(
        0, ge=0, le=MAX_PROMPT_LEN, description="at most this many tokens of one request per step (0: no cap; "
        "--long-prefill-token-threshold; 4% of max_model_len when max_num_partial_prefills > 1)",
    )
    max_num_partial_prefills: int = Field(
        1, ge=1, le=256, description="prompts partially prefilled at once (--max-num-partial-prefills; V1 reads "
        "it only to set long_prefill_token_threshold)",
    )


# vLLM's batch defaults for `vllm serve` (UsageContext.OPENAI_API_SERVER; EngineArgs.get_batch_defaults in
# vllm/engine/arg_utils.py): a GPU of at least 70 GiB whose name lacks "a100" gets the larger budget, any other
# the smaller one (a large budget cut an A100's throughput, vLLM PR #17885).
VLLM_LARGE_GPU_BYTES = 70 * 2**30
SERVER_BATCH_DEFAULTS = {True: (8192, 1024), False: (2048, 256)}  # large GPU -> (max_num_batched_tokens, max_num_seqs)
PARTIAL_PREFILL_THRESHOLD = 0.04  # SchedulerConfig.__post_init__: long_prefill_token_threshold = 4% of max_model_len


@dataclass(frozen=True)
class SchedulerLimits:
    """The scheduler's limits in force: the scenario's, or vLLM's defaults where it leaves them null."""

    max_num_batched_tokens: int
    max_num_seqs: int
    long_prefill_token_threshold: int
    max_model_len: int
    source: str  # where the two limits come from, for the deployment card and the summary

    def refusal(self, sched: SchedulerSpec) -> tuple[str, str] | None:
        """(field, vLLM's message) for limits vLLM refuses at start-up (SchedulerConfig.verify_max_model_len)."""
        mnbt, mml = self.max_num_batched_tokens, self.max_model_len
        if mnbt < mml and not sched.enable_chunked_prefill:
            return "scheduler.max_num_batched_tokens", (
                f"max_num_batched_tokens ({mnbt}) is smaller than max_model_len ({mml}). This effectively limits the "
                "maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please "
                "increase max_num_batched_tokens or decrease max_model_len.")
        if mnbt < self.max_num_seqs:
            return "scheduler.max_num_batched_tokens", (
                f"max_num_batched_tokens ({mnbt}) must be greater than or equal to max_num_seqs "
                f"({self.max_num_seqs}).")
        if sched.max_num_partial_prefills > 1 and not sched.enable_chunked_prefill:
            return "scheduler.max_num_partial_prefills", (
                "Chunked prefill must be enabled to set max_num_partial_prefills > 1.")
        if sched.max_num_partial_prefills > 1 and self.long_prefill_token_threshold > mml:
            return "scheduler.long_prefill_token_threshold", (
                f"long_prefill_token_threshold ({self.long_prefill_token_threshold}) cannot be greater than the "
                f"max_model_len ({mml}).")
        return None


def scheduler_limits(sched: SchedulerSpec, gpu_name: str, max_model_len: int) -> SchedulerLimits:
    """vLLM's rule for the limits a scenario leaves null (arg_utils' _set_default_max_num_seqs_and_batched_tokens_args):
    max_num_batched_tokens is max_model_len without chunked prefill, else the GPU's server default; max_num_seqs
    the GPU's default, at most max_num_batched_tokens."""
    large = gpu_preset(gpu_name).memory_bytes >= VLLM_LARGE_GPU_BYTES and "a100" not in gpu_name
    tokens, seqs = SERVER_BATCH_DEFAULTS[large]
    mnbt = sched.max_num_batched_tokens
    if mnbt is None:
        mnbt = tokens if sched.enable_chunked_prefill else max_model_len
    mns = sched.max_num_seqs if sched.max_num_seqs is not None else min(seqs, mnbt)
    threshold = sched.long_prefill_token_threshold
    if sched.max_num_partial_prefills > 1 and threshold == 0:
        threshold = int(max_model_len * PARTIAL_PREFILL_THRESHOLD)
    set_by = [n for n in ("max_num_batched_tokens", "max_num_seqs") if getattr(sched, n) is not None]
    source = (f"vLLM's defaults for `vllm serve` on {gpu_name}" if not set_by else "set by the scenario"
              if len(set_by) == 2 else f"{set_by[0]} set by the scenario, the other vLLM's default on {gpu_name}")
    return SchedulerLimits(mnbt, mns, threshold, max_model_len, source)


class CompareSpec(Strict):
    """Run the scenario a second time with these overrides, and show both."""

    label: str = Field(..., min_length=1, max_length=60)
    set: dict[str, Any] = Field(default_factory=dict, max_length=32)

    @field_validator("set")
    @classmethod
    def _known_fields(cls, v: dict[str, Any]) -> dict[str, Any]:
        """Each override is checked here, against its field alone, so a bad one is named at load time."""
        for key, value in v.items():
            check_override(key, value)
        return v


class ScenarioSpec(Strict):
    OMITTED_AT_DEFAULT = ("goodput",)

    name: str = Field("custom", description="slug, lower-case letters, digits and dashes")
    title: str = Field("Custom scenario", max_length=120)
    description: str = Field("", max_length=4000)

    model: str = Field("qwen3-235b-a22b", description="model preset simulated at full size")
    runtime: Runtime = "vllm"
    gpu: GpuName = "h100-sxm"

    prompt_len: int = Field(8192, ge=1, le=MAX_PROMPT_LEN, description="prompt tokens (prefill)")
    decode_steps: int = Field(32, ge=0, le=MAX_DECODE_STEPS, description="generated tokens (decode steps)")
    chunk_size: int = Field(4096, ge=16, le=65_536, description="prefill chunk size in tokens")
    low_mem_chunk_size: int = Field(2048, ge=16, le=65_536, description="chunk size when free HBM is low")
    low_mem_threshold_gib: float = Field(12.0, ge=0.0, le=1024.0, description="free HBM below which chunks shrink")
    free_hbm_gib: float | None = Field(
        None,
        gt=0.0,
        le=1024.0,
        description="HBM free for KV cache at the start (default: what the deployment's placement leaves, or "
        f"{DEFAULT_FREE_HBM_GIB:g} GiB without a deployment)",
    )
    deployment: DeploymentSpec | None = Field(
        None, description="GPUs, parallelism and precision; absent: one GPU holding the whole layer, as before"
    )
    page_size: int | None = Field(
        None, ge=1, le=4096, description="tokens per KV page (default: 256 article, 16 vllm)"
    )
    banks: int = Field(32, ge=1, le=MAX_BANKS, description="KV cache banks")
    allocator: AllocatorPolicy = "bank_aware"
    decode_page_hint: bool = Field(False, description="reserve contiguous pages for decode at prefill time")
    fragmentation: float = Field(
        0.0, ge=0.0, le=0.95, description="fraction of pages held, scattered, by other tenants at the start"
    )
    memory_path_contention: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="host memory-path contention (two-socket host): slows traffic over the host path "
        "(re-fetches of evicted KV pages), never GPU HBM bandwidth",
    )
    sla_ms: float = Field(10.0, gt=0.0, le=10_000.0, description="decode step latency SLA")
    numerics: bool = Field(False, description="also run the numpy layer at a scaled size on the same schedule")
    numerics_model: Literal["tiny", "small"] = "tiny"
    seed: int = Field(0, ge=0, le=2**31 - 1)
    faults: list[FaultSpec] = Field(default_factory=list, max_length=16)
    actions: list[ActionSpec] = Field(default_factory=list, max_length=64)
    workload: WorkloadSpec | None = Field(
        None, description="many requests (null: one request of prompt_len and decode_steps)"
    )
    scheduler: SchedulerSpec = Field(default_factory=SchedulerSpec)
    # issue 21 (goodput): vllm bench serve's --goodput SLOs; absent: no goodput figures in the summary
    goodput: dict[Literal["ttft", "tpot", "e2el"], Annotated[float, Field(ge=0.0, le=1e9)]] | None = Field(
        None, description="SLOs in ms (ttft, tpot, e2el) a request must all meet to count in request_goodput "
        "(vllm bench serve --goodput)")
    compare: CompareSpec | None = None
    tour: list[TourStep] = Field(default_factory=list, max_length=32)
    sweep: SweepSpec | None = Field(None, description="the sweep panel's grid (absent: no sweep applies)")

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("must be 1-64 lower-case letters, digits or dashes")
        return v

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: str) -> str:
        full_size = [n for n in PRESETS if n not in ("tiny", "small")]
        if v not in PRESETS:
            raise ValueError(f"unknown model {v!r}; choose one of {', '.join(full_size)}")
        return v

    @model_validator(mode="after")
    def _bounded_pages(self) -> ScenarioSpec:
        pages = -(-(self.prompt_len + self.decode_steps) // self.effective_page_size)
        if pages > MAX_PAGES:
            raise ValueError(
                f"prompt_len + decode_steps needs {pages} KV pages of {self.effective_page_size} tokens; "
                f"the limit is {MAX_PAGES} (raise page_size or shorten the run)"
            )
        return self

    @model_validator(mode="after")
    def _deployment_fits(self) -> ScenarioSpec:
        """Weights that do not fit the deployment's GPUs, or leave no room for free_hbm_gib, are refused here, so
        the CLI and the server say so."""
        if self.deployment is not None or (self.workload is not None and self.free_hbm_gib is not None
                                           and self.runtime == "vllm"):
            lim = self.scheduler_limits  # vLLM's defaults for the GPU where the scenario leaves them null
            check_fits(PRESETS[self.model], gpu_preset(self.gpu), self.runtime, self.deployment, self.free_hbm_gib,
                       serving=self.workload is not None, max_num_batched_tokens=lim.max_num_batched_tokens,
                       max_num_seqs=lim.max_num_seqs)
        return self

    @model_validator(mode="after")
    def _requests_fit_max_model_len(self) -> ScenarioSpec:
        """As vLLM refuses a request longer than --max-model-len, a one-request run that cannot fit is refused
        here; a workload's longer requests are rejected one by one when they arrive (the serving engine), as
        vLLM's server answers each with a 400 and serves the rest."""
        limit = self.deployment.max_model_len if self.deployment is not None else None
        if limit is None or self.workload is not None:
            return self
        longest = self.prompt_len + self.decode_steps
        if longest > limit:
            raise ValueError(
                f"field 'deployment.max_model_len': {limit} tokens is below prompt_len + decode_steps = {longest}; "
                "vLLM refuses requests longer than max_model_len (raise it, or shorten the request)"
            )
        return self

    @model_validator(mode="after")
    def _scheduler_limits_vllm_accepts(self) -> ScenarioSpec:
        """Limits vLLM refuses at start-up are refused here, in vLLM's words (a serving run of the vllm runtime)."""
        if self.workload is None or self.runtime != "vllm":
            return self
        refused = self.scheduler_limits.refusal(self.scheduler)
        if refused is not None:
            raise ValueError(f"field {refused[0]!r}: {refused[1]}")
        return self

    @property
    def max_model_len(self) -> int:
        """The longest request in tokens: the deployment's max_model_len, else the model's context (vLLM's)."""
        mml = self.deployment.max_model_len if self.deployment is not None else None
        return mml or PRESETS[self.model].max_position_embeddings

    @property
    def scheduler_limits(self) -> SchedulerLimits:
        return scheduler_limits(self.scheduler, self.gpu, self.max_model_len)

    @property
    def effective_page_size(self) -> int:
        return self.page_size or DEFAULT_PAGE_SIZE[self.runtime]

    def with_overrides(self, overrides: dict[str, Any]) -> ScenarioSpec:
        """A new validated spec with fields replaced (the CLI's --set, the dashboard's form); a dotted key
        (`workload.max_concurrency`) sets one field of a nested model, creating the model if it is null."""
        data = self.model_dump()
        for key, value in overrides.items():
            *path, name = key.split(".")
            node = data
            for part in path:  # deeper keys too: deployment.disaggregation.prefill.tp
                if not isinstance(node.get(part), dict):
                    node[part] = {}
                node = node[part]
            node[name] = value
        return ScenarioSpec.model_validate(data)


NESTED: dict[str, type[BaseModel]] = {
    "workload": WorkloadSpec,
    "scheduler": SchedulerSpec,
    "deployment": DeploymentSpec,
}


def known_field(key: str) -> bool:
    """A top-level field, or `model.field` of a nested model (workload, scheduler), at any depth
    (`deployment.disaggregation.prefill.tp`)."""
    return _field_owner(key) is not None


def _field_owner(key: str) -> tuple[type[BaseModel], str] | None:
    """The model that holds the dotted field, and its name there; None when no model has it."""
    top, _, sub = key.partition(".")
    if not sub:
        return (ScenarioSpec, top) if top in ScenarioSpec.model_fields else None
    model: type[BaseModel] | None = NESTED.get(top)
    *path, name = sub.split(".")
    for part in path:
        model = _sub_model(model, part)
    return (model, name) if model is not None and name in model.model_fields else None


def _sub_model(model: type[BaseModel] | None, name: str) -> type[BaseModel] | None:
    """The model type of field `name` (itself or inside `X | None`), or None."""
    if model is None or name not in model.model_fields:
        return None
    ann = model.model_fields[name].annotation
    for t in (ann, *getattr(ann, "__args__", ())):
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return None


def check_override(key: str, value: Any) -> None:
    """Check one override against its field alone (ValueError naming it)."""
    if not known_field(key) or key in ("compare", "tour", "sweep"):
        raise ValueError(f"unknown or not overridable field {key!r}")
    owner = _field_owner(key)
    assert owner is not None
    model, name = owner
    try:
        model.__pydantic_validator__.validate_assignment(model.model_construct(), name, value)
    except ValidationError as e:
        raise ValueError(f"{key}: {e.errors()[0]['msg']}") from None


class ScenarioError(ValueError):
    """A scenario could not be loaded; the message names the file, the field and what is allowed."""


def format_validation_error(err: ValidationError, source: str = "", given: dict[str, Any] | None = None) -> str:
    """`source: field 'loc': message`. A whole-spec check (no loc of its own) is located at the field its message
    names (`field 'x': ...`), else at the given field whose `name=value` it quotes (`tp=3` -> deployment.tp)."""
    first = err.errors()[0]
    msg = first["msg"].removeprefix("Value error, ")
    loc = ".".join(str(p) for p in first["loc"])
    if not loc:
        named = _NAMED_FIELD.match(msg)
        if named:
            loc, msg = named.group(1), msg[named.end() :]
        else:
            loc = _quoted_field(msg, given or {}) or "(top level)"
    prefix = f"{source}: " if source else ""
    more = f" (+{len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{prefix}field '{loc}': {msg}{more}"


_NAMED_FIELD = re.compile(r"^field '([A-Za-z0-9_.]+)': ")


def _quoted_field(message: str, given: dict[str, Any]) -> str | None:
    """The dotted key of `given` (one level of nesting flattened) whose `leaf=value` the message quotes."""
    flat: dict[str, Any] = {}
    for key, value in given.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items() if not isinstance(v, dict | list)})
        elif not isinstance(value, list):
            flat[key] = value
    for key, value in flat.items():
        leaf = key.rsplit(".", 1)[-1]
        if re.search(rf"(?<![A-Za-z0-9_]){re.escape(leaf)}={re.escape(str(value))}(?![0-9.])", message):
            return key
    return None


def parse_spec(data: Any, source: str = "") -> ScenarioSpec:
    if not isinstance(data, dict):
        raise ScenarioError(f"{source or 'scenario'}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return ScenarioSpec.model_validate(data)
    except ValidationError as e:
        raise ScenarioError(format_validation_error(e, source, data)) from None


def preset_names() -> list[str]:
    return sorted(p.stem for p in scenarios_dir().glob("*.yaml"))


def _yaml() -> Any:
    """PyYAML, imported where a document is read (14-40 ms a process: `layerscope bench` and `--help` read none)."""
    import yaml

    return yaml


@functools.cache
def safe_loader() -> Any:
    """libyaml's safe loader where PyYAML has it (the same documents, ~8x faster: 2.4 ms for a preset instead of
    18 ms, measured; the server parses a preset for every viewer's `load` on its event loop), refusing a mapping
    that repeats a key (PyYAML keeps the last one silently). Built on first use, as PyYAML is imported."""
    yaml = _yaml()

    class UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, str) and key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                if isinstance(key, str):
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def load_file(path: Path) -> ScenarioSpec:
    yaml = _yaml()
    try:
        data = yaml.load(path.read_text(encoding="utf-8-sig"), Loader=safe_loader())  # noqa: S506 -- a safe loader
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"{path}: cannot read the scenario file: {getattr(e, 'strerror', None) or e}") from None
    except yaml.YAMLError as e:
        raise ScenarioError(f"{path}: not valid YAML: {e}") from None
    return parse_spec(data, str(path))


def load_preset(name: str) -> ScenarioSpec:
    """A preset by name; names are checked so they cannot reach outside scenarios/."""
    if not NAME_RE.match(name) or name not in preset_names():
        raise ScenarioError(f"unknown scenario {name!r}; presets: {', '.join(preset_names())}")
    return load_file(scenarios_dir() / f"{name}.yaml")


def load(name_or_path: str) -> ScenarioSpec:
    """A preset name, or a path to a YAML file (CLI only; the server takes names)."""
    if NAME_RE.match(name_or_path) and name_or_path in preset_names():
        return load_preset(name_or_path)
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return load_file(path)
    raise ScenarioError(f"unknown scenario {name_or_path!r}; presets: {', '.join(preset_names())}")


def parse_set(assignments: list[str]) -> dict[str, Any]:
    """`key=value` strings (values read as YAML scalars) -> overrides."""
    out: dict[str, Any] = {}
    for a in assignments:
        key, sep, raw = a.partition("=")
        if not sep or not key:
            raise ScenarioError(f"--set {a!r}: expected key=value")
        if not known_field(key):
            raise ScenarioError(f"--set {a!r}: unknown field {key!r}")
        yaml = _yaml()
        try:
            out[key] = yaml.safe_load(raw)
        except yaml.YAMLError:
            out[key] = raw
    return out


def apply_overrides(spec: ScenarioSpec, overrides: dict[str, Any], source: str = "--set") -> ScenarioSpec:
    unknown = [k for k in overrides if not known_field(k)]
    if unknown:
        raise ScenarioError(f"{source}: unknown field {unknown[0]!r}")
    try:
        return spec.with_overrides(overrides)
    except ValidationError as e:
        raise ScenarioError(format_validation_error(e, source, overrides)) from None


def main_label(spec: ScenarioSpec) -> str:
    """The main run named by the settings its compare run changes (e.g. 'allocator=bank_aware')."""
    if spec.compare is None:
        return spec.name
    return ", ".join(f"{k}={_shown(_dotted(spec, k))}" for k in spec.compare.set) or spec.name


def _shown(value: Any) -> Any:
    """A setting as a label shows it: a spec model that describes itself in a few words does (DisaggregationSpec)."""
    describe = getattr(value, "describe", None)
    return describe() if callable(describe) else value


def _dotted(obj: Any, path: str) -> Any:
    """spec field by a dotted name, as compare.set names them ("workload.max_concurrency")."""
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else getattr(obj, part, None)
    return obj
