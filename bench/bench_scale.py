"""Speed at the scale users bring (issue 23): every simulation and start-up target, one JSON line each.

    serving_500_in_process   simulate() of 500 requests (~500 in / ~500 out, range_ratio 1, concurrency 100) on
                             8 x H200 tp 8, summary only (what `layerscope bench` runs); the full run beside it
    bench_500_process        the whole `layerscope bench` process for the same workload
    bench_10k_process        `layerscope bench`, 10,000 requests (1000 in / 200 out, concurrency 64): wall, peak RSS
    trace_10k_process        `layerscope bench --workload-trace` on a 10,000-row Azure-style trace (made here)
    single_131k_in_process   simulate() of a 131072-token prompt + 1000 decode steps (one request)
    single_131k_run_process  `layerscope run` of the same, writing nothing but its printed summary
    help_process             `layerscope --help`
    sweep_16x500_process     `layerscope sweep` of 16 points x 500 requests, --jobs 2

In-process figures are medians over --runs runs after one warm-up; process figures are medians over --runs fresh
processes (wall from spawn to exit, peak RSS from wait4). The load average is printed beside each.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_scale.py [--runs N] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LAYERSCOPE = [sys.executable, "-m", "layerscope"]
BENCH_500 = ["bench", "--gpu", "h200", "--tp", "8", "--random-input-len", "500", "--random-output-len", "500",
             "--random-range-ratio", "1", "--num-prompts", "500", "--max-concurrency", "100", "--json"]
BENCH_10K = ["bench", "--gpu", "h200", "--tp", "8", "--random-input-len", "1000", "--random-output-len", "200",
             "--num-prompts", "10000", "--max-concurrency", "64", "--json"]
RUN_131K = ["run", "long-context-128k", "--set", "decode_steps=1000", "--set", "free_hbm_gib=60", "--quiet"]
SWEEP = ["sweep", "serving-64-h200-tp8", "--set", "workload.num_requests=500", "--set", "workload.input_len=500",
         "--set", "workload.output_len=500", "--set", "workload.range_ratio=1",
         "--grid", "workload.max_concurrency=16,32,64,100", "--grid", "scheduler.max_num_seqs=64,128,256,512",
         "--jobs", "2", "--json"]


def azure_trace(path: Path, rows: int = 10_000, seed: int = 0) -> None:
    """An Azure LLM inference trace (2023, "code"/"conversation" style): TIMESTAMP,ContextTokens,GeneratedTokens,
    about an hour of arrivals (Poisson, ~2.8 requests/s), prompt and output lengths log-normal (medians ~1000 and
    ~200 tokens, as the published trace's conversation set), clipped to what one request may hold."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(3600.0 / rows, rows)
    t = np.cumsum(gaps)
    ctx = np.clip(rng.lognormal(np.log(1000), 0.9, rows), 16, 16_000).astype(int)
    gen = np.clip(rng.lognormal(np.log(200), 0.8, rows), 1, 2_000).astype(int)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for s, c, g in zip(t, ctx, gen, strict=True):
        whole = int(s)
        frac = int((s - whole) * 1e6)
        lines.append(f"2023-11-16 {18 + whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}.{frac:06d},{c},{g}")
    path.write_text("\n".join(lines) + "\n")


def wrapped(args: list[str], runs: int) -> dict:
    """Median wall of fresh `layerscope ...` processes, their peak RSS and their exit: each runs through a two-line
    wrapper that prints its own high-water mark (VmHWM) and the time at its last atexit handler; exit_s is from
    then to the process's end as this parent sees it (the interpreter's finalization: its collections, freeing)."""
    # VmHWM, not getrusage's ru_maxrss: that one keeps the forking parent's size across exec
    code = ("import runpy, sys, time; sys.argv = ['layerscope'] + sys.argv[1:];"
            "import atexit; atexit.register(lambda: sys.stderr.write('\\nPEAK_RSS_KB %s\\nEXIT_AT %r\\n' % (next("
            "ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM')), time.time())));"
            "runpy.run_module('layerscope', run_name='__main__')")
    walls, cpus, rss, exits = [], [], [], []
    out = ""
    for _ in range(runs):
        with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
            t = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, stdout=o, stderr=e)
            _, status, usage = os.wait4(proc.pid, 0)  # the child's own CPU time, not the machine's wall share
            walls.append(time.perf_counter() - t)
            ended = time.time()
            proc.returncode = os.waitstatus_to_exitcode(status)
            o.seek(0)
            e.seek(0)
            stdout, stderr = o.read().decode(), e.read().decode()
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(args)}: exit {proc.returncode}: {stderr[-400:]}")
        cpus.append(usage.ru_utime + usage.ru_stime)
        kb = [int(line.split()[1]) for line in stderr.splitlines() if line.startswith("PEAK_RSS_KB")]
        rss.append(round(kb[-1] / 1024, 1) if kb else float("nan"))
        at = [float(line.split()[1]) for line in stderr.splitlines() if line.startswith("EXIT_AT")]
        exits.append(ended - at[-1] if at else float("nan"))
        out = stdout
    return {"wall_s_median": round(statistics.median(walls), 3), "wall_s": [round(w, 3) for w in walls],
            "cpu_s_median": round(statistics.median(cpus), 3), "exit_s_median": round(statistics.median(exits), 3),
            "peak_rss_mib_max": max(rss), "runs": runs,
            "_stdout": out}


