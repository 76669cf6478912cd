"""KV transfer sizes against a hand computation, and the shared link's timing."""

import pytest

from layerscope.hardware.gpus import GB
from layerscope.model.config import PRESETS
from layerscope.runtime.transfer import Link, Transfer, transfer_size

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
