"""The per-price work of a 500-request `layerscope bench` run (issue 23), one JSON line.

Runs the bench's simulate() once (summary only, bench_scale.py's BENCH_500), collecting every (kernel, env) its cost
model prices, then, with the collector off as in a run (layerscope/gcpause.py), medians over --runs of:

    prices_cpu_s     those kernels priced afresh by a new CostModel (the roofline terms, the tables' memoised
                     lookups, the KernelCosts)
    memo_hits_cpu_s  three passes of a Timing's memo hits over them once priced (the warm run's lookups)
    fresh_eq_cpu_s   copies of them made (no cached hash: a warm run's new kernels), hashed and found in a memo of the
                     originals (the hash and the equality a warm run's hits pay)

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_pricing.py [--runs N]

Pair two trees by PYTHONPATH=<tree>/backend, alternating A B B A.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import BENCH_500  # noqa: E402


def collect() -> list[tuple[object, object, object]]:
    from layerscope.commands.bench import add_arguments, bench_spec
    from layerscope.hardware import cost
    from layerscope.runtime.engine import simulate

    seen: list[tuple[object, object, object]] = []
    real = cost.CostModel.cost

    def spy(self: cost.CostModel, k: object, env: object = cost.DEFAULT_ENV) -> object:
        seen.append((self.gpu, k, env))
        return real(self, k, env)  # type: ignore[arg-type]

    p = argparse.ArgumentParser()
    add_arguments(p)
    cost.CostModel.cost = spy  # type: ignore[assignment,method-assign]
    try:
        simulate(bench_spec(p.parse_args(BENCH_500[1:])), summary_only=True)
    finally:
        cost.CostModel.cost = real  # type: ignore[method-assign]
    return seen


def median_cpu(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return round(statistics.median(times), 4)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    from layerscope.hardware.cost import CostModel
    from layerscope.hardware.kernel import Kernel
    from layerscope.runtime.timing import Timing

    seen = collect()
    gpu, ks = seen[0][0], [(k, e) for _, k, e in seen]
    gc.disable()  # as a run: runtime/gcpause.py

    def price() -> None:
        model = CostModel(gpu)  # type: ignore[arg-type]
        for k, e in ks:
            model.cost(k, e)  # type: ignore[arg-type]

    timing = Timing(CostModel(gpu), None)  # type: ignore[arg-type]
    for k, e in ks:
        timing._cost(k, e)  # type: ignore[arg-type]

    def hits() -> None:
        for _ in range(3):
            for k, e in ks:
                timing._cost(k, e)  # type: ignore[arg-type]

    memo = {(k, e): None for k, e in ks}

    def fresh(k: Kernel) -> Kernel:
        new = object.__new__(Kernel)
        new.__dict__.update(k.__dict__)
        new.__dict__.pop("_hash", None)
        return new

    def fresh_eq() -> None:
        for k, e in [(fresh(k), e) for k, e in ks]:  # type: ignore[arg-type]
            memo.get((k, e))

    print(json.dumps({"bench": "pricing_500", "prices": len(ks), "prices_cpu_s": median_cpu(price, args.runs),
                      "memo_hits_cpu_s": median_cpu(hits, args.runs), "fresh_eq_cpu_s": median_cpu(fresh_eq, args.runs),
                      "runs": args.runs, "load_avg_1m": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
