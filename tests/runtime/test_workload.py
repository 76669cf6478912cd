"""Workloads: `vllm bench serve --dataset-name random` semantics, and trace files with errors naming line and column."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from layerscope.paths import scenarios_dir
from layerscope.runtime.engine import simulate
from layerscope.runtime.workload import MAX_TRACE_BYTES, TraceError, load_trace, make_requests, parse_csv, parse_jsonl
from layerscope.scenario import ScenarioSpec, WorkloadSpec

VOCAB = 151_936


def test_random_lengths_follow_the_range_ratio_and_prefix() -> None:
    w = WorkloadSpec(num_requests=2000, input_len=500, output_len=100, range_ratio=0.5, shared_prefix_len=32)
    reqs = make_requests(w, VOCAB)
    inputs = np.array([r.input_len for r in reqs]) - 32
    outputs = np.array([r.output_len for r in reqs])
    assert (inputs.min(), inputs.max()) == (250, 750)
    assert (outputs.min(), outputs.max()) == (50, 150)
    assert abs(inputs.mean() - 500) < 10
    prefix = reqs[0].token_ids[:32]
    assert all(np.array_equal(r.token_ids[:32], prefix) for r in reqs)  # the shared prefix: identical ids
    assert not np.array_equal(reqs[0].token_ids[32:64], reqs[1].token_ids[32:64])
    assert all(len(r.token_ids) == r.input_len + r.output_len for r in reqs)


def test_range_ratio_one_keeps_lengths_at_least_one() -> None:
    reqs = make_requests(WorkloadSpec(num_requests=500, input_len=4, output_len=4, range_ratio=1.0), VOCAB)
    assert min(r.input_len for r in reqs) == 1 and min(r.output_len for r in reqs) == 1


def test_arrivals_all_at_once_or_poisson() -> None:
    assert {r.arrival_us for r in make_requests(WorkloadSpec(num_requests=5), VOCAB)} == {0.0}
    reqs = make_requests(WorkloadSpec(num_requests=4000, request_rate=10.0), VOCAB)
    t = np.array([r.arrival_us for r in reqs])
    assert t[0] == 0.0 and np.all(np.diff(t) >= 0)
    gaps = np.diff(t) / 1e6
    assert abs(gaps.mean() - 0.1) < 0.01 and abs(gaps.std() - 0.1) < 0.015  # exponential: std == mean


def test_sample_traces_read_alike() -> None:
    csv_rows = load_trace(scenarios_dir() / "traces" / "sample-azure.csv")
    jsonl_rows = load_trace(scenarios_dir() / "traces" / "sample-mooncake.jsonl")
    assert len(csv_rows) == len(jsonl_rows) == 40
    assert csv_rows[0].t_s == 0.0
    assert [(r.input_len, r.output_len) for r in csv_rows] == [(r.input_len, r.output_len) for r in jsonl_rows]
    assert [round(r.t_s, 3) for r in csv_rows] == pytest.approx([r.t_s for r in jsonl_rows], abs=1e-3)


def test_a_trace_drives_the_engine() -> None:
    trace = str(scenarios_dir() / "traces" / "sample-mooncake.jsonl")
    spec = ScenarioSpec.model_validate({"model": "qwen3-30b-a3b", "gpu": "h200", "free_hbm_gib": 20,
                                        "workload": {"trace": trace, "shared_prefix_len": 16}})
    r = simulate(spec)
    arrive = [e for e in r.events if e.kind == "request" and e.what == "arrive"]
    rows = load_trace(Path(trace))
    assert [e.input_len for e in arrive] == [row.input_len + 16 for row in rows]
    assert [e.t_us for e in arrive] == pytest.approx([row.t_s * 1e6 for row in rows])
    assert r.summary["completed"] == 40


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("TIME,ContextTokens,GeneratedTokens\n", "line 1: expected the header"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2026-01-05 09:00:00,12\n", "line 2: expected 3 columns"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n0,5,5\nsoon,5,5\n", "line 3, column 'TIMESTAMP'"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n0,5,5\n1,five,5\n", "line 3, column 'ContextTokens'"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n0,5,0\n", "line 2, column 'GeneratedTokens'"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2,5,5\n1,5,5\n", "line 3, column 'TIMESTAMP': time goes backwards"),
    ],
)
def test_csv_errors_name_line_and_column(text: str, needle: str) -> None:
    with pytest.raises(TraceError, match=needle):
        parse_csv(text, "t.csv")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"timestamp": 0, "input_length": 5, "output_length": 5}\n{oops\n', "line 2: not JSON"),
        ('[1, 2]\n', "line 1: expected an object"),
        ('{"timestamp": 0, "output_length": 5}\n', "line 1, column 'input_length': missing"),
        ('{"timestamp": -4, "input_length": 5, "output_length": 5}\n', "line 1, column 'timestamp'"),
        ('{"timestamp": 0, "input_length": 5.5, "output_length": 5}\n', "line 1, column 'input_length'"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 10000000}\n', "line 1, column 'output_length'"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2, 3]}\n',
         "line 1, column 'hash_ids': expected a list of at most 2 ids"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 5, "hash_ids": [-1]}\n',
         "line 1, column 'hash_ids': expected integers"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 5, "hash_ids": "7"}\n', "column 'hash_ids'"),
    ],
)
def test_jsonl_errors_name_line_and_column(text: str, needle: str) -> None:
    with pytest.raises(TraceError, match=needle):
        parse_jsonl(text, "t.jsonl")


def test_trace_files_are_bounded(tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    big.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "0,5,5\n" * (MAX_TRACE_BYTES // 6 + 1))
    with pytest.raises(TraceError, match="may be at most"):
        load_trace(big)
    with pytest.raises(TraceError, match="cannot read"):
        load_trace(tmp_path / "missing.csv")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(TraceError, match="no requests"):
        load_trace(empty)


def _mooncake(tmp_path: Path, rows: list[tuple[int, int, list[int]]]) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(f'{{"timestamp": {10 * i}, "input_length": {n}, "output_length": {o}, "hash_ids": {h}}}\n'
                            for i, (n, o, h) in enumerate(rows)))
    return path


def test_mooncake_hash_ids_give_shared_blocks_the_same_tokens(tmp_path: Path) -> None:
    # 512-token blocks: requests 0 and 1 share their first block, 1 and 2 nothing; the last block is cut short
    path = _mooncake(tmp_path, [(1100, 4, [7, 8, 9]), (700, 4, [7, 11]), (600, 4, [12, 13])])
    assert [r.hash_ids for r in load_trace(path)] == [(7, 8, 9), (7, 11), (12, 13)]
    a, b, c = make_requests(WorkloadSpec(trace=str(path)), VOCAB)
    assert np.array_equal(a.token_ids[:512], b.token_ids[:512])
    assert not np.array_equal(a.token_ids[512:700], b.token_ids[512:700])
    assert not np.array_equal(b.token_ids[:512], c.token_ids[:512])
    assert len(a.token_ids) == 1104 and a.input_len == 1100


def test_hash_ids_drive_prefix_reuse_in_the_engine(tmp_path: Path) -> None:
    path = _mooncake(tmp_path, [(1024, 8, [1, 2]), (1024, 8, [1, 2]), (1024, 8, [1, 3]), (1024, 8, [4, 5])])
    base = {"model": "qwen3-30b-a3b", "gpu": "h200", "free_hbm_gib": 20, "workload": {"trace": str(path)}}
    r = simulate(ScenarioSpec.model_validate(base))
    hits = {e.request_id: e.num_computed_tokens for e in r.events if e.kind == "request" and e.what == "scheduled"}
    assert hits == {0: 0, 1: 1008, 2: 512, 3: 0}  # 63 whole 16-token blocks of 1024 (one token left), one block, none
    plain = tmp_path / "plain.jsonl"  # the same rows without hash ids: every prompt its own tokens
    plain.write_text("".join(line.split(', "hash_ids"')[0] + "}\n" for line in path.read_text().splitlines()))
    base["workload"] = {"trace": str(plain)}
    r = simulate(ScenarioSpec.model_validate(base))
    assert all(e.num_computed_tokens == 0 for e in r.events if e.kind == "request" and e.what == "scheduled")


def test_num_prefixes_spreads_the_requests_evenly_over_distinct_prefixes() -> None:
    w = WorkloadSpec(num_requests=12, input_len=20, output_len=2, shared_prefix_len=8, num_prefixes=3)
    reqs = make_requests(w, 5000)
    heads = Counter(r.token_ids[:8].tobytes() for r in reqs)
    assert sorted(heads.values()) == [4, 4, 4]
    assert [r.token_ids[:8].tobytes() for r in reqs[:3]] != [reqs[0].token_ids[:8].tobytes()] * 3  # shuffled
    one = WorkloadSpec(num_requests=12, input_len=20, output_len=2, shared_prefix_len=8)
    first = make_requests(one, 5000)
    assert all(r.token_ids[:8].tobytes() == first[0].token_ids[:8].tobytes() for r in first)
    assert "num_prefixes" not in one.model_dump() and w.model_dump()["num_prefixes"] == 3
    with pytest.raises(ValidationError, match="num_prefixes=3 needs shared_prefix_len > 0"):
        WorkloadSpec(num_prefixes=3)
