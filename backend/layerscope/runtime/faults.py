"""Fault injection and detection: when each scenario fault strikes, what it breaks, and how it is noticed.

stale_chunk_metadata      prefill leaves chunk c's old page map behind; decode's address map points `count`
                          of its pages at the previous chunk's slots: extra cross-bank reads (slow steps)
                          and wrong K/V (numerics). Noticed by the validation pass (map vs write record)
                          or by the numeric error.
chunk_scheduler_disabled  no address remap: every chunk writes chunk-relative pages, over earlier chunks'
                          KV. Noticed by the numeric error (numerics on) or the validation pass.
ecc_bitflips              `count` bit flips (or `rate` of the quantized weight words) in the scaled layer's
                          weights: NaN/inf in the output. Noticed by the non-finite check (numerics on) or
                          by the weight scrub of the validation pass;
                              fp32 (non-quantized) weights may stay finite: then a gross divergence.
memory_contention         `rate` of HBM bandwidth stolen for `count` steps (or chunks), varying per step:
                          jitter. Noticed when a step leaves the jitter band around the running median.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import numpy as np

from layerscope.runtime.shadow import ShadowResult
from layerscope.scenario import FaultSpec

DETECT_REL_ERROR = 1e-2  # numeric error vs the clean run above which a fault counts as seen
JITTER_BAND = 0.10  # a step more than 10% off the running median is out of band
# A flipped fp32 exponent can leave outputs huge but finite (Qwen3's q/k norm renormalizes them): an output
# this far from the clean run also counts as the flips being seen.
ECC_DIVERGENCE = 1.0


class FaultTarget(Protocol):
    """What a fault may do to the run it strikes (the engine provides it; faults reach nothing else)."""

    def stale_map(self, chunk_pages: list[int], count: int) -> tuple[int, list[int]]:
        """Point `count` of the chunk's pages at the previous chunk's slots; (stale entries, their banks)."""
        ...

    def flip_weights(self, count: int, rate: float) -> int:
        """Flip bits in the scaled layer's weights; how many flipped (count when numerics are off)."""
        ...


@dataclass
class FaultState:
    """One fault of the scenario: when it strikes, what it does (on_inject), how it is noticed (the on_* hooks
    return a detection message or None). One subclass per kind; `FAULTS` maps kind -> class."""

    spec: FaultSpec
    injected: bool = False
    detected: bool = False
    chunk: int | None = None  # where it struck
    step: int | None = None
    banks: list[int] = field(default_factory=list)
    after_barrier: ClassVar[bool] = False  # strikes after its chunk's barrier rather than at the chunk's start

    @property
    def watching(self) -> bool:
        """Struck and not yet seen: the only state in which detection hooks fire."""
        return self.injected and not self.detected

    # -- when ----------------------------------------------------------------------------------
    def strikes_at_chunk(self, chunk: int, num_chunks: int) -> bool:
        f = self.spec
        return f.at_chunk is not None and chunk == f.at_chunk and f.at_step is None

    def strikes_at_step(self, step: int) -> bool:
        f = self.spec
        if f.at_step is not None:
            return step == f.at_step
        return f.at_chunk is None and step == 0

    def stolen(self, phase: str, index: int, rng: np.random.Generator) -> float:
        """HBM bandwidth fraction this fault takes during a chunk / step."""
        return 0.0

    # -- hooks ---------------------------------------------------------------------------------
    def on_inject(self, target: FaultTarget, chunk: int | None, step: int | None, chunk_pages: list[int]) -> str:
        """Apply the fault; returns the detail of its `injected` event."""
        return self.spec.kind

    def on_chunk(self, chunk: int, took_us: float, expected_us: float) -> str | None:
        return None

    def on_step(self, step: int, model_us: float, median_us: float) -> str | None:
        return None

    def on_numerics(self, r: ShadowResult) -> str | None:
        return None

    def on_validate(self, bad_banks: list[int], has_numerics: bool) -> str | None:
        return None


class _CorruptsKV(FaultState):
    """Faults that leave K/V where decode does not expect it: seen in the output or by the CRC pass."""

    def strikes_at_chunk(self, chunk: int, num_chunks: int) -> bool:
        return chunk == min(self.spec.at_chunk or 0, num_chunks - 1)

    def strikes_at_step(self, step: int) -> bool:
        return False

    def on_numerics(self, r: ShadowResult) -> str | None:
        if r.rel_error > DETECT_REL_ERROR:
            return f"output diverges from the clean run: rel_error {r.rel_error:.3g}"
        return None

    def on_validate(self, bad_banks: list[int], has_numerics: bool) -> str | None:
        if bad_banks:
            return f"CRC32 mismatch in banks {bad_banks[:8]}{'...' if len(bad_banks) > 8 else ''}"
        return None


