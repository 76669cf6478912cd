"""Routing: the distinct experts a step reads and the busiest GPU's load under expert parallelism."""

from __future__ import annotations

import json

import numpy as np
import pytest

from layerscope.hardware.cost import expected_distinct_experts
from layerscope.hardware.routing import DEFAULT_ROUTING, RoutingError
from layerscope.runtime import routing
from layerscope.runtime.engine import simulate
from layerscope.runtime.routing import ExpertTraffic, expected_max, load_counts, parse_routing
from layerscope.scenario import ScenarioSpec

E, K, L = 128, 8, 94


def traffic(spec: str, ep: int = 1, seed: int = 0) -> ExpertTraffic:
    return ExpertTraffic(parse_routing(spec), E, K, L, ep, seed)


def test_uniform_reproduces_the_closed_form_exactly():
    t = traffic("uniform")
    for n in (1, 7, 64, 4096):
        assert t.distinct(n) == expected_distinct_experts(n, E, K)
        assert t.load(n).rows == n * K


def test_power_law_reads_fewer_distinct_experts_than_uniform():
    skewed, uniform = traffic("power_law:1.2"), traffic("uniform")
    for n in (16, 32, 64):
        assert skewed.distinct(n) < 0.9 * uniform.distinct(n)
    assert traffic("power_law:0.7").distinct(64) > skewed.distinct(64)  # milder skew, more experts
    assert skewed.distinct(8192) > 0.95 * E  # a big prefill chunk still reads (nearly) every expert


def test_busiest_rank_carries_more_than_its_share_under_power_law():
    n, ep = 16384, 8
    mean = n * K / ep
    uniform, skewed = traffic("uniform", ep).load(n), traffic("power_law:1.2", ep).load(n)
    assert mean < uniform.rows < 1.02 * mean  # sampling noise only: 16k rows a rank
    assert skewed.rows > 1.3 * mean  # hot experts pile onto one rank
    assert traffic("balanced", ep).load(n).rows == mean


def test_busiest_rank_at_one_token_is_above_the_mean():
    # 8 picks over 8 ranks: on average 1 a rank, but the busiest holds 2-3 (the time is set by it)
    load = traffic("uniform", 8).load(1)
    assert 1.8 < load.rows < 3.2
    assert load.distinct == pytest.approx(load.rows, rel=0.05)


def test_expected_max_of_identical_normals_matches_order_statistics():
    # E[max of 8 standard normals] = 1.4236; shifted far from 0 so the x >= 0 integral is exact
    mean, var = np.full((1, 8), 100.0), np.full((1, 8), 1.0)
    assert expected_max(mean, var) == pytest.approx(101.4236, abs=0.01)


def test_power_law_is_deterministic_per_seed():
    assert traffic("power_law:1.2", 8, seed=3).load(512) == traffic("power_law:1.2", 8, seed=3).load(512)
    assert traffic("power_law:1.2", 8, seed=3).load(512) != traffic("power_law:1.2", 8, seed=4).load(512)


def test_default_matches_the_measured_qwen3_traffic():
    # gpu-container handbook (Qwen3-30B-A3B, ~1k tokens): 51% of experts hold 90% of a layer's mass, concentration
    # 1 - H / ln E = 0.111; the default power law at 1k tokens lands near both
    p = traffic(DEFAULT_ROUTING).popularity(1000)
    s = np.sort(p, axis=1)[:, ::-1]
    hot = ((np.cumsum(s, axis=1) < 0.9).sum(axis=1) + 1) / E
    concentration = 1 + (p * np.log(p)).sum(axis=1) / np.log(E)
    assert 0.42 < np.median(hot) < 0.58
    assert 0.07 < np.median(concentration) < 0.15


def test_counts_file_sglang_and_vllm_formats(tmp_path):
    counts = np.ones((3, E))
    counts[:, :16] = 10  # rank 0's 16 experts are hot in every layer (vLLM's linear placement: 16 a rank)
    (tmp_path / "sgl.json").write_text(json.dumps({"logical_count": [counts.tolist()]}))  # [steps][layers][experts]
    (tmp_path / "eplb.json").write_text(json.dumps({"global_expert_load_window": counts.tolist()}))
    for name in ("sgl.json", "eplb.json"):
        c = load_counts(name, tmp_path)
        assert c.shape == (3, E)
        r = parse_routing(f"file:{name}", tmp_path)
        t = ExpertTraffic(r, E, K, L, ep=8)
        assert t.load(4096).rows > 3 * 4096 * K / 8  # 59% of the picks, on one of 8 ranks
        assert t.distinct(4) < expected_distinct_experts(4, E, K)


