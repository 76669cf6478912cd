"""hardware/all_to_all.py: MoE dispatch/combine priced by backend (issue 20)."""

from __future__ import annotations

import csv
import gzip

import pytest

from layerscope.hardware import all_to_all as a2a
from layerscope.hardware.gpus import gpu
from layerscope.hardware.tables import DATA

H200, H100 = gpu("h200"), gpu("h100-sxm")


def table_rows(system: str) -> dict[tuple[int, float], float]:
    with gzip.open(DATA / system / "all_to_all.csv.gz", "rt") as f:
        return {(int(r["gpus"]), float(r["bytes"])): float(r["us"]) for r in csv.DictReader(f)}


def tokens_sending(nbytes: float, ep: int, hidden: int, topk: int) -> int:
    per_token = topk * hidden * 2.0 * (ep - 1) / ep
    assert nbytes % per_token == 0
    return int(nbytes // per_token)


@pytest.mark.parametrize("nbytes", [1835008.0, 7340032.0, 58720256.0])
def test_pplx_on_one_node_is_the_measured_nccl_all_to_all(nbytes: float) -> None:
    """At a measured message size (8 GPUs, bf16, hidden 4096, top-8 -> 57,344 B per token sent) the price is
    the aiconfigurator-core row itself, interpolated between rows elsewhere."""
    rows = table_rows("h200_sxm")
    measured = {b: us for (g, b), us in rows.items() if g == 8}
    tokens = tokens_sending(nbytes, 8, 4096, 8)
    d, c = a2a.dispatch_combine(H200, "pplx", False, 8, 1, tokens, 4096, 8)
    assert d.bytes_sent == nbytes and d.inter_node_bytes == 0
    lo = max(b for b in measured if b <= nbytes)
    hi = min(b for b in measured if b >= nbytes)
    assert min(measured[lo], measured[hi]) * 0.9 <= d.time_us <= max(measured[lo], measured[hi]) * 1.1
    assert d.op is not None and d.op.gpus == 8  # the timeline says it is measured


def test_a_measured_row_is_reproduced() -> None:
    rows = table_rows("h200_sxm")
    tokens = 128  # 128 x 57,344 B = 7,340,032 B, between the 4 MiB and 8 MiB rows
    d, _ = a2a.dispatch_combine(H200, "pplx", False, 8, 1, tokens, 4096, 8)
    assert rows[(8, 4194304.0)] < d.time_us < rows[(8, 8388608.0)]


def test_deepep_low_latency_is_the_readme_latency_at_its_setting() -> None:
    """DeepEP's README: 128 tokens per rank, hidden 7168, top-8, FP8 dispatch: 77 us dispatch, 114 us combine at EP 8
    and 118 / 195 us at EP 16."""
    d, c = a2a.dispatch_combine(H100, "deepep_low_latency", False, 8, 1, 128, 7168, 8, a2a.FP8_DISPATCH_BYTES)
    assert (d.time_us, c.time_us) == (77.0, 114.0)
    d, c = a2a.dispatch_combine(H100, "deepep_low_latency", False, 16, 2, 128, 7168, 8, a2a.FP8_DISPATCH_BYTES)
    assert (d.time_us, c.time_us) == (118.0, 195.0)
    assert d.inter_node_bytes == pytest.approx(d.bytes_sent * (1 / 2) / (15 / 16))


def test_prefill_runs_deepep_normal_kernels_and_crossing_nodes_costs_rdma() -> None:
    d, _ = a2a.dispatch_combine(H100, "deepep_low_latency", True, 8, 1, 4096, 4096, 8)
    assert d.kernel == "deepep normal dispatch"
    one_node, _ = a2a.dispatch_combine(H100, "deepep_high_throughput", True, 8, 1, 4096, 4096, 8)
    two_nodes, _ = a2a.dispatch_combine(H100, "deepep_high_throughput", True, 16, 2, 4096, 4096, 8)
    assert two_nodes.time_us > 2 * one_node.time_us  # 43 GB/s of RDMA against NVLink
    assert two_nodes.time_us == pytest.approx(two_nodes.inter_node_bytes / 43e9 * 1e6)


def test_gathering_backends_move_the_whole_group() -> None:
    """naive and allgather_reducescatter send every token to every rank: more than an all-to-all at large batches;
    naive's combine is an all-reduce, dearer than the reduce-scatter."""
    args = (H200, False, 8, 1, 512, 4096, 8)
    pplx = a2a.dispatch_combine(H200, "pplx", *args[1:])
    ag = a2a.dispatch_combine(H200, "allgather_reducescatter", *args[1:])
    naive = a2a.dispatch_combine(H200, "naive", *args[1:])
    assert ag[0].time_us > pplx[0].time_us
    assert naive[1].time_us > ag[1].time_us
    with pytest.raises(ValueError, match="unknown all2all backend"):
        a2a.dispatch_combine(H200, "nvshmem", *args[1:])


def test_expected_ranks_touched() -> None:
    assert a2a.expected_ranks_touched(8, 1) == pytest.approx(1.0)
    assert a2a.expected_ranks_touched(8, 8) == pytest.approx(8 * (1 - (7 / 8) ** 8))
