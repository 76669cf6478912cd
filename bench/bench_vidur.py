"""LayerScope against Vidur (PyPI vidur 0.0.26): CPU seconds per simulated request, the same requests for both.

Vidur is never a project dependency: this script makes its own venv under /tmp (`pip install vidur==0.0.26` from
PyPI), and, since Vidur downloads its kernel profiles from HuggingFace (unreachable here), writes the profile
tables it trains on itself: mlp.csv.xz and attention.csv.xz for Llama-2-7B on one H100 (a roofline of each op's
FLOPs and bytes at 989 TFLOP/s bf16 and 3.35 TB/s, H100 SXM datasheet figures, plus 5 us a launch), and the
network tables (unused at tp 1). Vidur fits its linear-regression predictors on them once (cached under /tmp);
the timed part is Simulator.run() alone (its output files switched off), against LayerScope's simulate().

Both simulate the same requests: the lengths of LayerScope's `vllm bench serve --dataset-name random` workload
(--requests, input and output ~500 tokens, range_ratio 1, seed 0), all arriving at time 0, at most 100 running
(Vidur: sarathi scheduler, batch_size_cap 100, chunk 4096; LayerScope: max_num_seqs 100, max_num_batched_tokens
4096). LayerScope runs its own model (qwen3-235b-a22b on 8 x H200, tp 8) and, for a dense model like Vidur's, the
article's dense layer (one H200). Medians of --runs, paired: the two simulators alternate.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_vidur.py [--requests 500] [--runs 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import lzma
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORK = Path("/tmp/layerscope-vidur")
VENV = WORK / "venv"
VIDUR = "vidur==0.0.26"
MODEL = "meta-llama/Llama-2-7b-hf"
H, HEADS, KV_HEADS, INTER, VOCAB = 4096, 32, 32, 11008, 32768  # Llama-2-7B as Vidur's model config has it
PEAK_FLOPS, HBM_BW, LAUNCH_S = 989e12, 3.35e12, 5e-6  # H100 SXM bf16 dense, HBM3; a kernel launch (assumed)
MAX_TOKENS = 4096  # Llama-2-7B's max_model_len: the predictors' grid stops there

DRIVER = r'''
import json, sys, time
import vidur.execution_time_predictor.sklearn_execution_time_predictor as skl
from vidur.config import SimulationConfig
from vidur.simulator import Simulator
from vidur.utils.random import set_seeds

profiles = sys.argv[1]
def local(repo_id, repo_type=None, cache_dir=None, **kw):  # the profiles written by bench_vidur.py, not HF's
    return profiles + ("/network" if "dgx" in repo_id else "/compute")
skl.snapshot_download = local
skl.SklearnExecutionTimePredictor._load_predictions_from_hf = lambda self: (_ for _ in ()).throw(OSError("offline"))
sys.argv = ["vidur"] + sys.argv[2:]
config = SimulationConfig.create_from_cli_args()
set_seeds(config.seed)
t0 = time.perf_counter()
sim = Simulator(config)  # builds the predictor: trained once, then read from its cache
setup = time.perf_counter() - t0
Simulator._write_output = lambda self: None  # no plots, CSVs or traces: the loop alone is timed
c, t = time.process_time(), time.perf_counter()
sim.run()
print(json.dumps({"cpu_s": time.process_time() - c, "wall_s": time.perf_counter() - t, "setup_s": setup}))
'''


def ensure_venv() -> Path:
    py = VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", VIDUR], check=True)
    return py


def _xz_csv(path: Path, cols: list[str], rows: list[list]) -> None:
    text = ",".join(cols) + "\n" + "\n".join(",".join(str(v) for v in r) for r in rows) + "\n"
    path.write_bytes(lzma.compress(text.encode()))


def _ms(flops: float, nbytes: float) -> float:
    return round(1e3 * (max(flops / PEAK_FLOPS, nbytes / HBM_BW) + LAUNCH_S), 6)


def write_profiles(root: Path) -> None:
    """The tables Vidur's SklearnExecutionTimePredictor reads, for Llama-2-7B at tp 1 on one H100 (roofline)."""
    compute, network = root / "compute", root / "network"
    compute.mkdir(parents=True, exist_ok=True)
    network.mkdir(parents=True, exist_ok=True)
    (compute / "config.json").write_text(json.dumps({"model": MODEL, "device_sku": "h100"}))
    (network / "config.json").write_text(json.dumps({"sku": "h100_dgx"}))
    kv = H // HEADS * KV_HEADS
    ops = {  # op -> (flops, bytes) per token count t, bf16 weights and activations
        "attn_pre_proj": lambda t: (2 * t * H * (H + 2 * kv), 2 * H * (H + 2 * kv) + 2 * t * (2 * H + 2 * kv)),
        "attn_post_proj": lambda t: (2 * t * H * H, 2 * H * H + 4 * t * H),
        "mlp_up_proj": lambda t: (4 * t * H * INTER, 4 * H * INTER + 2 * t * (H + 2 * INTER)),
        "mlp_down_proj": lambda t: (2 * t * INTER * H, 2 * INTER * H + 2 * t * (INTER + H)),
        "mlp_act": lambda t: (5 * t * INTER, 6 * t * INTER),
        "input_layernorm": lambda t: (4 * t * H, 4 * t * H),
        "post_attention_layernorm": lambda t: (4 * t * H, 4 * t * H),
        "attn_rope": lambda t: (6 * t * (H + kv), 4 * t * (H + kv)),
        "add": lambda t: (t * H, 6 * t * H),
    }
    tokens = sorted({*range(1, 129), *range(128, MAX_TOKENS + 1, 32)})
    cols = ["n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp", "vocab_size",
            "num_tensor_parallel_workers", "num_tokens", *(f"time_stats.{op}.median" for op in ops)]
    rows = [[HEADS, KV_HEADS, H, INTER, True, VOCAB, 1, t, *(_ms(*f(t)) for f in ops.values())] for t in tokens]
    _xz_csv(compute / "mlp.csv.xz", cols, rows)
    cols = ["n_embd", "n_q_head", "n_kv_head", "block_size", "num_tensor_parallel_workers", "prefill_chunk_size",
            "batch_size", "kv_cache_size", "time_stats.attn_prefill.median", "time_stats.attn_decode.median",
            "time_stats.attn_kv_cache_save.median"]
    rows = []
    for kv_len, chunk in itertools.product(range(0, MAX_TOKENS + 1, 256), range(32, MAX_TOKENS + 1, 224)):
        flops = 4 * chunk * (kv_len + chunk / 2) * H  # causal: QK^T and PV over the context and half the chunk
        rows.append([H, HEADS, KV_HEADS, 16, 1, chunk, 1, kv_len, _ms(flops, 4 * (kv_len + chunk) * kv), 0.0,
                     _ms(0, 4 * chunk * kv)])
    for batch, kv_len in itertools.product([1, 2, 4, 8, 16, 32, 48, 64, 96, 128], range(0, MAX_TOKENS + 1, 256)):
        rows.append([H, HEADS, KV_HEADS, 16, 1, 0, batch, kv_len, 0.0,
                     _ms(4 * batch * kv_len * H, 4 * batch * (kv_len + 1) * kv), _ms(0, 4 * batch * kv)])
    _xz_csv(compute / "attention.csv.xz", cols, rows)
    cols = ["num_workers", "devices_per_node", "collective", "size", "time_stats.all_reduce.median",
            "time_stats.send_recv.median"]
    sizes = [2 ** k for k in range(10, 28)]
    rows = [[n, n, "all_reduce", s, round(0.01 + s / 200e9 * 1e3, 6), 0.0] for n in (1, 2, 4, 8) for s in sizes]
    _xz_csv(network / "all_reduce.csv.xz", cols, rows)
    rows = [[2, d, "send_recv", s, 0.0, round(0.01 + s / 50e9 * 1e3, 6)] for d in (1, 2) for s in sizes]
    _xz_csv(network / "send_recv.csv.xz", cols, rows)


