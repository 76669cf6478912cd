"""The calibrated roofline: bounds, quantization, L2, launches, MoE distinct experts, attention work."""

from __future__ import annotations

import numpy as np
import pytest

from layerscope.hardware import tables
from layerscope.hardware.cost import (
    DRAM_LATENCY_S,
    FITTED,
    CostModel,
    attention_flops,
    expected_distinct_experts,
    expected_distinct_experts_skewed,
    expected_row_tiles,
    plain_roofline,
    wave_quantization,
)
from layerscope.hardware.gpus import gpu
from layerscope.hardware.kernel import CostEnv, Kernel, OpPart
from layerscope.model.config import preset
from layerscope.runtime.runtimes import get_runtime
from layerscope.runtime.vllm_moe import MoePlacement, moe_kernels

H100 = gpu("h100-sxm")
QWEN = preset("qwen3-235b-a22b")


def _stream(nbytes: float, **kw: object) -> Kernel:
    return Kernel("copy", "x", "memory", 0.0, nbytes, **kw)  # type: ignore[arg-type]


def test_decode_is_memory_bound_and_prefill_gemms_compute_bound() -> None:
    cm = CostModel(H100)
    plan = get_runtime("vllm")
    decode = [cm.cost(k) for k in plan.decode_step(QWEN, 8192)]
    assert not [c for c in decode if c.bound == "compute"]
    weights = [c for c in decode if c.kernel.stage in ("qkv_proj", "o_proj", "experts") and c.time_us > 5]
    assert len(weights) >= 4 and all(c.bound == "memory" for c in weights)
    # one sequence's paged decode: its fixed cost per call (split + combine, DECODE_ATTENTION) outweighs 17 MB of KV
    attn = next(c for c in decode if c.kernel.name == "flash_fwd_splitkv_kernel")
    assert attn.bound == "latency" and attn.parts["memory_us"] > 5
    prefill = [cm.cost(k) for k in plan.prefill_chunk(QWEN, 4096, 0)]
    gemms = [c for c in prefill if c.kernel.stage in ("qkv_proj", "o_proj")]
    assert len(gemms) == 2 and all(c.bound == "compute" for c in gemms)
    assert all(0 < c.hbm_util <= 1 for c in prefill + decode)


def test_expected_distinct_experts() -> None:
    assert expected_distinct_experts(1, 128, 8) == pytest.approx(8.0)
    assert 127.9 < expected_distinct_experts(4096, 128, 8) <= 128
    values = [expected_distinct_experts(n, 128, 8) for n in (1, 2, 4, 16, 64, 256)]
    assert values == sorted(values)
    # popularity skew concentrates tokens on fewer experts; s = 0 is the balanced case
    assert expected_distinct_experts_skewed(16, 128, 8, s=1.0) < expected_distinct_experts(16, 128, 8)
    assert expected_distinct_experts_skewed(16, 128, 8, s=0.0) == pytest.approx(expected_distinct_experts(16, 128, 8))


def test_causal_attention_is_half_the_square() -> None:
    full = attention_flops(4096, 0, 64, 128, causal=False)
    causal = attention_flops(4096, 0, 64, 128, causal=True)
    assert causal / full == pytest.approx(0.5, rel=1e-3)
    # with cached context the cached block is full, only the new block is triangular
    assert attention_flops(4096, 4096, 64, 128) == pytest.approx(full + causal)


def test_memory_time_follows_bandwidth_and_contention() -> None:
    cm = CostModel(H100)
    small, big = cm.cost(_stream(1e8)), cm.cost(_stream(2e8))
    assert big.parts["memory_us"] == pytest.approx(2 * small.parts["memory_us"])
    stolen = cm.cost(_stream(1e8), CostEnv(hbm_bw_scale=0.5))
    assert stolen.parts["memory_us"] == pytest.approx(2 * small.parts["memory_us"])
    assert cm.cost(_stream(1e8), CostEnv(extra_bytes=1e8)).time_us > small.time_us
    assert gpu("b200") and CostModel(gpu("b200")).cost(_stream(1e8)).time_us < small.time_us


