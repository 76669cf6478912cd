"""The numpy layer at a scaled size, run on the simulator's schedule: once clean, once with the faults.

    full size  chunk c: tokens [a, b)        ─▶  scaled: max(P, P * round(f * (b - a) / P)) tokens, same chunk count
    full size  decode step i                 ─▶  scaled: one token (a seeded random hidden state)

f = SCALED_PROMPT / prompt_len (at most 1) and P = SCALED_PAGE tokens per scaled KV page, so each chunk owns
whole pages and a chunk writing "over" another chunk is a page-level event, as at full size.

Both runs see the same inputs (drawn once from the spec's seed); what differs is only what the faults do:
pages overwritten (no address remap), a stale address map, flipped bits in the weights, another tenant's data
in the slots of partially evicted pages. The article runtime's
path is the 2-bit group-quantized layer (model/numerics.py); its packed storage is what ECC flips hit.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from layerscope.model.config import PRESETS
from layerscope.model.kv_cache import PagedKVCache
from layerscope.model.layer import Layer
from layerscope.model.numerics import QuantizedWeight, flip_bits, quantize_layer
from layerscope.runtime.blas import single_threaded_blas

SCALED_PROMPT = 256  # scaled prompt tokens (about; each chunk gets at least one page)
SCALED_PAGE = 8  # tokens per scaled KV page
# Error figures keep 3 significant digits: their float32 sums' last bits follow the BLAS kernel's summation order
# (OpenBLAS picks one per CPU: 2.2458596 on one core type, 2.2458603 on another), and events must not.
ERROR_DIGITS = 3
ECC_TARGETS = tuple(f"self_attn.{p}_proj.weight" for p in "qkvo")  # read by every token


@dataclass(frozen=True)
class ShadowResult:
    tokens: int
    rel_error: float
    max_abs_error: float
    nan_count: int
    inf_count: int
    expert_counts: list[int] | None


class RemapSkippingCache(PagedKVCache):
    """A paged cache whose writes, while `skip_from_page` is set, land on chunk-relative pages: the chunk's
    K/V are copied over pages 0.. and its own pages are left unwritten, before attention reads them."""

    skip_from_page: int | None = None

    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        first_new = self.num_pages if self.num_tokens % self.page_size == 0 else self.num_pages - 1
        super().append(k, v)
        base = self.skip_from_page
        if base is None or base == 0:
            return
        for p in range(max(first_new, base), self.num_pages):
            src, dst = self.block_table[p], self.block_table[p - base]
            self.k[dst] = self.k[src]  # (page_size, n_kv, hd)
            self.v[dst] = self.v[src]
            self.k[src] = 0.0
            self.v[src] = 0.0


class NumericShadow:
    def __init__(self, model_name: str, quantized: bool, banks: int, prompt_len: int, seed: int) -> None:
        config = PRESETS[model_name]
        layer = Layer.random(config, seed=seed)
        self.quantized: dict[str, QuantizedWeight] = {}
        if quantized:
            q = quantize_layer(layer, bits=2, group_size=64)
            self.quantized = {n: w for n, w in q.weights.items() if isinstance(w, QuantizedWeight)}
            # Dequantize once: same values, and the ECC fault re-dequantizes what it hits.
            layer = Layer(q.config, {n: (w.dequantize() if isinstance(w, QuantizedWeight) else w)
                                     for n, w in q.weights.items()})
        self.config = layer.config
        self.name = model_name
        self.clean = layer
        self.faulty = Layer(layer.config, dict(layer.weights))  # shares arrays until a fault copies one
        self.cache_clean = self._cache(banks)
        self.cache_faulty = self.cache_clean  # one cache until a fault forks the runs (identical until then)
        self.forked = False
        self.scale = min(1.0, SCALED_PROMPT / prompt_len)
        self.rng = np.random.default_rng(seed + 7919)
        self.tenant_rng = np.random.default_rng(seed + 15_485_863)  # the other tenant's data (not the inputs)
        self.chunk_pages: list[range] = []  # scaled logical pages each prefill chunk wrote
        self.pos = 0
        self.page = SCALED_PAGE

    def _cache(self, banks: int) -> RemapSkippingCache:
        c = self.config
        return RemapSkippingCache(c.num_key_value_heads, c.head_dim, page_size=SCALED_PAGE, banks=banks)

    def fork(self) -> None:
        """Give the faulty run its own cache: from here on the two runs may differ."""
        if not self.forked:
            self.cache_faulty = copy.deepcopy(self.cache_clean)
            self.forked = True

    def scaled_tokens(self, full_tokens: int) -> int:
        return max(SCALED_PAGE, SCALED_PAGE * round(self.scale * full_tokens / SCALED_PAGE))

    # -- the schedule ----------------------------------------------------------------------------
    def prefill_chunk(self, full_tokens: int, skip_remap: bool) -> ShadowResult:
        t = self.scaled_tokens(full_tokens)
        if skip_remap:
            self.fork()
        base = self.cache_faulty.num_pages
        self.cache_faulty.skip_from_page = base if skip_remap else None
        first = self.cache_clean.num_pages if self.cache_clean.num_tokens % self.page == 0 else (
            self.cache_clean.num_pages - 1)
        out = self._run(t)
        self.chunk_pages.append(range(first, self.cache_clean.num_pages))
        return out

    def decode_step(self) -> ShadowResult:
        self.cache_faulty.skip_from_page = None
        return self._run(1)

    def _run(self, t: int) -> ShadowResult:
        x = self.rng.standard_normal((t, self.config.hidden_size), dtype=np.float32)  # (t, H)
        positions = np.arange(self.pos, self.pos + t)  # (t,)
        self.pos += t
        with single_threaded_blas():
            ref, trace = self.clean.forward_traced(x, positions, self.cache_clean)  # (t, H)
            if not self.forked:  # nothing has struck yet: the faulty run is the clean run
                return _compare(ref, ref, trace.expert_counts)
            with np.errstate(all="ignore"):
                y = self.faulty.forward(x, positions, self.cache_faulty)  # (t, H)
                return _compare(y, ref, trace.expert_counts)

    # -- faults ----------------------------------------------------------------------------------
    def corrupt_map(self, chunk_pages: int, count: int) -> list[int]:
        """Point `count` pages of the last prefill chunk at the previous chunk's slots; returns their banks."""
        self.fork()
        table = self.cache_faulty.block_table
        first = max(0, len(table) - chunk_pages)
        banks: list[int] = []
        for p in range(first, min(len(table), first + count)):
            src = p - chunk_pages if p >= chunk_pages else (p + 1 if p + 1 < len(table) else None)
            if src is None or src == p:
                continue
            self.cache_faulty.set_block_table_entry(p, *table[src])
            banks.append(table[src][0])
        return banks

    def overwrite_pages(self, pages: list[int]) -> list[int]:
        """Another tenant writes its own data into the slots these pages' map entries point at (faulty run
        only); returns the banks it hit."""
        if not pages:
            return []
        self.fork()
        cache = self.cache_faulty
        banks: list[int] = []
        for p in pages:
            b, s = cache.block_table[p]
            cache.k[b, s] = self.tenant_rng.standard_normal(cache.k.shape[2:], dtype=np.float32)  # (page, n_kv, hd)
            cache.v[b, s] = self.tenant_rng.standard_normal(cache.v.shape[2:], dtype=np.float32)
            banks.append(b)
        return sorted(set(banks))

    def restore_pages(self, pages: list[int]) -> None:
        """Re-fetch these pages from host memory (the copy made when they were evicted: the clean run's data)."""
        for p in pages:
            b, s = self.cache_faulty.block_table[p]
            cb, cs = self.cache_clean.block_table[p]
            self.cache_faulty.k[b, s] = self.cache_clean.k[cb, cs]  # (page, n_kv, hd)
            self.cache_faulty.v[b, s] = self.cache_clean.v[cb, cs]

    def flip_weights(self, count: int, rate: float, rng: np.random.Generator) -> int:
        """Flip exponent bits of the attention projections' stored words (fp16 scale/zero when quantized)."""
        self.fork()
        flips = 0
        per = max(1, -(-count // len(ECC_TARGETS)))
        for name in ECC_TARGETS:
            if name in self.quantized:
                qw = self.quantized[name]
                qw = QuantizedWeight(qw.codes.copy(), qw.scale.copy(), qw.zero.copy(), qw.shape, qw.bits,
                                     qw.group_size, qw.bias_comp)
                flips += flip_bits(qw.zero, per, rate, rng, bits=(14,))  # fp16 exponent MSB
                flips += flip_bits(qw.scale, per, rate, rng, bits=(14,))
                self.quantized[name] = qw
                with np.errstate(all="ignore"):  # NaN scales are the point
                    self.faulty.weights[name] = qw.dequantize()
            else:
                src = self.faulty.weights[name]
                assert isinstance(src, np.ndarray)  # the float targets: quantized ones are the branch above
                w = src.copy()
                flips += flip_bits(w, per, rate, rng, bits=(30,))  # fp32 exponent MSB
                self.faulty.weights[name] = w
        return flips

    def bank_crcs(self) -> tuple[list[int], list[int]]:
        """(faulty, clean) CRC32 of each bank's cached K/V."""
        return self.cache_faulty.bank_crc32(), self.cache_clean.bank_crc32()


def _significant(x: float) -> float:
    """x to ERROR_DIGITS significant digits (inf stays inf)."""
    return float(f"{x:.{ERROR_DIGITS}g}")


def _compare(y: np.ndarray, ref: np.ndarray, counts: np.ndarray | None) -> ShadowResult:
    nan = int(np.isnan(y).sum())
    inf = int(np.isinf(y).sum())
    if nan or inf:
        rel, max_abs = float("inf"), float("inf")
    else:
        diff = y - ref  # (t, H)
        rel = float(np.linalg.norm(diff) / max(float(np.linalg.norm(ref)), 1e-30))
        max_abs = float(np.abs(diff).max()) if diff.size else 0.0
    return ShadowResult(
        tokens=len(y),
        rel_error=_significant(rel),
        max_abs_error=_significant(max_abs),
        nan_count=nan,
        inf_count=inf,
        expert_counts=None if counts is None else [int(c) for c in counts],
    )


class ScaledRouter:
    """The scaled model's router alone (seeded gate weights, N(0, 1/H) like Layer.random), for expert counts
    when numerics are off: cheap enough for every chunk and step."""

    def __init__(self, model_name: str, seed: int) -> None:
        c = PRESETS[model_name]
        rng = np.random.default_rng(seed + 104_729)
        self.k = c.num_experts_per_tok
        self.gate = rng.standard_normal((c.num_experts, c.hidden_size), dtype=np.float32) / np.sqrt(c.hidden_size)
        self.rng = rng

    def counts(self, tokens: int) -> list[int]:
        x = self.rng.standard_normal((tokens, self.gate.shape[1]), dtype=np.float32)  # (T, H)
        logits = x @ self.gate.T  # (T, E)
        top = np.argpartition(-logits, self.k - 1, axis=-1)[:, : self.k]  # (T, k)
        return np.bincount(top.reshape(-1), minlength=self.gate.shape[0]).tolist()
