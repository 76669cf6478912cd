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

import numpy as np

from layerscope.scenario import FaultSpec

DETECT_REL_ERROR = 1e-2  # numeric error vs the clean run above which a fault counts as seen
JITTER_BAND = 0.10  # a step more than 10% off the running median is out of band
# A flipped fp32 exponent can leave outputs huge but finite (Qwen3's q/k norm renormalizes them): an output
# this far from the clean run also counts as the flips being seen.
ECC_DIVERGENCE = 1.0


@dataclass
class FaultState:
    spec: FaultSpec
    injected: bool = False
    detected: bool = False
    chunk: int | None = None  # where it struck
    step: int | None = None
    banks: list[int] = field(default_factory=list)


class FaultPlan:
    def __init__(self, faults: list[FaultSpec], decode_steps: int) -> None:
        self.states = [FaultState(f) for f in faults]
        self.decode_steps = decode_steps

    def of(self, kind: str) -> list[FaultState]:
        return [s for s in self.states if s.spec.kind == kind]

    def has(self, kind: str) -> bool:
        return any(s.spec.kind == kind for s in self.states)

    # -- when ----------------------------------------------------------------------------------
    def strikes_at_chunk(self, state: FaultState, chunk: int, num_chunks: int) -> bool:
        f = state.spec
        if f.kind in ("stale_chunk_metadata", "chunk_scheduler_disabled"):
            return chunk == min(f.at_chunk or 0, num_chunks - 1)
        return f.at_chunk is not None and chunk == f.at_chunk and f.at_step is None

    def strikes_at_step(self, state: FaultState, step: int) -> bool:
        f = state.spec
        if f.kind in ("stale_chunk_metadata", "chunk_scheduler_disabled"):
            return False
        if f.at_step is not None:
            return step == f.at_step
        return f.at_chunk is None and step == 0

    def scheduler_disabled_from(self) -> int | None:
        starts = [s.spec.at_chunk or 0 for s in self.of("chunk_scheduler_disabled")]
        return min(starts) if starts else None

    def stolen_bandwidth(self, phase: str, index: int, rng: np.random.Generator) -> float:
        """Fraction of HBM bandwidth other work takes during this chunk/step (0 when no contention is active)."""
        stolen = 0.0
        for s in self.of("memory_contention"):
            f = s.spec
            start = f.at_chunk if phase == "prefill" else f.at_step
            if start is None and phase == "decode" and f.at_chunk is None:
                start = 0
            if start is not None and start <= index < start + f.count:
                stolen += f.rate * (0.5 + rng.random())  # the thief's demand varies step to step
        return min(0.95, stolen)


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


def flip_bits(words: np.ndarray, count: int, rate: float, rng: np.random.Generator, bits: tuple[int, ...]) -> int:
    """Flip one of `bits` in `count` (or rate x size) random words of a contiguous array, in place.

    Returns how many flips were made. The caller picks `bits` that matter: exponent bits of floats."""
    flat = words.reshape(-1)
    n = max(count, int(rate * flat.size))
    n = min(n, flat.size)
    idx = rng.choice(flat.size, size=n, replace=False)
    width = flat.dtype.itemsize * 8
    as_int = flat.view({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[width])
    which = np.asarray(bits)[rng.integers(0, len(bits), size=n)]
    as_int[idx] ^= (np.ones(n, dtype=as_int.dtype) << which.astype(as_int.dtype)).astype(as_int.dtype)
    return n
