"""KV transfer sizes against a hand computation, and the shared link's timing."""

from dataclasses import replace

import pytest

from layerscope.hardware.gpus import GB
from layerscope.model.config import PRESETS
from layerscope.runtime.transfer import Link, Transfer, descriptors, transfer_size

QWEN = PRESETS["qwen3-235b-a22b"]


def test_qwen3_layout_as_the_hand_computation_uses_it() -> None:
    assert (QWEN.num_hidden_layers, QWEN.num_key_value_heads, QWEN.head_dim) == (94, 4, 128)


def test_transfer_size_tp4_to_tp4() -> None:
    """One GPU of tp 4 holds 4 / 4 = 1 KV head: K and V x 128 dims x 2 bytes x 94 layers = 48,128 B a token.
    Four receivers: 192,512 B a token in all; each pair of GPUs carries its own 48,128."""
    s = transfer_size(QWEN, 1000, 4, 4, "bf16")
    assert s.total_bytes == 1000 * 4 * 2 * 128 * 2 * 94 == 192_512_000
    assert s.lane_bytes == 48_128_000 and s.lanes == 4


def test_transfer_size_tp4_to_tp8() -> None:
    """tp 8 replicates the 4 KV heads twice: each of the 8 receivers pulls one head (48,128 B a token), 385,024 B
    in all; each tp-4 sender feeds two receivers, 96,256 B a token over its lane: the busiest lane."""
    s = transfer_size(QWEN, 1000, 4, 8, "bf16")
    assert s.total_bytes == 8 * 48_128_000 and s.lanes == 8
    assert s.lane_bytes == 2 * 48_128_000
    assert transfer_size(QWEN, 1000, 4, 4, "fp8").total_bytes == 192_512_000 / 2  # fp8 KV: one byte a value


def test_post_time_scales_with_the_descriptors() -> None:
    """vLLM's NixlConnector posts one descriptor per (layer, K or V) region and block: 1000 tokens in blocks of 16
    are 63 blocks, x 94 layers x 2 = 11,844 descriptors a receiving GPU; posted at 0.441 ms + 3.212 us each
    (vLLM #41230 and #34054) = 38.48 ms. tp 8 -> tp 4: a tp-4 GPU holds 1 KV head, which one tp-8 GPU holds
    whole (heads replicated twice), so it reads from one sender: the same count; block size 64 quarters it."""
    s = transfer_size(QWEN, 1000, 4, 4, "bf16")
    assert s.descriptors == 63 * 94 * 2 == 11_844
    assert s.post_us == pytest.approx(440.7 + 11_844 * 3.2120, rel=1e-4)
    assert descriptors(QWEN, 1000, 16, 8, 4) == 11_844
    assert descriptors(QWEN, 1000, 64, 4, 4) == 16 * 94 * 2
    two_reads = replace(QWEN, num_key_value_heads=8)  # 8 heads: a tp-8 GPU holds 1, a tp-2 GPU 4
    assert descriptors(two_reads, 16, 16, 8, 2) == 94 * 2 * 4  # a tp-2 GPU reads its 4 heads from 4 tp-8 GPUs


def _transfer(rid: int, lane_bytes: float, join: float) -> Transfer:
    s = transfer_size(QWEN, 1, 4, 4, "bf16")
    return Transfer(rid, type(s)(lane_bytes * 4, lane_bytes, 4), join, join, 0.0)


def test_link_shares_its_bandwidth_between_transfers_in_flight() -> None:
    """1 GB/s lane: alone, 1 MB takes 1 ms. Two of 1 MB from t = 0 share it: both end at 2 ms. A third of 1 MB
    joining at 1 ms (the first two half sent) shares three ways until they end at 2.5 ms, then runs alone to 3 ms."""
    link = Link(1 * GB)
    link.add(_transfer(0, 1e6, 0.0))
    assert link.next_event_us() == 0.0  # it joins
    assert link.advance(0.0) == [] and link.next_event_us() == pytest.approx(1000.0)
    assert [t.request_id for t in link.advance(1e9)] == [0] and not link.has_work()
    link = Link(1 * GB)
    for rid, join in ((1, 0.0), (2, 0.0), (3, 1000.0)):
        link.add(_transfer(rid, 1e6, join))
    ends = []
    while link.has_work():
        nxt = link.next_event_us()
        assert nxt is not None
        ends += [(t.request_id, round(nxt, 3)) for t in link.advance(nxt)]
    assert ends == [(1, 2500.0), (2, 2500.0), (3, 3000.0)]