def test_few_loads_in_flight_bound_a_stream_by_the_dram_latency() -> None:
    """Little's law: a grid that keeps B bytes in flight streams at most B per DRAM latency, however much bandwidth
    there is; with enough in flight the bandwidth bounds it as before."""
    b200 = CostModel(gpu("b200"))
    free = b200.cost(_stream(25e6)).parts["memory_us"]
    assert b200.cost(_stream(25e6, inflight_bytes=1e9)).parts["memory_us"] == pytest.approx(free)
    starved = b200.cost(_stream(25e6, inflight_bytes=768e3)).parts["memory_us"]
    assert starved == pytest.approx(25e6 * DRAM_LATENCY_S["blackwell"] / 768e3 * 1e6)
    assert starved > 3 * free  # 96 CTAs x 8 KiB in flight: ~1.8 TB/s of the B200's 8 TB/s
    assert 300e-9 < DRAM_LATENCY_S["hopper"] < DRAM_LATENCY_S["blackwell"] < 500e-9  # pointer-chase figures
    plain = plain_roofline(gpu("b200")).cost(_stream(25e6, inflight_bytes=768e3)).parts["memory_us"]
    assert plain == pytest.approx(plain_roofline(gpu("b200")).cost(_stream(25e6)).parts["memory_us"])


def test_l2_residency_when_warm_and_fitting() -> None:
    cm = CostModel(H100)
    row = _stream(1e6, l2_bytes=1e6)
    warm, cold = cm.cost(row), cm.cost(row, CostEnv(l2_warm=False))
    assert warm.l2_hit == pytest.approx(1.0) and cold.l2_hit == 0.0
    assert warm.parts["memory_us"] < cold.parts["memory_us"]
    too_big = cm.cost(_stream(1e9, l2_bytes=1e9))  # does not fit in 50 MB: streams from HBM
    assert too_big.l2_hit < 0.1


def test_launch_overhead_fused_stages_and_fixed_costs() -> None:
    cm = CostModel(H100)
    tiny = cm.cost(_stream(1e3))
    assert tiny.bound == "latency" and tiny.time_us >= FITTED.launch_us
    assert cm.cost(_stream(1e3, own_launch=False)).parts["launch_us"] == 0.0
    fitted = CostModel(H100, measured=False)  # the analytic model as fitted: the launch cost alone, per launch
    assert fitted.cost(_stream(1e3, count=3)).parts["launch_us"] == pytest.approx(3 * FITTED.launch_us)
    fixed = cm.cost(_stream(0.0, fixed_us=1200.0, own_launch=False))
    assert fixed.time_us == pytest.approx(1200.0) and fixed.bound == "latency"


@pytest.mark.parametrize("name", ["a100-80g-sxm", "h100-sxm", "h200", "b200"])
def test_no_kernel_is_shorter_than_the_shortest_measured_one(name: str) -> None:
    g = gpu(name)
    rows = [us for key, _, us, _ in tables.read_rows(g.tables, "gemm") if key == ("bf16",)]
    floor = tables.graph_kernel_floor_us(g.tables)
    assert floor == min(rows) and 2.0 < floor < 3.5  # a trivial GEMM as a node of a replayed CUDA graph
    cm = CostModel(g)
    assert cm.cost(_stream(1e3)).time_us == pytest.approx(floor)  # a 1 KB copy lasts what a trivial GEMM does
    assert cm.cost(_stream(1e3, count=3)).time_us == pytest.approx(3 * floor)  # once per launch
    assert cm.cost(_stream(1e3, own_launch=False)).time_us < floor  # a fused stage launches nothing
    assert cm.cost(_stream(1e9)).parts["launch_us"] == pytest.approx(FITTED.launch_us)  # a long stream: no floor
    assert CostModel(g, measured=False).cost(_stream(1e3)).time_us < floor  # the fit's own figures keep theirs