def compile_package() -> None:
    """Bytecode for the layerscope package being timed, as an installed wheel has (pip compiles on install): with
    PYTHONDONTWRITEBYTECODE set, as on this machine, every fresh process would otherwise compile its sources again
    (~0.1 s). compileall writes the caches whatever that variable says; the processes then only read them."""
    import compileall

    import layerscope

    compileall.compile_dir(str(Path(layerscope.__file__).parent), quiet=1)


def in_process(make: Callable[[], object], runs: int) -> dict:
    make()  # imports and the cost model's caches
    walls, cpus = [], []
    result: object = None
    for _ in range(runs):
        result = None  # the previous result freed before the clock starts
        t, c = time.perf_counter(), time.process_time()
        result = make()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return {"wall_s_median": round(statistics.median(walls), 3), "cpu_s_median": round(statistics.median(cpus), 3),
            "runs": runs, "kept": type(result).__name__}


def serving_500(runs: int) -> dict:
    from layerscope.commands.bench import add_arguments as bench_args
    from layerscope.commands.bench import bench_spec
    from layerscope.runtime.engine import simulate

    p = argparse.ArgumentParser()
    bench_args(p)
    spec = bench_spec(p.parse_args(BENCH_500[1:]))
    try:
        simulate(spec.with_overrides({"workload.num_requests": 2}), summary_only=True)
    except TypeError:  # code before the summary-only mode (the "before" figures): the full run only
        full = in_process(lambda: simulate(spec), runs)
        return {**full, "full_events_wall_s_median": full["wall_s_median"],
                "full_events_cpu_s_median": full["cpu_s_median"], "summary_only": False}
    brief = in_process(lambda: simulate(spec, summary_only=True), runs)
    full = in_process(lambda: simulate(spec), runs)
    return {**brief, "full_events_wall_s_median": full["wall_s_median"],
            "full_events_cpu_s_median": full["cpu_s_median"]}


def single_131k(runs: int) -> dict:
    from layerscope.runtime.engine import simulate
    from layerscope.scenario import ScenarioSpec

    spec = ScenarioSpec(name="bench-131k", model="qwen3-235b-a22b", runtime="vllm", gpu="h200", prompt_len=131072,
                        decode_steps=1000, free_hbm_gib=60)
    return in_process(lambda: simulate(spec), runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    compile_package()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "azure_10k.csv"
        azure_trace(trace)
        cases: dict[str, Callable[[], dict]] = {
            "help_process": lambda: wrapped(["--help"], max(args.runs, 5)),
            "serving_500_in_process": lambda: serving_500(args.runs),
            "bench_500_process": lambda: wrapped(BENCH_500, args.runs),
            "single_131k_in_process": lambda: single_131k(args.runs),
            "single_131k_run_process": lambda: wrapped(RUN_131K, args.runs),
            "bench_10k_process": lambda: wrapped(BENCH_10K, 1),
            "trace_10k_process": lambda: wrapped(["bench", "--gpu", "h200", "--tp", "8", "--workload-trace",
                                                  str(trace), "--json"], 1),
            "sweep_16x500_process": lambda: wrapped(SWEEP, 1),
        }
        for name, case in cases.items():
            if args.only and name not in args.only:
                continue
            r = case()
            stdout = r.pop("_stdout", "")
            extra = {}
            if stdout.lstrip().startswith("{") and name.startswith(("bench", "trace")):
                j = json.loads(stdout)
                extra = {"num_prompts": j["num_prompts"], "completed": j["completed"]}
            if name.startswith("sweep"):
                extra = {"points": len(json.loads(stdout)["points"])}
            print(json.dumps({"bench": name, **r, **extra, "cpus": os.cpu_count(),
                              "load_avg_1m": round(os.getloadavg()[0], 2)}), flush=True)


if __name__ == "__main__":
    main()
