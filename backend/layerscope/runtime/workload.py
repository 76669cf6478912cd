"""The workload: requests with arrival times, lengths and token ids, from `vllm bench serve` semantics or a trace.

    synthetic   like `--dataset-name random`: lengths uniform in [L(1-r), L(1+r)] (output at least 1), the
                shared prefix of `shared_prefix_len` tokens before each prompt (one of `num_prefixes`), token ids
                (offset_i + i + j) mod vocab after it; arrivals all at t=0 (request_rate inf) or Poisson
                (exponential gaps of mean 1/rate, as the benchmark's gamma with burstiness 1)
    trace       CSV   TIMESTAMP,ContextTokens,GeneratedTokens  (Azure LLM inference traces; TIMESTAMP a date
                      and time or seconds)
                JSONL {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]} per line
                      (Mooncake traces: each hash id names one 512-token block of the prompt; requests that
                      share a hash id share that block's tokens, so the prefix cache finds them at this
                      engine's block size, 16 tokens)
                times are taken relative to the first row; the shared prefix comes on top of each input.

Same spec, same requests: everything comes from one numpy Generator seeded with workload.seed.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from layerscope.runtime.request import Request
from layerscope.scenario import MAX_REQUEST_TOKENS, MAX_REQUESTS, MAX_WORKLOAD_TOKENS, WorkloadSpec

MAX_TRACE_BYTES = 4 * 1024 * 1024  # a trace file is read whole: a few MB bounds the memory it takes
CSV_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
JSONL_FIELDS = ("timestamp", "input_length", "output_length")
MAX_TRACE_MS = 1e15  # ~31,700 years in ms: far past any trace, and small enough that ms / 1000 cannot overflow
# Mooncake's traces hash prompts in blocks of 512 tokens, one hash id each (kvcache-ai/Mooncake, FAST'25 traces)
MOONCAKE_BLOCK = 512
MAX_HASH_ID = 2**63 - 1  # ids are non-negative integers; this bounds them to what numpy's seed takes
HASH_TOKENS_KEY = 0x4D6F6F6E  # seeds a hash id's block tokens apart from the workload's seed ("Moon")


class TraceError(ValueError):
    """A trace file could not be read; the message names the file, the line and the column."""


@dataclass(frozen=True)
class TraceRow:
    t_s: float  # seconds after the first row
    input_len: int
    output_len: int
    hash_ids: tuple[int, ...] = ()  # Mooncake: one id per 512-token block of the prompt, in order


def make_requests(w: WorkloadSpec, vocab_size: int) -> list[Request]:
    rng = np.random.default_rng(w.seed)
    hash_ids: list[tuple[int, ...]] = []
    if w.trace is not None:
        rows = load_trace(Path(w.trace))
        arrivals = [r.t_s * 1e6 for r in rows]
        inputs = [r.input_len for r in rows]
        outputs = [r.output_len for r in rows]
        hash_ids = [r.hash_ids for r in rows]
    else:
        n, r = w.num_requests, w.range_ratio
        inputs = _lengths(rng, w.input_len, r, n, low=1)
        outputs = _lengths(rng, w.output_len, r, n, low=1)
        arrivals = _arrivals(rng, n, w.request_rate)
    prefix = rng.integers(0, vocab_size, size=w.shared_prefix_len, dtype=np.int64)
    offsets = rng.integers(0, vocab_size, size=len(inputs), dtype=np.int64)
    prefixes = _more_prefixes(rng, w, prefix, vocab_size, len(inputs))
    blocks: dict[int, np.ndarray] = {}  # hash id -> its 512 tokens, made once
    out = []
    for i, (t, n_in, n_out) in enumerate(zip(arrivals, inputs, outputs, strict=True)):
        own = (offsets[i] + i + np.arange(n_in + n_out, dtype=np.int64)) % vocab_size  # prompt, then outputs
        if hash_ids and hash_ids[i]:
            _hashed_blocks(own, n_in, hash_ids[i], blocks, vocab_size)
        ids = np.concatenate([prefixes[i] if prefixes else prefix, own]).astype(np.int32)
        out.append(Request(i, float(t), w.shared_prefix_len + n_in, n_out, ids))
    return out


def _more_prefixes(rng: np.random.Generator, w: WorkloadSpec, first: np.ndarray, vocab_size: int,
                   n: int) -> list[np.ndarray]:
    """Each request's prefix when there are num_prefixes of them (drawn after everything a one-prefix workload
    draws, so that one keeps its requests): as vLLM's prefix_repetition dataset, n / num_prefixes requests per
    prefix, shuffled. Empty with one prefix."""
    if w.num_prefixes == 1:
        return []
    pool = [first, *rng.integers(0, vocab_size, size=(w.num_prefixes - 1, w.shared_prefix_len), dtype=np.int64)]
    order = rng.permutation(np.arange(n) % w.num_prefixes)
    return [pool[k] for k in order]


def _hashed_blocks(own: np.ndarray, n_in: int, ids: tuple[int, ...], blocks: dict[int, np.ndarray],
                   vocab_size: int) -> None:
    """The prompt's 512-token blocks take their hash id's tokens (the last one, cut short, its first tokens), so
    prompts sharing leading hash ids share those tokens; tokens past the ids stay the request's own."""
    for j, h in enumerate(ids):
        start = j * MOONCAKE_BLOCK
        n = min(MOONCAKE_BLOCK, n_in - start)
        if h not in blocks:
            blocks[h] = np.random.default_rng([HASH_TOKENS_KEY, h]).integers(0, vocab_size, MOONCAKE_BLOCK)
        own[start : start + n] = blocks[h][:n]