def test_gemm_tile_and_wave_quantization() -> None:
    sms = H100.sms
    assert wave_quantization(sms, 4096, sms) == pytest.approx(1.0)
    assert wave_quantization(sms + 1, 4096, sms) > 1.0  # a nearly empty second wave...
    assert wave_quantization(sms + 1, 4096, sms) < 2.0  # ...that split-K partly fills
    assert wave_quantization(sms + 1, 64, sms) == pytest.approx(2 * sms / (sms + 1))  # K too shallow to split
    cm = CostModel(H100)

    def gemm(m: int) -> Kernel:
        return Kernel("g", "x", "gemm", 2.0 * m * 4096 * 4096, 0.0, gemm=(m, 4096, 4096))

    # M = 129 pads to two 128-row tiles: nearly the compute time of M = 256
    assert cm.compute_us(gemm(129)) == pytest.approx(cm.compute_us(gemm(256)), rel=0.01)
    # small-M regime: one token pays for a 16-row fragment, not a 128-row tile
    assert cm.compute_us(gemm(1)) == pytest.approx(cm.compute_us(gemm(16)), rel=0.01)
    assert cm.compute_us(gemm(1)) < cm.compute_us(gemm(128)) / 4


def test_fp8_gemm_is_faster_on_hopper_not_on_ampere() -> None:
    plan = get_runtime("vllm")

    def qkv_compute(g: str, dtype: str) -> float:
        k = next(k for k in plan.prefill_chunk(QWEN, 4096, 0, dtype) if k.stage == "qkv_proj" and k.kind == "gemm")
        return CostModel(gpu(g)).compute_us(k)

    assert qkv_compute("h100-sxm", "fp8") == pytest.approx(qkv_compute("h100-sxm", "bf16") / 2, rel=1e-3)
    assert qkv_compute("a100-80g-sxm", "fp8") == pytest.approx(qkv_compute("a100-80g-sxm", "bf16"))


def test_plain_roofline_is_never_slower() -> None:
    """Per kernel for the analytic model; per stage where measured tables price it (a measured op's time is shared
    among its kernels by their analytic times, so one share may undercut its own roofline, never the stage)."""
    plain, fitted, measured = plain_roofline(H100), CostModel(H100, measured=False), CostModel(H100)
    for ks in (get_runtime("vllm").prefill_chunk(QWEN, 1024, 0), get_runtime("vllm").decode_step(QWEN, 4096)):
        stages: dict[str, list[float]] = {}
        for k in ks:
            assert plain.cost(k).time_us <= fitted.cost(k).time_us
            both = stages.setdefault(k.stage, [0.0, 0.0])
            both[0] += plain.cost(k).time_us
            both[1] += measured.cost(k).time_us
        for stage, (p, m) in stages.items():
            assert p <= m, stage


# -- attention efficiency (published FlashAttention figures, not the GEMM efficiency) ----------------------------
def _attn_eff(arch: str, q: int, ctx: int = 0, head_dim: int = 128, causal: bool = False) -> float:
    from layerscope.hardware.cost import attention_efficiency
    from layerscope.hardware.kernel import AttentionShape

    return attention_efficiency(arch, AttentionShape(q, ctx, head_dim, causal))


@pytest.mark.parametrize(
    ("arch", "share"),
    [("ampere", 0.73), ("hopper", 648 / 989.4), ("blackwell", 0.71)],  # FA2 on A100, FA3 on H100, FA4 on B200
)
def test_attention_reaches_the_published_share_of_peak(arch: str, share: float) -> None:
    assert _attn_eff(arch, 16384) == pytest.approx(share, rel=1e-6)
    assert _attn_eff(arch, 16384) < FITTED.gemm_eff  # attention no longer rides on the GEMM efficiency


def test_hopper_attention_follows_fa3_at_each_published_length() -> None:
    # FA3 paper Fig. 5, causal head_dim 128: 292, 423, 521, 579, 602, 616 TFLOP/s at 512 .. 16k
    for seqlen, tflops in zip((512, 1024, 2048, 4096, 8192, 16384), (292, 423, 521, 579, 602, 616), strict=True):
        assert _attn_eff("hopper", seqlen, causal=True) * 989.4 == pytest.approx(tflops, rel=1e-3)


