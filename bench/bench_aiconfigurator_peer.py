"""NVIDIA's AIConfigurator as a peer: the published serving rows (bench/bench_validation.py) predicted by it and by
LayerScope, beside the measurement.

AIConfigurator is never a dependency of LayerScope: this script installs aiconfigurator 0.12.0 (PyPI) into its own
venv under /tmp if it is missing and runs `aiconfigurator.cli.api.cli_estimate` there (mode agg: in-flight batching
at a steady batch of `--max-concurrency` requests, its default perf database for the system and backend), one
subprocess for all rows. Rows it can predict: one request stream at a fixed concurrency ([S] SGLang on 8 x B200, [T]
vLLM on one A100, [V] vLLM on one H100); the bursts of 500 requests sent at once ([G], [GA]) are queues it does not
model (its agg estimate has no arrival process). Prints one JSON line and the markdown table of bench/README.md.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_aiconfigurator_peer.py [--sources S,T,V]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import bench_validation as bv  # noqa: E402  (the published rows and LayerScope's runs of them)

AIC_VERSION = "0.12.0"
AIC_VENV = Path(os.environ.get("AIC_VENV", f"/tmp/aiconfigurator-{AIC_VERSION}"))
AIC_MODEL = {"qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B", "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B"}
AIC_SYSTEM = {"b200": "b200_sxm", "h100-sxm": "h100_sxm", "a100-80g-sxm": "a100_sxm", "h200": "h200_sxm"}
TPOT = ("mean_tpot_ms", "median_tpot_ms")
TTFT = ("mean_ttft_ms", "median_ttft_ms")

# Runs inside AIConfigurator's venv: a JSON list of estimate kwargs on stdin, one JSON result per query on stdout.
WORKER = r"""
import json, logging, sys
logging.disable(logging.WARNING)
from aiconfigurator.cli.api import cli_estimate
out = []
for q in json.load(sys.stdin):
    try:
        r = cli_estimate(**q)
        out.append({"ttft_ms": r.ttft, "tpot_ms": r.tpot, "request_latency_ms": r.request_latency})
    except Exception as e:  # a row it cannot estimate: say why, keep going
        out.append({"error": f"{type(e).__name__}: {e}"[:300]})
print("AIC-RESULTS " + json.dumps(out))
"""


def ensure_venv() -> Path:
    """AIConfigurator's python, installed into its own venv on first use."""
    python = AIC_VENV / "bin" / "python"
    probe = [str(python), "-c", f"import aiconfigurator, importlib.metadata as m; "
             f"assert m.version('aiconfigurator') == '{AIC_VERSION}'"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(AIC_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"aiconfigurator=={AIC_VERSION}"], check=True)
    return python


def query(m: bv.Measured) -> dict[str, Any]:
    """The row as AIConfigurator's estimate takes it: mean lengths, a steady batch of its concurrency."""
    w, d = m.workload, m.deployment
    tp = d.get("tp", 1)
    ep = d.get("ep", 1)
    return {
        "model_path": AIC_MODEL[m.model], "system_name": AIC_SYSTEM[m.gpu], "mode": "agg",
        "backend_name": d.get("engine", "vllm"), "isl": w["input_len"], "osl": w["output_len"],
        "batch_size": w.get("max_concurrency") or w["num_requests"], "tp_size": tp,
        "moe_tp_size": tp // ep, "moe_ep_size": ep,
    }


def aic_predict(python: Path, rows: list[bv.Measured], cache: Path) -> list[dict[str, Any]]:
    """AIConfigurator's estimate of each row; estimates already in `cache` (keyed by the query) are not redone."""
    known: dict[str, Any] = json.loads(cache.read_text()) if cache.exists() else {}
    queries = [json.dumps(query(m), sort_keys=True) for m in rows]
    todo = sorted({q for q in queries if q not in known})
    if todo:
        proc = subprocess.run([str(python), "-c", WORKER], input=json.dumps([json.loads(q) for q in todo]),
                              capture_output=True, text=True, check=False)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("AIC-RESULTS ")), None)
        if line is None:
            raise SystemExit(f"AIConfigurator failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        known.update(zip(todo, json.loads(line.removeprefix("AIC-RESULTS ")), strict=True))
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(known, indent=1))
        tmp.replace(cache)
    return [known[q] for q in queries]


