"""The MoE layer as vLLM runs it on one GPU (runtime/vllm.py builds the rest of the layer): the router GEMM and top-k,
then the fused experts (align/sort, two fused_moe_kernel GEMMs, activation, sum), placed over expert- and tensor-
parallel GPUs, with the Triton tiles the engine runs when no tuned config exists."""

from __future__ import annotations

import math
from dataclasses import dataclass

from layerscope.hardware.cost import expected_distinct_experts, expected_row_tiles
from layerscope.hardware.kernel import Kernel, MoeOp
from layerscope.hardware.routing import busiest_rank_share
from layerscope.model.config import DTYPE_BYTES
from layerscope.runtime.plan import ACT_BYTES
from layerscope.runtime.routing import ExpertLoad
from layerscope.runtime.vllm_ops import act_and_mul, act_quant, linear, measured_together


@dataclass(frozen=True)
class MoePlacement:
    """How the experts of a (sharded) MoE layer sit on the GPUs: ep GPUs split the experts, moe_tp split each expert's
    intermediate size; `routing` how tokens choose experts (hardware/routing.py). A sharded model's num_experts and
    num_experts_per_tok are already divided by ep (runtime/deployment.py shard)."""

    ep: int = 1
    moe_tp: int = 1
    routing: str = "uniform"
    # the fused_moe_kernel's tiles: "tuned" (a config file for the GPU and shape; priced by the fit and the tables)
    # or "default" (none found: the engine runs Triton's get_default_config tiles, TRITON_DEFAULT_TILES)
    tiles: str = "tuned"


@dataclass(frozen=True)
class TritonTile:
    """One fused_moe_kernel config: the tile of output rows x columns and the K step each CTA loads per stage, and
    the software pipeline's stages (num_stages - 1 rounds of loads in flight while one is multiplied)."""

    block_m: int
    block_n: int
    block_k: int
    stages: int


# get_default_config when no tuned file exists (vLLM model_executor/layers/fused_moe/fused_moe.py and SGLang
# fused_moe_triton_config.py, both as of late 2025; vLLM PR #31448's B200 log prints the small one): unquantized
# weights, M <= E tokens -> 16x32 tiles, K step 64; more tokens -> 64x64, K step 32; block fp8 -> 64 x 128 x 128.
# num_stages 3: set by vLLM's default since PR #24700, Triton's own default where SGLang leaves it unset.
TRITON_DEFAULT_TILES = {
    ("bf16", True): TritonTile(16, 32, 64, 3),
    ("bf16", False): TritonTile(64, 64, 32, 3),
    ("fp8", True): TritonTile(64, 128, 128, 3),
    ("fp8", False): TritonTile(64, 128, 128, 3),
}


def moe_kernels(t: int, h: int, mi: int, e: int, k: int, w: str, p: MoePlacement,
                load: ExpertLoad | None = None) -> list[Kernel]:
    """`t` tokens through one MoE layer on one GPU: `mi` its share of the intermediate size, `e` and `k` the
    whole model's experts and top-k, placed as `p` says. The router (replicated: every GPU scores all experts) and
    the experts of this GPU. Under expert parallelism (vLLM's expert-map path) every GPU runs the align/sort,
    activation and sum over all tokens x top-k rows, and its expert GEMMs over the rows routed to its own experts;
    the MoE's time is the busiest GPU's (hardware/routing.py busiest_rank_share), which is the one priced. Each
    fused_moe_kernel still writes an output row for every row (fused_moe_kernel: a block whose expert is not on this
    GPU, expert id -1, writes zeros), so its output traffic is all rows'."""
    e_local = e // p.ep
    rows = t * k  # token-expert pairs, all of them
    if load is None:  # no scenario routing: p.routing's busiest share, uniform's distinct experts
        local_rows = max(1, round(rows * busiest_rank_share(t, e, k, p.ep, p.routing)))
        distinct = min(float(e_local), max(1.0, expected_distinct_experts(t, e, k) / p.ep))
    else:  # the scenario's routing (runtime/routing.py): the busiest GPU's rows and the experts it reads
        local_rows = max(1, round(load.rows))
        distinct = min(float(e_local), max(1.0, load.distinct))
    tile = TRITON_DEFAULT_TILES[(w, t <= e_local)] if p.tiles == "default" else None
    gate_up = _fused_moe_gemm(local_rows, rows, distinct, 2 * mi, h, w, tile)
    down = _fused_moe_gemm(local_rows, rows, distinct, h, mi, w, tile)
    experts = [
        Kernel(
            "moe_align_block_size_kernel",
            "experts",
            "overhead",
            0.0,
            3 * 4.0 * rows,
            shapes=f"sort {rows} (token, expert) ids into blocks",
            ctas=1,
        ),
        *act_quant(w, "experts", t, h),
        gate_up,
        act_and_mul("experts", rows, mi),
        *act_quant(w, "experts", rows, mi),
        down,
        Kernel(
            "moe_sum_kernel",
            "experts",
            "elementwise",
            rows * h,
            ACT_BYTES * (rows * h + t * h),
            shapes=f"[{t},{k},{h}] -> [{t},{h}]",
            ctas=t,
        ),
    ]
    op = MoeOp(t, h, mi * p.moe_tp, e, k, p.moe_tp, p.ep, "fp8_block" if w == "fp8" else "bf16", p.routing,
               distinct if load is not None and p.ep == 1 else 0.0)
    return [
        *linear("bf16", "router", t, e, h),
        Kernel(
            "topkGatingSoftmax",
            "router",
            "moe",
            5.0 * t * e,
            ACT_BYTES * t * e + 8.0 * t * k,
            shapes=f"logits[{t},{e}] -> top{k}",
            ctas=t,
        ),
        *measured_together(op, experts),
    ]


def _fused_moe_gemm(local_rows: int, rows: int, distinct: float, n: int, k: int, w: str,
                    tile: TritonTile | None) -> Kernel:
    """One fused_moe_kernel: this GPU's `local_rows` token-expert rows through its `distinct` experts' [k, n]
    weights; every one of the `rows` rows gets an output row (zeros for experts elsewhere)."""
    groups = max(1, round(distinct))
    per_expert = max(1, round(local_rows / distinct))
    w_b = DTYPE_BYTES[w]
    return Kernel(
        "fused_moe_kernel",
        "experts",
        "moe",
        2.0 * local_rows * n * k,
        distinct * n * k * w_b + ACT_BYTES * (local_rows * k + rows * n),
        shapes=f"{local_rows} rows over {distinct:.1f} experts: x[{per_expert},{k}] @ W[{k},{n}] each",
        gemm=(per_expert, n, k),
        dtype=w,
        groups=groups,
        inflight_bytes=grid_inflight_bytes(tile, groups, per_expert, n, k, w_b),
    )


def grid_inflight_bytes(tile: TritonTile | None, groups: int, rows: int, n: int, k: int, w_bytes: float) -> float:
    """Weight bytes a fused_moe_kernel grid keeps in flight: one CTA per (expert's M block, N block), each loading
    stages - 1 K steps of its BLOCK_N weight columns ahead (its whole slice if the K loop is shorter). 0 (no bound)
    for tuned tiles, which the fit and the tables price."""
    if tile is None:
        return 0.0
    ctas = groups * expected_row_tiles(rows, tile.block_m) * math.ceil(n / tile.block_n)
    per_cta = min(tile.stages - 1, math.ceil(k / tile.block_k)) * tile.block_k * tile.block_n * w_bytes
    return ctas * per_cta
