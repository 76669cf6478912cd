"""Run a scenario: simulate it, print a short summary, and write events, a Perfetto trace, the summary."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from layerscope import scenario
from layerscope.atomic import atomic_writer
from layerscope.export import trace
from layerscope.export.events import jsonl_lines
from layerscope.runtime.engine import simulate

HELP = "simulate a scenario (preset name or YAML path) and write its events, trace and summary"

TABLE = (
    ("prefill_layer_us", "prefill, one layer", "us"),
    ("prefill_model_ms", "prefill, whole model", "ms"),
    ("num_chunks", "chunks (attention launches)", ""),
    ("chunk_sizes", "chunk sizes", "tokens"),
    ("decode_first_step_us", "first decode step, one layer", "us"),
    ("decode_step_p50_us", "decode step p50, one layer", "us"),
    ("decode_step_p99_us", "decode step p99, one layer", "us"),
    ("decode_model_step_ms", "decode step, whole model", "ms"),
    ("jitter_us", "jitter (vs running median)", "us"),
    ("over_sla_steps", "steps over SLA", ""),
    ("kv_pages", "KV pages", ""),
    ("peak_hbm_used_gib", "peak HBM used", "GiB"),
    ("migrations", "page migrations", ""),
    ("evictions", "page evictions", ""),
    ("alloc_failures", "allocation failures", ""),
    ("cross_bank_reads", "cross-bank reads (last step)", ""),
    ("faults_injected", "faults injected", ""),
    ("faults_detected", "faults detected", ""),
    ("crc_bad_banks", "banks failing CRC", ""),
    ("max_rel_error", "max numeric rel. error (scaled)", ""),
    # serving runs (a workload): the figures `vllm bench serve` prints, whole-model times
    ("completed", "successful requests", ""),
    ("duration", "benchmark duration", "s"),
    ("request_throughput", "request throughput", "req/s"),
    ("output_throughput", "output token throughput", "tok/s"),
    ("total_token_throughput", "total token throughput", "tok/s"),
    ("mean_ttft_ms", "mean TTFT", "ms"),
    ("p99_ttft_ms", "P99 TTFT", "ms"),
    ("mean_tpot_ms", "mean TPOT", "ms"),
    ("p99_tpot_ms", "P99 TPOT", "ms"),
    ("mean_itl_ms", "mean ITL", "ms"),
    ("p99_itl_ms", "P99 ITL", "ms"),
    ("num_preemptions", "preemptions", ""),
    ("prefix_cache_hit_rate", "prefix cache hit rate", ""),
)


def add_scenario_arguments(p: argparse.ArgumentParser) -> None:
    """The scenario and its --set overrides, as every command that runs one takes them (read by load_spec)."""
    p.add_argument("scenario", help="a preset name (see `layerscope scenarios`) or a path to a YAML file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a field (repeatable)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_arguments(p)
    p.add_argument(
        "--events", type=Path, metavar="OUT.jsonl", help="write the spec, then each event, as JSON lines ('-': stdout)"
    )
    p.add_argument("--trace", type=Path, metavar="OUT.json", help="write a Chrome/Perfetto trace ('-': stdout)")
    p.add_argument("--summary", type=Path, metavar="OUT.json", help="write the summary figures as JSON ('-': stdout)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")


STDOUT = Path("-")


def load_spec(name: str, assignments: list[str]) -> scenario.ScenarioSpec:
    spec = scenario.load(name)
    return scenario.apply_overrides(spec, scenario.parse_set(assignments)) if assignments else spec


def run(args: argparse.Namespace) -> int:
    outputs = [a for a in (args.events, args.trace, args.summary) if a is not None]
    if outputs.count(STDOUT) > 1:
        raise ValueError("only one of --events, --trace, --summary can be '-' (stdout)")
    spec = load_spec(args.scenario, args.set)
    bar = _ProgressBar(spec.name) if sys.stderr.isatty() and not args.quiet else None
    result = simulate(spec, progress=bar.update if bar else None)
    if bar:
        bar.close()
    if args.events:
        with _output(args.events) as f:
            f.writelines(jsonl_lines(result))
    if args.trace:
        with _output(args.trace) as f:
            f.write(trace.to_json(result))
    if args.summary:
        with _output(args.summary) as f:
            f.write(json.dumps(trace._finite(result.summary), indent=2, sort_keys=True) + "\n")
    if not args.quiet:  # the table goes to stderr when stdout carries a file
        print(format_summary(spec, result.summary, len(result.events)), file=sys.stderr if STDOUT in outputs else None)
    return 0


@contextmanager
def _output(path: Path) -> Iterator[TextIO]:
    """The file at `path` (written atomically: on an error the old file stays), or stdout for '-' (left open)."""
    if path == STDOUT:
        yield sys.stdout
    else:
        with atomic_writer(path) as f:
            yield f


def format_summary(spec: scenario.ScenarioSpec, summary: dict, num_events: int) -> str:
    allocator = summary.get("allocator", spec.allocator)  # a serving vllm run takes vLLM's free-block queue
    head = f"{spec.name}: {spec.model} on {spec.gpu}, {spec.runtime} runtime, {allocator} allocator"
    lines = [head, f"  {num_events} events; times at full size, numerics at the scaled size ({spec.numerics_model})"]
    for key, label, unit in TABLE:
        if key in summary:
            v = summary[key]
            text = f"{v:,.3f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v)
            lines.append(f"  {label:34s} {text:>14s} {unit}")
    return "\n".join(lines)


class _ProgressBar:
    """A one-line bar on stderr (only when stderr is a terminal)."""

    def __init__(self, label: str, width: int = 30) -> None:
        self.label, self.width, self.last = label, width, -1

    def update(self, fraction: float) -> None:
        filled = int(fraction * self.width)
        if filled != self.last:
            self.last = filled
            sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {fraction:4.0%}")
            sys.stderr.flush()

    def close(self) -> None:
        self.update(1.0)
        sys.stderr.write("\n")