class StaleChunkMetadata(_CorruptsKV):
    after_barrier = True  # the chunk is done; its stale map stays behind

    def on_inject(self, target: FaultTarget, chunk: int | None, step: int | None, chunk_pages: list[int]) -> str:
        num_stale, self.banks = target.stale_map(chunk_pages, self.spec.count)
        return f"{num_stale} pages of chunk {chunk} keep the previous chunk's slots in decode's map"


class ChunkSchedulerDisabled(_CorruptsKV):
    def on_inject(self, target: FaultTarget, chunk: int | None, step: int | None, chunk_pages: list[int]) -> str:
        return f"address remap skipped from chunk {chunk}: chunks write chunk-relative pages"


class EccBitflips(FaultState):
    def on_inject(self, target: FaultTarget, chunk: int | None, step: int | None, chunk_pages: list[int]) -> str:
        flips = target.flip_weights(self.spec.count, self.spec.rate)
        return f"{flips} bit flips in the quantized weights' stored words"

    def on_numerics(self, r: ShadowResult) -> str | None:
        if r.nan_count + r.inf_count > 0:
            return f"{r.nan_count} NaN and {r.inf_count} inf in the layer output"
        if r.rel_error > ECC_DIVERGENCE:
            return f"output diverges from the clean run by {r.rel_error:.3g} (finite)"
        return None

    def on_validate(self, bad_banks: list[int], has_numerics: bool) -> str | None:
        return None if has_numerics else "weight scrub: ECC reports uncorrectable words in the layer's weights"


class MemoryContention(FaultState):
    def stolen(self, phase: str, index: int, rng: np.random.Generator) -> float:
        f = self.spec
        start = f.at_chunk if phase == "prefill" else f.at_step
        if start is None and phase == "decode" and f.at_chunk is None:
            start = 0
        if start is not None and start <= index < start + f.count:
            return f.rate * (0.5 + rng.random())  # the thief's demand varies step to step
        return 0.0

    def on_inject(self, target: FaultTarget, chunk: int | None, step: int | None, chunk_pages: list[int]) -> str:
        f = self.spec
        return f"{f.rate:.0%} of HBM bandwidth stolen for {f.count} {'steps' if step is not None else 'chunks'}"

    def on_chunk(self, chunk: int, took_us: float, expected_us: float) -> str | None:
        if took_us > (1 + JITTER_BAND) * expected_us:
            return f"chunk {chunk} took {took_us:.0f} us, {took_us / expected_us - 1:.0%} over its roofline time"
        return None

    def on_step(self, step: int, model_us: float, median_us: float) -> str | None:
        if abs(model_us - median_us) > JITTER_BAND * median_us:
            return f"step {step} left the jitter band: {model_us:.0f} us vs median {median_us:.0f} us"
        return None


FAULTS: dict[str, type[FaultState]] = {
    "stale_chunk_metadata": StaleChunkMetadata,
    "chunk_scheduler_disabled": ChunkSchedulerDisabled,
    "ecc_bitflips": EccBitflips,
    "memory_contention": MemoryContention,
}


class FaultPlan:
    def __init__(self, faults: list[FaultSpec], decode_steps: int) -> None:
        self.states = [FAULTS[f.kind](f) for f in faults]
        self.decode_steps = decode_steps

    def of(self, kind: str) -> list[FaultState]:
        return [s for s in self.states if s.spec.kind == kind]

    def scheduler_disabled_from(self) -> int | None:
        starts = [s.spec.at_chunk or 0 for s in self.of("chunk_scheduler_disabled")]
        return min(starts) if starts else None

    def stolen_bandwidth(self, phase: str, index: int, rng: np.random.Generator) -> float:
        """Fraction of HBM bandwidth other work takes during this chunk/step (0 when no contention is active)."""
        return min(0.95, sum(s.stolen(phase, index, rng) for s in self.states))


# -- what the faults do to data -----------------------------------------------------------------
def stale_pages(chunk_pages: list[int], pages_per_chunk: int, count: int, num_pages: int) -> dict[int, int]:
    """logical page -> the logical page whose slot a stale map sends it to (the previous chunk's, or the next
    page for chunk 0); pages with no such neighbour among the `num_pages` allocated are left alone."""
    out: dict[int, int] = {}
    for p in chunk_pages[:count]:
        src = p - pages_per_chunk if p >= pages_per_chunk else p + 1
        if src != p and 0 <= src < num_pages:
            out[p] = src
    return out