@pytest.mark.parametrize("arch", ["ampere", "hopper", "blackwell"])
def test_causal_is_less_efficient_than_non_causal_at_equal_work(arch: str) -> None:
    # causal 8192 does 8192^2 / 2 query-key products, non-causal 5793 about as many
    assert attention_flops(8192, 0, 1, 1, causal=True) == pytest.approx(attention_flops(5793, 0, 1, 1, causal=False),
                                                                         rel=1e-3)
    assert _attn_eff(arch, 8192, causal=True) < _attn_eff(arch, 5793, causal=False)


@pytest.mark.parametrize("arch", ["ampere", "hopper", "blackwell"])
def test_short_sequences_pay_a_penalty(arch: str) -> None:
    effs = [_attn_eff(arch, n, causal=True) for n in (64, 256, 512, 2048, 16384, 65536)]
    assert effs == sorted(effs) and effs[0] < 0.5 * effs[-1]
    assert effs[-1] == effs[-2]  # flat past the longest published length


def test_head_dim_and_cached_prefix_change_the_efficiency() -> None:
    # FA3: head_dim 64 reaches less than 128 (497 vs 648 TFLOP/s non-causal at 16k)
    assert _attn_eff("hopper", 16384, head_dim=64) == pytest.approx(497 / 989.4, rel=1e-6)
    # a chunk over a long cached prefix is mostly an unmasked block: closer to the non-causal figure
    fresh, late = _attn_eff("hopper", 4096, causal=True), _attn_eff("hopper", 4096, ctx=126976, causal=True)
    assert fresh < late <= _attn_eff("hopper", 16384)


def test_attention_kernels_are_priced_with_the_attention_efficiency() -> None:
    cm = CostModel(H100)
    attn = next(k for k in get_runtime("vllm").prefill_chunk(QWEN, 4096, 28672) if k.kind == "attention")
    assert attn.attn is not None and attn.attn.causal and attn.attn.head_dim == 128
    achieved = attn.flops / cm.compute_us(attn) / 1e6  # TFLOP/s
    assert achieved == pytest.approx(_attn_eff("hopper", 4096, 28672, causal=True) * 989.4, rel=1e-6)
    assert 550 < achieved < 700  # FA3 territory, not the 0.81 x 989 = 800 TFLOP/s of a large GEMM
    a100 = CostModel(gpu("a100-80g-sxm"))
    assert cm.cost(attn).time_us < a100.cost(attn).time_us


# -- measured where measured ------------------------------------------------------------------------------------------
def test_a_kernel_a_table_covers_is_priced_from_it_and_says_so() -> None:
    from dataclasses import replace

    from layerscope.hardware import tables
    from layerscope.hardware.kernel import GemmOp

    h200 = gpu("h200")
    qkv = next(k for k in get_runtime("vllm").prefill_chunk(QWEN, 1024, 0) if k.stage == "qkv_proj")
    assert qkv.op == GemmOp(1024, 9216, 4096, "bf16")
    c = CostModel(h200).cost(qkv)
    hit = tables.price("h200", qkv.op)
    assert c.source == "measured" and hit is not None and c.time_us == pytest.approx(hit.us)
    assert c.table is not None and (c.table.system, c.table.backend, c.table.version) == ("h200_sxm", "vllm", "0.24.0")
    assert c.table.file.endswith("gemm/vllm/0.24.0/gemm_perf.parquet") and c.parts["analytic_us"] > 0
    analytic = CostModel(h200, measured=False).cost(qkv)
    assert analytic.source == "analytic" and analytic.table is None
    # the record holds its tables, whatever its name; one without tables is refused (tests/hardware/test_gpus.py)
    other = CostModel(replace(h200, name="h200-nvl")).cost(qkv)
    assert other.source == "measured" and other.time_us == c.time_us
    # a shape past the measured grid: analytic
    huge = next(k for k in get_runtime("vllm").prefill_chunk(QWEN, 40_000, 0) if k.stage == "qkv_proj")
    assert CostModel(h200).cost(huge).source == "analytic"


