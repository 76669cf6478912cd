"""Byte-identity check for engine refactors: the sha256 of every preset's JSONL recording (and of its compare
run) and of the serving bench workload's, saved before a change and checked after it.

    .venv/bin/python bench/event_digests.py --save /tmp/before.json      # on the old code
    .venv/bin/python bench/event_digests.py --check /tmp/before.json     # on the new code: exit 1 on a change
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from layerscope.atomic import write_text_atomic
from layerscope.export.events import to_jsonl
from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec, load_file

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_serving import SERVING, SINGLE  # noqa: E402


def digests(only: list[str] | None = None) -> dict[str, str]:
    specs: dict[str, ScenarioSpec] = {p.stem: load_file(p) for p in sorted((ROOT / "scenarios").glob("*.yaml"))}
    specs["bench-serving-500"] = SERVING
    specs["bench-131k"] = SINGLE
    # the serving loop's other paths: prefix caching, Poisson arrivals, the article runtime, a small pool
    specs["bench-serving-prefix"] = SERVING.with_overrides({
        "workload.num_requests": 120, "workload.shared_prefix_len": 256, "scheduler.prefix_caching": True})
    specs["bench-serving-poisson"] = SERVING.with_overrides({"workload.num_requests": 120,
                                                             "workload.request_rate": 20.0})
    specs["bench-serving-article"] = SERVING.with_overrides({"workload.num_requests": 120, "runtime": "article",
                                                             "deployment": None})
    specs["bench-serving-preempt"] = SERVING.with_overrides({"workload.num_requests": 120, "free_hbm_gib": 1.25})
    out = {}
    for name, spec in specs.items():
        if only and name not in only:
            continue
        r = simulate(spec)
        out[name] = hashlib.sha256(to_jsonl(r).encode()).hexdigest()
        if r.compare is not None:
            out[name + ":compare"] = hashlib.sha256(to_jsonl(r.compare).encode()).hexdigest()
        print(name, out[name][:16], flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--check", type=Path)
    p.add_argument("--only", nargs="*", help="preset names to run (default: all)")
    args = p.parse_args()
    got = digests(args.only)
    if args.save:
        write_text_atomic(args.save, json.dumps(got, indent=1, sort_keys=True) + "\n")
        return
    want = json.loads(args.check.read_text())
    bad = [k for k, v in got.items() if want.get(k) != v]
    print("identical" if not bad else f"CHANGED: {bad}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