def lengths(n: int) -> list[tuple[int, int]]:
    from layerscope.runtime.workload import make_requests
    from layerscope.scenario import WorkloadSpec

    w = WorkloadSpec(num_requests=n, input_len=500, output_len=500, range_ratio=1.0, seed=0)
    return [(r.input_len, r.output_len) for r in make_requests(w, VOCAB)]


def vidur_args(trace: Path, profiles: Path) -> list[str]:
    p = "random_forrest_execution_time_predictor_config"  # 0.0.26's linear_regression one cannot be made (it
    # leaves _get_kv_parallel_communication_time abstract): its random forest, with a one-point grid search
    return [
        str(profiles),
        "--replica_config_model_name", MODEL, "--replica_config_device", "h100",
        "--replica_config_network_device", "h100_dgx", "--replica_config_tensor_parallel_size", "1",
        "--replica_config_num_pipeline_stages", "1", "--cluster_config_num_replicas", "1",
        "--replica_scheduler_config_type", "sarathi", "--sarathi_scheduler_config_batch_size_cap", "100",
        "--sarathi_scheduler_config_chunk_size", str(MAX_TOKENS),
        "--request_generator_config_type", "trace_replay", "--trace_request_generator_config_trace_file", str(trace),
        "--trace_request_generator_config_date", "2023-08-21", "--trace_request_generator_config_max_tokens",
        str(MAX_TOKENS), "--trace_request_generator_config_prefill_scale_factor", "1",
        "--trace_request_generator_config_decode_scale_factor", "1",
        "--trace_request_generator_config_time_scale_factor", "1",
        "--execution_time_predictor_config_type", "random_forrest",
        f"--{p}_num_estimators", "16", f"--{p}_max_depth", "16", f"--{p}_min_samples_split", "2",
        f"--{p}_cache_dir", str(WORK / "cache"), f"--{p}_prediction_max_tokens_per_request", str(MAX_TOKENS),
        f"--{p}_prediction_max_batch_size", "128", f"--{p}_prediction_max_prefill_chunk_size", "4096",
        f"--{p}_k_fold_cv_splits", "3", f"--{p}_num_training_job_threads", "1",
        "--no-metrics_config_store_plots", "--no-metrics_config_enable_chrome_trace",
        "--no-metrics_config_write_json_trace",
        "--metrics_config_output_dir", str(WORK / "out"), "--log_level", "warning",
    ]


