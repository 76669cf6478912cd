"""The server's prepare step per preset (issue 23): CPU seconds from a simulated run to its `loaded` message, and
the rest the server makes after sending it (streamed events, claims, tour checks: the `details` message).

Run in a process warmed as a cold server warms itself (server/prewarm.warm_process: imports, the claims' probe
run, a small run prepared), each preset simulated first (not timed). Code from before the split (one `prepare`
for everything) reports its whole prepare as `to_loaded_s` and no rest. One JSON line per preset.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_prepare.py [--scenario a,b,...]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time

HEAVY = "two-nodes-wide-ep,replicas-prefix-router,two-node-1p3d,dp-attention-ep8,fragmentation-oom"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default=HEAVY, help="presets separated by commas (default: the five heaviest)")
    args = ap.parse_args()
    from layerscope.runtime.engine import simulate
    from layerscope.scenario import load_preset
    from layerscope.server import runs
    from layerscope.server.prewarm import warm_process

    warm_process(simulate)
    split = hasattr(runs, "prepare_first_screen")
    for name in args.scenario.split(","):
        result = simulate(load_preset(name))
        gc.collect()
        c0 = time.process_time()
        run = runs.prepare_first_screen(result) if split else runs.prepare(result)
        c1 = time.process_time()
        if split:
            runs.make_rest(run)
        c2 = time.process_time()
        print(json.dumps({"bench": "prepare", "scenario": name, "to_loaded_cpu_s": round(c1 - c0, 3),
                          "rest_cpu_s": round(c2 - c1, 3) if split else None,
                          "loaded_bytes": len(run.loaded.text.encode()), "load_avg_1m": round(os.getloadavg()[0], 2)}),
              flush=True)


if __name__ == "__main__":
    main()
