"""Byte-identity check of the events: the sha256 of every preset's JSONL recording (and of its compare run) and of
the serving bench workloads', against the committed bench/event_digests.json (`make test` and CI check it).

    .venv/bin/python bench/event_digests.py --check bench/event_digests.json   # exit 1 on a change, naming it
    .venv/bin/python bench/event_digests.py --save bench/event_digests.json    # a change to the events on purpose

A commit that changes events updates the file in the same commit and says why in its message ("events change: ...").
"""

from __future__ import annotations

import os

# numpy picks its exp/log/pow loops by the CPU at run time (AVX-512's differ from AVX2's in the last bits; numpy
# 2.4's `show_runtime` calls the levels X86_V3, X86_V4, ...), and a last bit can round an event's time the other
# way: the digests are computed on numpy's baseline loops, the same on every x86-64 machine (set before numpy loads;
# only when run as the check, so a test importing this module leaves its own processes as they are).
if __name__ == "__main__":
    os.environ["NPY_DISABLE_CPU_FEATURES"] = "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

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
    bad = changed(want, got)
    print("identical" if not bad else failure_message(bad, args.check))
    sys.exit(1 if bad else 0)


def changed(want: dict[str, str], got: dict[str, str]) -> list[str]:
    """The runs whose digest differs from, or is missing in, `want`."""
    return sorted(k for k, v in got.items() if want.get(k) != v)


def failure_message(bad: list[str], path: Path) -> str:
    return (f"CHANGED: the events of {', '.join(bad)} differ from {path}. If the change is on purpose, update the "
            f"file with `python bench/event_digests.py --save {path}` in the same commit, and say why in its "
            "message (\"events change: ...\"); if not, the change broke byte-identical events.")


if __name__ == "__main__":
    main()