def layerscope_rows(rows: list[bv.Measured], saved: Path | None) -> list[dict[str, Any]]:
    """LayerScope's runs of the rows: from a saved `bench_validation.py` JSON line, or simulated now."""
    if saved is None:
        return bv.run(rows)
    data = json.loads(saved.read_text().splitlines()[0])
    labels = {m.label for m in rows}
    return [r for r in data["rows"] if r["case"] in labels]


def side_by_side(rows: list[bv.Measured], aic: list[dict[str, Any]],
                 ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m, a in zip(rows, aic, strict=True):
        for r in (r for r in ours if r["case"] == m.label and r["metric"] in (*TPOT, *TTFT)):
            peer = a.get("tpot_ms" if r["metric"] in TPOT else "ttft_ms")
            out.append({"source": m.source, "case": m.label, "metric": r["metric"], "measured": r["measured"],
                        "aiconfigurator": None if peer is None else round(peer, 2),
                        "aic_rel_error": None if peer is None else round(peer / r["measured"] - 1, 3),
                        "layerscope": r["simulated"], "layerscope_rel_error": r["rel_error"],
                        "aic_error": a.get("error")})
    return out


def medians(rows: list[dict[str, Any]], metrics: tuple[str, ...]) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for src in sorted({r["source"] for r in rows}) + ["all"]:
        sel = [r for r in rows if r["metric"] in metrics and src in (r["source"], "all")]
        aic = [abs(r["aic_rel_error"]) for r in sel if r["aic_rel_error"] is not None]
        ls = [abs(r["layerscope_rel_error"]) for r in sel]
        out[src] = {"aiconfigurator": round(statistics.median(aic), 3) if aic else None,
                    "layerscope": round(statistics.median(ls), 3) if ls else None}
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| source | case | metric | measured | AIConfigurator | error | LayerScope | error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        aic = "n/a" if r["aiconfigurator"] is None else f"{r['aiconfigurator']:,.2f}"
        aic_e = "n/a" if r["aic_rel_error"] is None else f"{r['aic_rel_error']:+.1%}"
        lines.append(f"| {r['source']} | {r['case']} | {r['metric']} | {r['measured']:,.2f} | {aic} | {aic_e} | "
                     f"{r['layerscope']:,.2f} | {r['layerscope_rel_error']:+.1%} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sources", default="S,T,V", help="comma-separated keys of S, T, V (the fixed-concurrency rows)")
    p.add_argument("--layerscope", type=Path, default=None, metavar="JSON",
                   help="LayerScope's figures from a saved `bench_validation.py` output instead of simulating again")
    p.add_argument("--cache", type=Path, default=Path("/tmp/aiconfigurator_peer_cache.json"),
                   help="AIConfigurator's estimates, kept between runs (its estimates do not change with LayerScope)")
    args = p.parse_args()
    keys = [k.strip() for k in args.sources.split(",") if k.strip()]
    bad = sorted(set(keys) - {"S", "T", "V"})
    if bad:
        p.error(f"unknown or unpredictable source {', '.join(bad)}; choose from S, T, V")
    rows = [m for k in keys for m in bv.SOURCES[k]]
    python = ensure_venv()
    result = side_by_side(rows, aic_predict(python, rows, args.cache), layerscope_rows(rows, args.layerscope))
    print(json.dumps({"bench": "aiconfigurator_peer", "aiconfigurator": AIC_VERSION, "rows": result,
                      "tpot_abs_error_median": medians(result, TPOT),
                      "ttft_abs_error_median": medians(result, TTFT)}))
    print(table(result))


if __name__ == "__main__":
    main()