def _lengths(rng: np.random.Generator, mean: int, r: float, n: int, low: int) -> list[int]:
    lo, hi = max(low, int(mean * (1 - r))), max(low, int(mean * (1 + r)))
    return [int(x) for x in rng.integers(lo, hi + 1, size=n)]


def _arrivals(rng: np.random.Generator, n: int, rate: float) -> list[float]:
    """Send times in microseconds: all at 0, or a Poisson process (the first request at 0, as the benchmark)."""
    if math.isinf(rate):
        return [0.0] * n
    gaps = rng.exponential(1.0 / rate, size=n) * 1e6
    gaps[0] = 0.0
    return [float(t) for t in np.cumsum(gaps)]


# -- traces ---------------------------------------------------------------------------------------------------------
def load_trace(path: Path) -> list[TraceRow]:
    text = read_trace_text(path)
    rows = parse_jsonl(text, str(path)) if path.suffix in (".jsonl", ".json") else parse_csv(text, str(path))
    if not rows:
        raise TraceError(f"{path}: the trace has no requests")
    if len(rows) > MAX_REQUESTS:
        raise TraceError(f"{path}: {len(rows)} requests; a trace may hold at most {MAX_REQUESTS}")
    total = sum(r.input_len + r.output_len for r in rows)
    if total > MAX_WORKLOAD_TOKENS:
        raise TraceError(f"{path}: {total} tokens in all; the limit is {MAX_WORKLOAD_TOKENS}")
    t0 = rows[0].t_s
    return [TraceRow(r.t_s - t0, r.input_len, r.output_len, r.hash_ids) for r in rows]