def test_the_kernels_an_op_times_together_share_its_measured_time() -> None:
    from layerscope.hardware import tables
    from layerscope.hardware.kernel import OpPart

    h200 = gpu("h200")
    ks = get_runtime("vllm").prefill_chunk(QWEN, 2048, 0)
    experts = [k for k in ks if isinstance(k.op, OpPart)]
    assert {k.stage for k in experts} == {"experts"} and len(experts) == 5  # align, gate_up, act, down, sum
    costs = [CostModel(h200).cost(k) for k in experts]
    assert all(c.source == "measured" for c in costs)
    hit = tables.price("h200", experts[0].op.op)
    assert hit is not None and sum(c.time_us for c in costs) == pytest.approx(hit.us)
    assert sum(c.parts["share"] for c in costs) == pytest.approx(1.0)
    # the router is not in the MoE rows: its GEMM is priced by itself
    router = next(k for k in ks if k.stage == "router" and k.gemm is not None)
    assert CostModel(h200).cost(router).source == "measured" and not isinstance(router.op, OpPart)


def test_grouped_gemm_pays_the_expected_tiles_over_its_experts_rows() -> None:
    # uniform routing as the router does it: each of 2048 tokens picks 8 distinct experts of 128 (mean 128 rows
    # an expert, exactly one tile): the experts' own tile counts, not the mean's, are what the kernel pays
    rng = np.random.default_rng(0)
    t, e, k = 2048, 128, 8
    picks = np.argsort(rng.random((t, e)), axis=1)[:, :k]
    rows = np.bincount(picks.ravel(), minlength=e)
    rows = rows[rows > 0]
    sampled = float(np.mean(np.ceil(rows / 128)))
    assert expected_row_tiles(round(rows.mean()), 128) == pytest.approx(sampled, abs=0.1)
    assert 1.3 < expected_row_tiles(128, 128) < 1.7  # the mean's ceil(128 / 128) = 1 under-prices it
    assert expected_row_tiles(133, 128) < 1.8  # and ceil(133 / 128) = 2 over-prices a mean just past it
    assert expected_row_tiles(1, 16) == 1.0  # one row is one tile
    assert expected_row_tiles(4096, 128) == pytest.approx(32.5, abs=0.2)  # far from a boundary: mean / tile + 1/2

    cm = CostModel(H100)

    def experts(m: int, groups: int) -> Kernel:
        return Kernel("fused_moe_kernel", "experts", "moe", 2.0 * m * groups * 3072 * 4096, 0.0,
                      gemm=(m, 3072, 4096), groups=groups)

    # a grouped GEMM pays the spread of its experts' rows; one problem alone pays its own ceil
    per_row_grouped = cm.compute_us(experts(128, 128)) / cm.compute_us(experts(120, 128))
    assert per_row_grouped > 1.0  # 128 rows an expert spill into second tiles more often than 120
    assert cm.compute_us(experts(128, 1)) == pytest.approx(cm.compute_us(experts(120, 1)), rel=0.01)  # 1 tile each


def test_an_op_parts_price_does_not_depend_on_its_siblings_priced_before() -> None:
    """The fused MoE's kernels (OpParts of one measured op) price as a fresh model prices each alone, whichever
    sibling comes first and whatever the model's memo of their shares holds, at many token counts, in any env."""
    g = gpu("h200")
    for tokens in (1, 7, 64, 300, 2048):
        ks = [k for k in moe_kernels(tokens, 4096, 1536, 128, 8, "bf16", MoePlacement(8, 1, "uniform"))
              if isinstance(k.op, OpPart)]
        assert len(ks) > 1
        model = CostModel(g)
        for order in (ks, ks[::-1]):
            for k in order:
                alone = CostModel(g)
                alone._shares(k.op.kernels)  # type: ignore[union-attr]  # the siblings' analytic prices, first
                assert model.cost(k) == alone.cost(k) == CostModel(g).cost(k)
                env = CostEnv(hbm_bw_scale=0.5, l2_warm=False)
                assert model.cost(k, env) == CostModel(g).cost(k, env)
        assert model.analytic_cost(ks[0]) == model._analytic_plain(ks[0])


