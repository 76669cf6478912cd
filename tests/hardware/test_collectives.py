"""Collectives priced from the shipped NCCL tables and vLLM's custom all-reduce measurements."""

from __future__ import annotations

import pytest

from layerscope.hardware.collectives import CUSTOM_AR_MAX_BYTES, all_reduce_us, nccl_curves
from layerscope.hardware.gpus import gpu

SIZES = [2**k for k in range(10, 30)]


@pytest.mark.parametrize("n", [2, 4, 8])
def test_nccl_curves_are_non_decreasing_and_bandwidth_bound_when_large(n: int) -> None:
    times = [all_reduce_us(gpu("h100-sxm"), n, s, cuda_graphs=False).time_us for s in SIZES]
    assert all(a <= b + 1e-9 for a, b in zip(times, times[1:], strict=False))
    big = all_reduce_us(gpu("h100-sxm"), n, 2**28, cuda_graphs=False).time_us
    assert big == pytest.approx(4 * all_reduce_us(gpu("h100-sxm"), n, 2**26, cuda_graphs=False).time_us, rel=0.02)
    busbw = 2 * (n - 1) / n * 2**28 / (big * 1e-6)  # ring bus bandwidth, bytes/s
    assert 100e9 < busbw < gpu("h100-sxm").nvlink_bw  # below NVLink 4's 450 GB/s per direction


def test_the_curve_goes_through_the_measured_medians() -> None:
    curve = nccl_curves("h100-sxm")[8]
    assert curve(64 * 2**20) == pytest.approx(322.0, rel=0.1)  # measured 0.32-0.35 ms near 64 MB


def test_custom_all_reduce_is_used_for_small_messages_under_cuda_graphs() -> None:
    h100 = gpu("h100-sxm")
    small = all_reduce_us(h100, 8, 8192)
    assert small.algorithm == "vllm custom" and small.time_us < all_reduce_us(h100, 8, 8192, False).time_us
    assert 8.0 < small.time_us < 12.0  # 9.3 us at 4 KiB, 11.8 us at 32 KiB (SGLang PR #2904)
    assert all_reduce_us(h100, 8, 2 * CUSTOM_AR_MAX_BYTES).algorithm == "nccl ring"
    assert all_reduce_us(gpu("a100-80g-sxm"), 8, 8192).algorithm == "nccl ring"  # measured on Hopper only


def test_h200_shares_h100_nvlink_and_b200_is_scaled_and_says_so() -> None:
    for s in (4096, 2**20, 2**26):
        assert all_reduce_us(gpu("h200"), 8, s).time_us == all_reduce_us(gpu("h100-sxm"), 8, s).time_us
    b200 = all_reduce_us(gpu("b200"), 8, 2**26)
    assert b200.time_us < all_reduce_us(gpu("h100-sxm"), 8, 2**26).time_us
    assert "scaled" in b200.source and "not measured" in b200.source
    assert all_reduce_us(gpu("h200"), 1, 2**20).time_us == 0.0