def read_trace_text(path: Path, limit: int = MAX_TRACE_BYTES) -> str:
    """A regular file's text, at most `limit` bytes: a FIFO, a device (/dev/zero) or a directory is refused before
    anything is read (opened non-blocking, so a FIFO cannot block), and a file that grows past the limit while it
    is read is refused after limit + 1 bytes. A UTF-8 byte-order mark is dropped."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise TraceError(f"{path}: cannot read the trace: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(f"{path}: not a regular file; a trace is a CSV or JSONL file")
        if st.st_size > limit:
            raise TraceError(f"{path}: {st.st_size} bytes; a trace may be at most {limit} bytes")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise TraceError(f"{path}: cannot read the trace: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise TraceError(f"{path}: over {limit} bytes; a trace may be at most {limit} bytes")
    return data.decode("utf-8-sig", errors="replace")


def parse_csv(text: str, source: str = "trace") -> list[TraceRow]:
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff")))  # a spreadsheet's UTF-8 byte-order mark
    header = next(reader, None)
    if header is None or tuple(h.strip() for h in header[:3]) != CSV_COLUMNS:
        raise TraceError(f"{source}: line 1: expected the header {','.join(CSV_COLUMNS)}")
    rows: list[TraceRow] = []
    for line, cells in enumerate(reader, start=2):
        if not cells:
            continue
        if len(cells) < 3:
            raise TraceError(f"{source}: line {line}: expected 3 columns ({','.join(CSV_COLUMNS)}), got {len(cells)}")
        t = _time(cells[0], source, line)
        n_in = _count(cells[1], source, line, "ContextTokens", low=1)
        n_out = _count(cells[2], source, line, "GeneratedTokens", low=1)
        rows.append(_ordered(rows, TraceRow(t, n_in, n_out), source, line, "TIMESTAMP"))
    return rows


def parse_jsonl(text: str, source: str = "trace") -> list[TraceRow]:
    rows: list[TraceRow] = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as e:
            raise TraceError(f"{source}: line {line}: not JSON: {e.msg}") from None
        except (ValueError, RecursionError):  # an integer over Python's 4300-digit limit; nesting too deep
            raise TraceError(f"{source}: line {line}: not JSON this reader takes (a number too long or nested too "
                             "deeply)") from None
        if not isinstance(obj, dict):
            raise TraceError(f"{source}: line {line}: expected an object with {', '.join(JSONL_FIELDS)}")
        missing = [f for f in JSONL_FIELDS if f not in obj]
        if missing:
            raise TraceError(f"{source}: line {line}, column {missing[0]!r}: missing")
        t = obj["timestamp"]
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t <= MAX_TRACE_MS:  # nan fails too
            raise TraceError(f"{source}: line {line}, column 'timestamp': expected milliseconds in "
                             f"[0, {MAX_TRACE_MS:g}], got {_shown(t)}")
        n_in = _count(obj["input_length"], source, line, "input_length", low=1)
        n_out = _count(obj["output_length"], source, line, "output_length", low=1)
        ids = _hash_ids(obj.get("hash_ids"), n_in, source, line)
        rows.append(_ordered(rows, TraceRow(t / 1000.0, n_in, n_out, ids), source, line, "timestamp"))
    return rows


def _hash_ids(v: object, n_in: int, source: str, line: int) -> tuple[int, ...]:
    """Mooncake's hash_ids: at most one per 512-token block of the prompt, each an integer in [0, 2^63)."""
    if v is None:
        return ()
    most = -(-n_in // MOONCAKE_BLOCK)
    if not isinstance(v, list) or len(v) > most:
        raise TraceError(f"{source}: line {line}, column 'hash_ids': expected a list of at most {most} ids (one per "
                         f"{MOONCAKE_BLOCK}-token block of input_length {n_in}), got {_shown(v)}")
    for h in v:
        if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= MAX_HASH_ID:
            raise TraceError(f"{source}: line {line}, column 'hash_ids': expected integers in [0, {MAX_HASH_ID}], "
                             f"got {_shown(h)}")
    return tuple(v)


def _time(cell: str, source: str, line: int) -> float:
    s = cell.strip()
    try:
        t = float(s)
    except ValueError:
        pass
    else:
        if not abs(t) <= MAX_TRACE_MS / 1000.0:  # nan too: the engine loop would wait for it forever
            raise TraceError(f"{source}: line {line}, column 'TIMESTAMP': expected a finite time within "
                             f"{MAX_TRACE_MS / 1000.0:g} s, got {_shown(s)}")
        return t
    try:
        when = datetime.fromisoformat(s)
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()  # naive: UTC, never local time
    except (ValueError, OverflowError, OSError):
        raise TraceError(f"{source}: line {line}, column 'TIMESTAMP': not a date-time or seconds: {s!r}") from None


def _shown(v: object, most: int = 40) -> str:
    text = repr(v) if not isinstance(v, int) or abs(v) < 10**most else f"an integer of {len(str(abs(v)))} digits"
    return text if len(text) <= most else text[:most] + "..."


def _count(v: object, source: str, line: int, column: str, low: int) -> int:
    try:
        n = int(v.strip()) if isinstance(v, str) else v
    except ValueError:
        n = None
    if isinstance(n, bool) or not isinstance(n, int) or not low <= n <= MAX_REQUEST_TOKENS:
        raise TraceError(f"{source}: line {line}, column {column!r}: expected an integer in "
                         f"[{low}, {MAX_REQUEST_TOKENS}], got {_shown(v)}")
    return n


def _ordered(rows: list[TraceRow], row: TraceRow, source: str, line: int, column: str) -> TraceRow:
    if rows and row.t_s < rows[-1].t_s:
        raise TraceError(f"{source}: line {line}, column {column!r}: time goes backwards")
    return row
