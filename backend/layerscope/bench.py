"""`layerscope bench` as `vllm bench serve` reports: its printed result block, its saved JSON keys, and a
comparison with a result measured on a real system (vLLM --save-result JSON or SGLang bench_serving JSONL).

The block's layout follows vllm/benchmarks/serve.py: a 50-wide "=" title, "{:<40} {:<10}" rows, "-" section
heads for each metric of --percentile-metrics (default ttft,tpot,itl), mean / median / P99 per metric.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypeGuard

PERCENTILE_METRICS = {  # key stem -> (section title, label)
    "ttft": ("Time to First Token", "TTFT"),
    "tpot": ("Time per Output Token (excl. 1st token)", "TPOT"),
    "itl": ("Inter-token Latency", "ITL"),
    "e2el": ("End-to-end Latency", "E2EL"),
}
# Keys a measured result and the simulation share, in the order the comparison prints them.
COMPARED = (
    "duration", "request_throughput", "output_throughput", "total_token_throughput",
    *(f"{s}_{m}_ms" for m in PERCENTILE_METRICS for s in ("mean", "median", "p99")),
)
# The part of TTFT outside the engine (runtime/frontend_latency.py): summary key -> label. Not in vLLM's output:
# `vllm bench serve` measures it inside TTFT; vLLM's server-side vllm:time_to_first_token_seconds leaves it out.
FRONTEND_KEYS = {
    "mean_frontend_ms": "Mean outside the engine (ms):",
    "mean_frontend_tokenize_ms": "  tokenize (ms):",
    "mean_frontend_request_ms": "  HTTP request, hand-off (ms):",
    "mean_frontend_response_ms": "  detokenize, SSE stream (ms):",
}
# SGLang bench_serving names -> vLLM's.
SGLANG_KEYS: dict[str, str] = {
    "mean_e2e_latency_ms": "mean_e2el_ms",
    "median_e2e_latency_ms": "median_e2el_ms",
    "p99_e2e_latency_ms": "p99_e2el_ms",
    "total_throughput": "total_token_throughput",
}


def _title(s: str, c: str) -> str:
    return "{s:{c}^{n}}".format(s=s, n=50, c=c)


def _row(label: str, value: Any) -> str:
    if isinstance(value, float):
        return f"{label:<40} {value:<10.2f}"
    return f"{label:<40} {value:<10}"


def result_block(r: dict[str, Any], percentile_metrics: str = "ttft,tpot,itl") -> str:
    """The block `vllm bench serve` prints, from a result with its saved keys."""
    lines = [_title(" Serving Benchmark Result ", "="), _row("Successful requests:", int(r["completed"]))]
    if "failed" in r:  # requests the server refused (over max_model_len), as vLLM's block prints them
        lines.append(_row("Failed requests:", int(r["failed"])))
    if r.get("max_concurrency") is not None:
        lines.append(_row("Maximum request concurrency:", r["max_concurrency"]))
    lines += [
        _row("Benchmark duration (s):", float(r["duration"])),
        _row("Total input tokens:", int(r["total_input_tokens"])),
        _row("Total generated tokens:", int(r["total_output_tokens"])),
        _row("Request throughput (req/s):", float(r["request_throughput"])),
    ]
    if r.get("request_goodput") is not None:  # vLLM prints it only with --goodput, right here
        lines.append(_row("Request goodput (req/s):", float(r["request_goodput"])))
    lines += [
        _row("Output token throughput (tok/s):", float(r["output_throughput"])),
        _row("Total Token throughput (tok/s):", float(r["total_token_throughput"])),
    ]
    for m in parse_metrics(percentile_metrics):
        section, label = PERCENTILE_METRICS[m]
        lines.append(_title(section, "-"))
        lines += [_row(f"Mean {label} (ms):", float(r[f"mean_{m}_ms"])),
                  _row(f"Median {label} (ms):", float(r[f"median_{m}_ms"])),
                  _row(f"P99 {label} (ms):", float(r[f"p99_{m}_ms"]))]
        if m == "ttft" and "mean_frontend_ms" in r:  # its part before and after the engine, as its own lines
            lines += [_row(label, float(r[k])) for k, label in FRONTEND_KEYS.items()]
    lines.append("=" * 50)
    return "\n".join(lines)


def parse_metrics(text: str) -> list[str]:
    ms = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in ms if m not in PERCENTILE_METRICS]
    if bad or not ms:
        raise ValueError(f"--percentile-metrics {text!r}: choose from {','.join(PERCENTILE_METRICS)}")
    return ms


def load_measured(path: Path) -> dict[str, Any]:
    """A result saved by `vllm bench serve --save-result` (one JSON object) or SGLang's bench_serving (JSON lines,
    one per run: the last is taken), with SGLang's names mapped to vLLM's."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ValueError(f"--compare-to {path}: {e.strerror or e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        try:
            data = json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError as e:
            raise ValueError(f"--compare-to {path}: not a vLLM or SGLang result JSON ({e.msg})") from None
    if not isinstance(data, dict) or not any(k in data for k in COMPARED):
        raise ValueError(f"--compare-to {path}: no serving metrics found (expected keys like median_tpot_ms)")
    return {SGLANG_KEYS.get(str(k), str(k)): v for k, v in data.items()}


def compare(measured: dict[str, Any], simulated: dict[str, Any]) -> list[dict[str, Any]]:
    """Every shared metric: measured, simulated and the relative error (simulated / measured - 1)."""
    rows = []
    for key in COMPARED:
        m, s = measured.get(key), simulated.get(key)
        if not _number(m) or not _number(s):
            continue
        rel = (float(s) - float(m)) / float(m) if float(m) != 0 else None
        rows.append({"metric": key, "measured": float(m), "simulated": float(s), "rel_error": rel})
    if not rows:
        raise ValueError("the measured result shares no metric with the simulation")
    return rows


def _number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def comparison_block(rows: list[dict[str, Any]], source: str) -> str:
    lines = [_title(" Measured vs simulated ", "="), f"measured: {source}",
             "{:<28} {:>12} {:>12} {:>10}".format("metric", "measured", "simulated", "error")]
    for r in rows:
        err = "-" if r["rel_error"] is None else f"{r['rel_error']:+.1%}"
        lines.append("{:<28} {:>12.2f} {:>12.2f} {:>10}".format(r["metric"], r["measured"], r["simulated"], err))
    lines.append("=" * 50)
    return "\n".join(lines)
