"""What the parts of a one-request run share: its clock, its block tables' version, the stale address map a fault
left, and the figures its summary is computed from (runtime/request_run.py owns one; its pages and its hooks
read and move it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from layerscope.hardware.kernel import KernelCost


@dataclass
class RequestStats:
    """What the summary is computed from (collected while the events are made)."""

    chunk_sizes: list[int] = field(default_factory=list)
    prefill_layer_us: float = 0.0
    prefill_costs: list[KernelCost] = field(default_factory=list)
    decode_costs: list[KernelCost] = field(default_factory=list)
    step_latency_us: list[float] = field(default_factory=list)
    step_model_us: list[float] = field(default_factory=list)
    step_jitter_us: list[float] = field(default_factory=list)
    first_step_us: float = 0.0
    switch_over_us: float = 0.0
    migrations: int = 0
    migrated_bytes: float = 0.0
    evictions: int = 0
    refetched_pages: int = 0
    partial_evictions: int = 0
    repaired_pages: int = 0
    alloc_failures: int = 0
    compactions: int = 0
    over_sla: int = 0
    cross_bank_reads: int = 0
    crc_bad_banks: set[int] = field(default_factory=set)
    max_rel_error: float = 0.0
    nan_detected: bool = False
    hint_pages: int = 0
    attention_launches: int = 0


@dataclass
class RequestState:
    t: float = 0.0  # the run's clock: one decoder layer's simulated time
    version: int = 0  # bumps whenever a block table changes
    stale: dict[int, int] = field(default_factory=dict)  # decode address map corruption: logical -> logical it reads
    chunk_pages: list[range] = field(default_factory=list)  # full-size logical pages each prefill chunk wrote
    stats: RequestStats = field(default_factory=RequestStats)