def run_vidur(py: Path, args: list[str]) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    r = subprocess.run([str(py), "-c", DRIVER, *args], cwd=WORK, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"vidur failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def layerscope_cpu(n: int, model: str) -> float:
    from layerscope.runtime.engine import simulate
    from layerscope.scenario import ScenarioSpec

    spec = ScenarioSpec.model_validate({
        "name": "vs-vidur", "model": model, "runtime": "vllm", "gpu": "h200",
        **({"deployment": {"tp": 8}} if model == "qwen3-235b-a22b" else {"free_hbm_gib": 60}),
        "scheduler": {"max_num_seqs": 100, "max_num_batched_tokens": MAX_TOKENS},
        "workload": {"num_requests": n, "input_len": 500, "output_len": 500, "range_ratio": 1.0, "seed": 0},
    })
    try:
        c = time.process_time()
        simulate(spec, summary_only=True)
    except TypeError:  # code before the summary-only mode (the "before" figure): the full run
        c = time.process_time()
        simulate(spec)
    return time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    py = ensure_venv()
    write_profiles(WORK / "profiles")
    trace = WORK / "trace.csv"
    pairs = lengths(args.requests)
    trace.write_text("Date,Time,PromptTokenCount,CompletionTokenCount\n"
                     + "".join(f"2023-08-21,0,{i},{o}\n" for i, o in pairs))
    vargs = vidur_args(trace, WORK / "profiles")
    first = run_vidur(py, vargs)  # fits and caches the predictors; timed loops follow
    layerscope_cpu(20, "qwen3-235b-a22b")  # imports and cost-model caches
    vidur, moe, dense = [], [], []
    for _ in range(args.runs):
        vidur.append(run_vidur(py, vargs)["cpu_s"])
        moe.append(layerscope_cpu(args.requests, "qwen3-235b-a22b"))
        dense.append(layerscope_cpu(args.requests, "article"))
    v, m, d = (statistics.median(x) for x in (vidur, moe, dense))
    print(json.dumps({
        "bench": "vs_vidur", "requests": args.requests, "vidur": VIDUR, "vidur_model": f"{MODEL} tp1 h100 (sarathi)",
        "vidur_cpu_s_median": round(v, 3), "vidur_first_setup_s": round(first["setup_s"], 1),
        "layerscope_qwen3_235b_tp8_cpu_s_median": round(m, 3), "layerscope_dense_article_cpu_s_median": round(d, 3),
        "ratio_qwen3_235b": round(m / v, 3), "ratio_dense": round(d / v, 3),
        "us_per_request": {"vidur": round(1e6 * v / args.requests), "layerscope_qwen3": round(1e6 * m / args.requests),
                           "layerscope_dense": round(1e6 * d / args.requests)},
        "runs": args.runs, "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2),
    }))


if __name__ == "__main__":
    main()