def test_counts_file_refusals(tmp_path):
    (tmp_path / "bad.json").write_text("{\"other\": 1}")
    (tmp_path / "neg.json").write_text(json.dumps({"logical_count": [[-1, 2]]}))
    with pytest.raises(RoutingError, match="logical_count"):
        load_counts("bad.json", tmp_path)
    with pytest.raises(RoutingError, match="non-negative"):
        load_counts("neg.json", tmp_path)
    with pytest.raises(RoutingError, match="cannot read"):
        load_counts("missing.json", tmp_path)
    with pytest.raises(RoutingError, match="choose uniform"):
        parse_routing("file:../../etc/passwd.json")
    with pytest.raises(RoutingError, match="ALPHA"):
        parse_routing("power_law:1")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RoutingError, match="nested too deeply"):
        load_counts("deep.json", tmp_path)
    (tmp_path / "small.json").write_text(json.dumps({"logical_count": [[1, 2, 3]]}))
    with pytest.raises(RoutingError, match="3 experts; the model has 128"):
        ExpertTraffic(parse_routing("file:small.json", tmp_path), E, K, L)


def test_scenario_field_validates_and_drives_the_engine():
    with pytest.raises(ValueError, match="choose uniform, balanced, power_law:ALPHA or file:NAME.json"):
        ScenarioSpec(workload={"routing": "zipf"})
    with pytest.raises(ValueError, match="ALPHA must be in"):
        ScenarioSpec(workload={"routing": "power_law:9"})
    assert ScenarioSpec(workload={"routing": "file:measured.json"}).workload.routing == "file:measured.json"
    base = {"num_requests": 8, "input_len": 256, "output_len": 16, "max_concurrency": 8}
    runs = {r: simulate(ScenarioSpec(name="r", gpu="h200", deployment={"tp": 8, "ep": 8},
                                     workload=base | {"routing": r})).summary for r in ("uniform", "balanced")}
    # a decode step of 8 sequences: 64 picks, 8 a rank when balanced; uniform's busiest rank reads ~11 experts
    assert runs["balanced"]["median_tpot_ms"] < runs["uniform"]["median_tpot_ms"]


def test_busiest_rank_from_16_layer_samples_is_near_all_94(monkeypatch: pytest.MonkeyPatch) -> None:
    sampled = [traffic("power_law:0.7", 8).load(n).rows for n in (8, 512, 4096)]
    monkeypatch.setattr(routing, "EP_LAYER_SAMPLES", L)
    every = [traffic("power_law:0.7", 8).load(n).rows for n in (8, 512, 4096)]
    assert sampled == pytest.approx(every, rel=0.05)


def test_a_decode_step_prices_the_experts_its_router_reads():
    """The serving runtime hands the measured MoE price its router's distinct experts: a decode step of 10 on one
    H100 (Qwen3-30B-A3B, the graph of 16) under the default routing reads ~63 experts, not the ~80 of the table's
    power-law row, and pays the measured price of an expert less for each."""
    import dataclasses

    from layerscope.hardware import tables
    from layerscope.hardware.cost import CostModel
    from layerscope.hardware.gpus import gpu
    from layerscope.hardware.kernel import MoeOp, OpPart
    from layerscope.runtime.sharded import deployed

    spec = ScenarioSpec(name="v", model="qwen3-30b-a3b", gpu="h100-sxm", deployment={"tp": 1})
    plan, model = deployed(spec)
    parts = [k for k in plan.step_kernels(model, [(1, 2048)] * 10)
             if isinstance(k.op, OpPart) and isinstance(k.op.op, MoeOp)]
    op = parts[0].op.op
    router = ExpertTraffic(parse_routing(DEFAULT_ROUTING), E, K, model.num_hidden_layers)
    assert op.tokens == 16 and op.distinct == pytest.approx(router.distinct(16))
    assert 55 < op.distinct < 70
    cost = CostModel(gpu("h100-sxm"))
    priced = sum(cost.cost(k).time_us for k in parts)  # the parts share the op's measured time
    moved = tables.price("h100-sxm", op)
    row = tables.price("h100-sxm", dataclasses.replace(op, distinct=0.0))
    assert moved and row and priced == pytest.approx(moved.us, rel=1e-6)
    table_d = moved.parts["table_distinct_experts"]
    assert table_d > op.distinct + 10
    assert moved.us == pytest.approx(row.us - moved.parts["per_expert_us"] * (table_d - op.distinct))


def test_the_sampled_layers_are_the_whole_draws_first_rows_bit_for_bit(tmp_path) -> None:
    counts = np.random.default_rng(1).integers(0, 50, (20, E)).astype(float)
    (tmp_path / "c.json").write_text(json.dumps({"logical_count": counts.tolist()}))
    for r in (parse_routing("power_law:0.7"), parse_routing("power_law:1.2"), parse_routing("uniform"),
              parse_routing("file:c.json", tmp_path)):
        t = ExpertTraffic(r, E, K, L, ep=8, seed=5)
        for n in (1, 8, 16, 17, 100, 512, 4096):
            whole = t.popularity(n)[:routing.EP_LAYER_SAMPLES]
            assert t.sampled(n).tobytes() == whole.tobytes() and t.sampled(n).shape == whole.shape
            assert not t.sampled(n).flags.writeable  # shared by the callers: read only