def _plans_kernels() -> list[Kernel]:
    """Every kind of kernel a serving run prices: vLLM's plans on 8 x H200 tp 8 and eager (measured GEMMs, paged
    decode attention, flash prefill, the fused MoE's parts, all-reduces, launch floors), the article's, the MoE
    alone at many token counts."""
    from layerscope.deployment import DeploymentSpec, shard
    from layerscope.runtime.sharded import ShardedRuntime

    ks: list[Kernel] = []
    for dep in (DeploymentSpec(tp=8), DeploymentSpec(tp=8, cuda_graphs=False), DeploymentSpec(tp=1)):
        plan, local = ShardedRuntime(get_runtime("vllm"), dep, gpu("h200"), QWEN), shard(QWEN, dep)
        for batch in ([(1, 0)], [(7, 100)], [(1, 4096)] * 9, [(300, 0), (1, 800)], [(2048, 1024)], [(1, 31)] * 64):
            ks += plan.step_kernels(local, batch) + plan.outside_layer_kernels(local, batch)
    for tokens, context in ((1, 0), (64, 512), (1024, 0), (1, 8191)):
        ks += get_runtime("article").prefill_chunk(QWEN, tokens, context)
        ks += get_runtime("vllm").decode_step(QWEN, context + 1, tokens)
    for tokens in (1, 7, 64, 300, 2048):
        ks += moe_kernels(tokens, 4096, 1536, 128, 8, "bf16", MoePlacement(8, 1, "uniform"))
    return ks


def _old_analytic(cm: CostModel, k: Kernel, env: CostEnv) -> tuple[float, str, float, float, dict[str, float], float]:
    """The roofline price as composed before _analytic_terms inlined launch_us and floor_us (the public methods)."""
    compute = cm.compute_us(k)
    memory, hbm = cm.memory_us(k, env)
    busy = max(compute, memory) + cm.constants.overlap * min(compute, memory)
    launch = max(cm.launch_us(k), cm.floor_us(k) - busy)
    time_us = launch + busy + k.fixed_us + env.extra_us
    bound = "latency" if launch + k.fixed_us > busy else "compute" if compute >= memory else "memory"
    total = k.bytes + env.extra_bytes
    util = hbm / (time_us * 1e-6) / cm.gpu.hbm_bw if time_us > 0 else 0.0
    parts = {"compute_us": compute, "memory_us": memory, "launch_us": launch, "fixed_us": k.fixed_us,
             "extra_us": env.extra_us}
    return time_us, bound, min(1.0, max(0.0, util)), (total - hbm) / total if total > 0 else 0.0, parts, hbm


def test_the_inlined_roofline_gives_the_methods_prices_bit_for_bit() -> None:
    """_analytic_terms (launch and floor inlined, one pass) equals the price composed from compute_us, memory_us,
    launch_us and floor_us, float for float, on every kernel of many plans, GPUs, envs and models (measured or not,
    tiled or the plain roofline); a measured price's analytic parts are those terms."""
    ks = _plans_kernels()
    assert len(ks) > 300 and {k.kind for k in ks} >= {"gemm", "moe", "attention", "collective", "norm"}
    envs = (CostEnv(), CostEnv(hbm_bw_scale=0.5, l2_warm=False, extra_bytes=1e6, extra_us=3.0))
    for g in ("h200", "a100-80g-sxm", "h100-sxm", "b200"):
        for cm in (CostModel(gpu(g)), CostModel(gpu(g), measured=False), plain_roofline(gpu(g))):
            for k in ks:
                for env in envs:
                    old = _old_analytic(cm, k, env)
                    assert cm._analytic_terms(k, env) == old
                    c = cm.cost(k, env)
                    if c.source == "analytic":
                        assert (c.time_us, c.bound, c.hbm_util, c.l2_hit, c.parts) == old[:5]
                    else:
                        assert c.parts["analytic_us"] == old[0] and c.bound == old[1] and c.l2_hit == old[3]
