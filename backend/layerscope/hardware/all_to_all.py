"""MoE dispatch and combine between data-parallel ranks (issue 20): all-to-all kernels priced by backend.

    dispatch_combine(gpu, backend, phase, ep, nodes, tokens, hidden, topk, dispatch_bytes) -> (dispatch, combine)

With data-parallel attention each rank holds its own tokens; before the experts, every token goes to the ranks
holding its top-k experts (dispatch), and after them its expert outputs come back to be summed (combine). vLLM's
backends (--all2all-backend, vllm/distributed/device_communicators/all2all.py), priced here:

- naive: each rank broadcasts its tokens to all (dispatch), an all-reduce of every rank's [T, h] output
  (combine), then each keeps its slice. Priced as an all-gather (dispatch) and an all-reduce (combine) of the
  whole group's tokens: NCCL, measured (hardware/collectives.py).
- allgather_reducescatter: an all-gather of every rank's tokens (dispatch) and a reduce-scatter back (combine).
  Both move (n-1)/n of the group's [T, h] per GPU, as a ring all-gather does: priced as the measured all-gather.
- pplx: pplx-kernels' all-to-all, sending each token to the ranks of its experts. Priced with aiconfigurator-core's
  measured NCCL all-to-all of the same bytes (hardware/data/aic, `all_to_all`: 2-8 GPUs on one node), a stand-in:
  no pplx-kernels measurement is published for these GPUs.
- deepep_high_throughput: DeepEP's normal kernels (NVLink forwarding + RDMA), at the bottleneck bandwidths
  DeepEP's README measured (DEEPEP_NORMAL_*), never under the measured all-to-all's floor at that size.
- deepep_low_latency: DeepEP's low-latency kernels (pure RDMA, CUDA-graph compatible) for decode steps, at the
  README's measured latencies for 128 tokens per rank (DEEPEP_LL_*) scaled by bytes; a step with a prefill runs
  the normal kernels (SGLang's --deepep-mode auto; vLLM runs its prefill instances with deepep_high_throughput).

Traffic that leaves the node rides the inter-node link (INTER_NODE_BW per GPU). With uniform routing a share
(nodes - 1) / nodes of a token's remote copies leaves its node; (ep - 1) / ep of them leave its GPU.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from layerscope.hardware import tables
from layerscope.hardware.collectives import all_gather_us, all_reduce_us
from layerscope.hardware.gpus import GB, GPU
from layerscope.hardware.kernel import AllToAllOp

GPUS_PER_NODE = 8  # an HGX node's NVLink domain (layerscope/deployment.py GPUS_PER_NODE)
# One 400 Gb/s ConnectX-7 NIC per GPU for the compute fabric (NVIDIA DGX H100/H200 user guide: 8 x OSFP ports of
# 400 Gb/s InfiniBand/Ethernet, one per GPU): 50 GB/s per GPU each way, the default of issue 20.
INTER_NODE_BW = 400e9 / 8
# DeepEP README (github.com/deepseek-ai/DeepEP, "Performance", normal kernels on H800 with CX7 400 Gb/s, 4096
# tokens, hidden 7168, top-8, FP8 dispatch / BF16 combine): the bottleneck bandwidth per GPU, by EP size.
DEEPEP_NORMAL_NVLINK_GBS = {"dispatch": 153.0, "combine": 158.0}  # EP 8, intranode, of H800's ~160 GB/s NVLink
H800_NVLINK_GBS = 160.0  # the NVLink bandwidth those figures were measured against (DeepEP README)
DEEPEP_NORMAL_RDMA_GBS = {  # internode, RDMA bottleneck, by EP size
    "dispatch": {16: 43.0, 32: 58.0, 64: 51.0},
    "combine": {16: 43.0, 32: 57.0, 64: 50.0},
}
# DeepEP README, low-latency kernels on H800 + CX7 400 Gb/s, 128 tokens per rank, hidden 7168, top-8, FP8 dispatch
# and BF16 combine: the latency by EP size, microseconds.
DEEPEP_LL_TOKENS, DEEPEP_LL_HIDDEN, DEEPEP_LL_TOPK = 128, 7168, 8
DEEPEP_LL_US = {
    "dispatch": {8: 77.0, 16: 118.0, 32: 155.0, 64: 173.0, 128: 192.0, 256: 194.0},
    "combine": {8: 114.0, 16: 195.0, 32: 273.0, 64: 314.0, 128: 369.0, 256: 360.0},
}
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128  # e4m3 values and one fp32 scale per 128 (DeepEP's FP8 dispatch)
BF16 = 2.0
PHASES = ("dispatch", "combine")


@dataclass(frozen=True)
class A2ACost:
    """One dispatch or combine: its time, the bytes each GPU sends (and how many leave the node), the kernel vLLM
    runs and where its price comes from."""

    time_us: float
    bytes_sent: float
    inter_node_bytes: float
    kernel: str
    source: str
    op: AllToAllOp | None = None  # the measured op that priced it, where one did


def remote_share(ep: int, nodes: int) -> tuple[float, float]:
    """(share of a token's expert copies leaving its GPU, share leaving its node) under uniform routing."""
    return (ep - 1) / ep, (nodes - 1) / nodes if nodes > 1 else 0.0


def dispatch_combine(gpu: GPU, backend: str, prefill: bool, ep: int, nodes: int, tokens: int, hidden: int,
                     topk: int, dispatch_bytes: float = BF16) -> tuple[A2ACost, A2ACost]:
    """The dispatch and the combine of one MoE layer on one GPU holding `tokens` of its rank's tokens, `ep` GPUs
    over `nodes` nodes; `dispatch_bytes` per element dispatched (FP8_DISPATCH_BYTES for DeepEP's FP8 dispatch)."""
    if ep <= 1:
        raise ValueError("an all-to-all needs ep > 1")
    if backend in ("naive", "allgather_reducescatter"):
        return _gathered(gpu, backend, ep, nodes, tokens, hidden)
    if backend == "pplx":
        return tuple(_pplx(gpu, ep, nodes, tokens, hidden, topk, b, p)  # type: ignore[return-value]
                     for p, b in zip(PHASES, (dispatch_bytes, BF16), strict=True))
    if backend == "deepep_low_latency" and not prefill:
        return tuple(_deepep_ll(gpu, ep, nodes, tokens, hidden, topk, b, p)  # type: ignore[return-value]
                     for p, b in zip(PHASES, (dispatch_bytes, BF16), strict=True))
    if backend in ("deepep_high_throughput", "deepep_low_latency"):
        return tuple(_deepep_normal(gpu, ep, nodes, tokens, hidden, topk, b, p)  # type: ignore[return-value]
                     for p, b in zip(PHASES, (dispatch_bytes, BF16), strict=True))
    raise ValueError(f"unknown all2all backend {backend!r}")


def _sent(ep: int, nodes: int, tokens: int, hidden: int, topk: float, elem: float) -> tuple[float, float]:
    """Bytes one GPU sends in an expert-wise all-to-all (a copy per remote expert), and those leaving its node."""
    off_gpu, off_node = remote_share(ep, nodes)
    sent = tokens * topk * hidden * elem * off_gpu
    return sent, tokens * topk * hidden * elem * off_node


def _floor_us(gpu: GPU, ep: int, nbytes: float) -> tuple[float, AllToAllOp | None]:
    """The measured NCCL all-to-all of `nbytes` on min(ep, 8) GPUs of one node (aiconfigurator-core), where the
    GPU's table covers it: the floor every all-to-all of that size pays."""
    op = AllToAllOp(min(ep, GPUS_PER_NODE), float(max(nbytes, 512.0)))
    hit = tables.price(gpu.name, op) if gpu.tables else None
    return (hit.us, op) if hit is not None else (0.0, None)


def _inter_node_us(inter_bytes: float) -> float:
    return inter_bytes / INTER_NODE_BW * 1e6


def _pplx(gpu: GPU, ep: int, nodes: int, tokens: int, hidden: int, topk: int, elem: float, phase: str) -> A2ACost:
    sent, inter = _sent(ep, nodes, tokens, hidden, topk, elem)
    intra_us, op = _floor_us(gpu, ep, sent - inter)
    us = max(intra_us, _inter_node_us(inter))  # NVLink and the NIC move their shares at once
    src = "NCCL all-to-all measured (aiconfigurator-core) for pplx-kernels"
    if inter:
        src += f"; {inter / 1e6:.2f} MB over the 400 Gb/s per GPU node link"
    return A2ACost(us, sent, inter, f"pplx {phase}", src, op)


def _deepep_normal(gpu: GPU, ep: int, nodes: int, tokens: int, hidden: int, topk: int, elem: float,
                   phase: str) -> A2ACost:
    """Normal kernels send a token once per remote rank holding one of its experts (not once per expert)."""
    ranks = expected_ranks_touched(ep, topk)
    sent, inter = _sent(ep, nodes, tokens, hidden, ranks, elem)
    nvl_bw = DEEPEP_NORMAL_NVLINK_GBS[phase] / H800_NVLINK_GBS * gpu.nvlink_bw
    us = (sent - inter) / nvl_bw * 1e6
    src = f"DeepEP normal {phase}: {DEEPEP_NORMAL_NVLINK_GBS[phase]:g} GB/s of H800's 160 GB/s NVLink (README)"
    if inter:
        rdma = _by_ep(DEEPEP_NORMAL_RDMA_GBS[phase], ep) * GB
        us = max(us, inter / rdma * 1e6)
        src += f", {rdma / GB:.0f} GB/s RDMA at EP {ep}"
    floor, op = _floor_us(gpu, ep, sent - inter)
    return A2ACost(max(us, floor), sent, inter, f"deepep normal {phase}", src + "; floor: NCCL all-to-all measured",
                   op if floor >= us else None)


def _deepep_ll(gpu: GPU, ep: int, nodes: int, tokens: int, hidden: int, topk: int, elem: float,
               phase: str) -> A2ACost:
    """The README's latency at 128 tokens x 7168 x top-8, scaled by this layer's bytes."""
    sent, inter = _sent(ep, nodes, tokens, hidden, topk, elem)
    scale = (tokens * hidden * topk) / (DEEPEP_LL_TOKENS * DEEPEP_LL_HIDDEN * DEEPEP_LL_TOPK)
    us = _by_ep(DEEPEP_LL_US[phase], ep) * scale
    floor, op = _floor_us(gpu, ep, sent - inter)
    src = f"DeepEP low-latency {phase}: README latency at EP {ep} (H800, 128 tokens x 7168, top-8) x bytes"
    return A2ACost(max(us, floor), sent, inter, f"deepep low_latency {phase}", src + "; floor: NCCL all-to-all "
                   "measured", op if floor >= us else None)


def _gathered(gpu: GPU, backend: str, ep: int, nodes: int, tokens: int, hidden: int) -> tuple[A2ACost, A2ACost]:
    """naive / allgather_reducescatter: every GPU receives the whole group's [ep x tokens, h] bf16."""
    group = ep * tokens * hidden * BF16
    off_gpu, off_node = remote_share(ep, nodes)
    sent, inter = group * off_gpu, group * off_node
    intra = min(GPUS_PER_NODE, 1 << (min(ep, GPUS_PER_NODE) - 1).bit_length())  # the measured 2, 4, 8 GPUs
    node_bytes = group / nodes
    gather = all_gather_us(gpu, intra, node_bytes).time_us + _inter_node_us(inter)
    if backend == "naive":
        combine = all_reduce_us(gpu, intra, node_bytes, cuda_graphs=False).time_us + 2 * _inter_node_us(inter)
        names = ("naive dispatch (broadcasts)", "naive combine (all-reduce)")
    else:
        combine = gather  # a ring reduce-scatter moves what a ring all-gather does
        names = ("all_gatherv dispatch", "reduce_scatterv combine")
    src = "NCCL measured (hardware/collectives.py)" + (", plus the node link" if inter else "")
    return (A2ACost(gather, sent, inter, names[0], src), A2ACost(combine, sent, inter, names[1], src))


def expected_ranks_touched(ep: int, topk: int) -> float:
    """Distinct ranks a token's top-k experts sit on, uniform routing: ep (1 - (1 - 1/ep)^k)."""
    return ep * (1.0 - (1.0 - 1.0 / ep) ** topk)


def _by_ep(by_ep: dict[int, float], ep: int) -> float:
    """A published figure at `ep`: log-linear between the published EP sizes, the nearest one outside them."""
    sizes = sorted(by_ep)
    if ep <= sizes[0]:
        return by_ep[sizes[0]]
    if ep >= sizes[-1]:
        return by_ep[sizes[-1]]
    i = bisect.bisect_right(sizes, ep)
    lo, hi = sizes[i - 1], sizes[i]
    f = (math.log(ep) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return by_ep[lo] + f * (by_ep[hi] - by_ep[lo])
