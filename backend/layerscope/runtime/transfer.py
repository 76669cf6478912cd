"""KV transfer between a prefill engine and a decode engine: its size at both tp layouts and its time on a
shared link.

    bytes(tokens) = tokens x KV bytes per token over all layers, as the receiver's tp layout holds them:
        each decode GPU pulls its own KV heads (vLLM's NixlConnector: the decode worker READs the prefill
        worker's blocks; heterogeneous tp maps each decode rank to the prefill rank holding its heads)
        receiver total = receiver tp x one receiving GPU's KV bytes (replicated heads counted on every GPU)
        busiest lane   = max(one receiving GPU's bytes, receiver total / sender tp)   (a sender GPU feeding
                         several receivers sends their shares one after another over its own NIC or NVLink port)
    time = post + busiest lane / (lane bandwidth / transfers sharing the link)   (processor sharing: every
           transfer in flight on the link gets an equal share, recomputed whenever one starts or ends)
           + the wait for the decode engine's next poll (runtime/disagg.py polled_us: vLLM's NixlConnector checks
           its READs once per engine step, and NIXL's xferDuration ends at that check)
    post = POST_FIXED_US + POST_PER_DESCRIPTOR_US x descriptors   (NIXL's postDuration: submitting the READ)
        descriptors = regions x blocks x reads: one per (layer, K or V) region and KV block of the prompt, as
        vLLM's NixlConnector lists them (_get_block_descs_ids: num_regions x block_ids, regions [K0, V0, K1, ...]
        for a non-MLA model), each receiving rank posting its own list (the ranks post in parallel), one list per
        sender rank it reads heads from

Lane bandwidths and the post cost are the constants below, each with its source. With `streaming` each layer's
KV is posted and sent as prefill finishes it (Mooncake's and SGLang's layer-wise transfer): the transfer joins the
link one layer's post after the prefill's last step starts, and cannot end before the prefill's end plus the last
layer's post and bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from layerscope.deployment import DeploymentSpec, shard
from layerscope.hardware.gpus import GB, GPU
from layerscope.model.config import ModelConfig

# RDMA: one 400 Gb/s ConnectX-7 NIC per GPU on DGX/HGX H100 and H200; Mooncake's transfer engine measured
# 190 GB/s over 8 x 400 Gbps RoCE (Mooncake README, "Transfer Engine" figures): 23.75 GB/s per GPU's NIC.
RDMA_LANE_BW = 190 * GB / 8
# Posting a transfer's descriptors (NIXL postDuration, vLLM's "KV Transfer metrics" log line), a line through two
# published means: 129.127 ms for 40,064 descriptors (vLLM issue #34054, 1P1D on one host) and 0.672 ms for 72
# (vLLM issue #41230): 3.212 us a descriptor, 0.441 ms fixed. Held out: #50913's 6.7 ms for 1,785 descriptors
# (bench/README "Published disaggregated-serving measurements"). Taken for both links: UCX posts NVLink
# (cuda_ipc) and RDMA transfers by the same path (vLLM #55434 finds the cost transport-dependent: a caveat).
POST_PER_DESCRIPTOR_US = (129127.0 - 672.0) / (40064 - 72)
POST_FIXED_US = 672.0 - 72 * POST_PER_DESCRIPTOR_US
KV_REGIONS_PER_LAYER = 2  # K and V registered apart (FlashAttention's layout; vLLM's [K0, V0, K1, V1, ...])


@dataclass(frozen=True)
class TransferSize:
    """A request's KV on the wire, in bytes."""

    total_bytes: float  # every receiving GPU's share together
    lane_bytes: float  # the busiest GPU's (sender or receiver side): what sets the time
    lanes: int  # receiving GPUs
    descriptors: int = 0  # one receiving GPU's NIXL descriptors (what its post time scales with)

    @property
    def post_us(self) -> float:
        """NIXL's postDuration: submitting the descriptors before any byte moves."""
        return POST_FIXED_US + POST_PER_DESCRIPTOR_US * self.descriptors

    def layer_post_us(self, layers: int) -> float:
        """One layer's post when the KV is sent layer by layer (streaming): its share of the descriptors."""
        return POST_FIXED_US + POST_PER_DESCRIPTOR_US * self.descriptors / layers


@lru_cache(maxsize=64)  # asked once per transfer with the same few (model, tp, dtype): sharding costs a spec
def kv_per_gpu_per_token(model: ModelConfig, tp: int, kv_dtype: str) -> float:
    """KV bytes one GPU of a tp group holds per token, over all layers (KV heads / tp, at least one)."""
    return shard(model, DeploymentSpec(tp=tp)).kv_bytes_per_token(kv_dtype)


def transfer_size(model: ModelConfig, tokens: int, sender_tp: int, receiver_tp: int, kv_dtype: str,
                  block_size: int = 16) -> TransferSize:
    """A request's KV of `tokens` from a tp-`sender_tp` engine to a tp-`receiver_tp` one (blocks of block_size,
    vLLM's default 16)."""
    per_gpu = tokens * kv_per_gpu_per_token(model, receiver_tp, kv_dtype)
    total = receiver_tp * per_gpu
    return TransferSize(total, max(per_gpu, total / sender_tp), receiver_tp,
                        descriptors(model, tokens, block_size, sender_tp, receiver_tp))


def descriptors(model: ModelConfig, tokens: int, block_size: int, sender_tp: int, receiver_tp: int) -> int:
    """One receiving GPU's descriptors: a (layer, K|V) region x a block, once per sender rank holding its heads."""
    kv = model.num_key_value_heads
    reads = -(-max(1, kv // receiver_tp) // max(1, kv // sender_tp))
    return KV_REGIONS_PER_LAYER * model.num_hidden_layers * -(-tokens // block_size) * reads


def lane_bandwidth(gpu: GPU, link: str) -> float:
    """Bytes/s of one GPU's lane: its NVLink per direction (the datasheet's, hardware/gpus.py), or its NIC."""
    if link == "nvlink":
        return gpu.nvlink_bw
    return RDMA_LANE_BW


@dataclass
class Transfer:
    request_id: int
    size: TransferSize
    start_us: float  # when it was asked for
    join_us: float  # when it joins the link (after setup; streaming: when the last prefill step starts)
    not_before_us: float  # the earliest it can end (streaming: the prefill's end plus the last layer)
    remaining: float = 0.0  # lane bytes still to send
    payload: object = None  # what the receiver gets when it ends


@dataclass
class Link:
    """One link (NVLink of a node, or the RDMA fabric) shared by the transfers in flight on it."""

    bandwidth: float  # bytes/s of one lane
    active: list[Transfer] = field(default_factory=list)
    pending: list[Transfer] = field(default_factory=list)  # asked for, not yet joined
    now: float = 0.0
    busy_us: float = 0.0

    def add(self, tr: Transfer) -> None:
        tr.remaining = tr.size.lane_bytes
        tr.join_us = max(tr.join_us, self.now)
        self.pending.append(tr)
        self.pending.sort(key=lambda x: (x.join_us, x.request_id))

    def has_work(self) -> bool:
        return bool(self.active or self.pending)

    def next_event_us(self) -> float | None:
        """When something next happens on the link: a transfer joins or one ends."""
        times = [self.pending[0].join_us] if self.pending else []
        if self.active:
            times.append(min(self._end_us(x) for x in self.active))
        return min(times) if times else None

    def _end_us(self, x: Transfer) -> float:
        """When x would end if nothing joined or left meanwhile."""
        share = self.bandwidth / len(self.active)
        return self.now + max(x.remaining / share * 1e6, x.not_before_us - self.now)

    def advance(self, t: float) -> list[Transfer]:
        """Run the link to t; the transfers that ended by t (in the order they ended)."""
        done: list[Transfer] = []
        while True:
            nxt = self.next_event_us()
            if nxt is None or nxt > t + 1e-9:
                break
            ending = [x for x in self.active if self._end_us(x) <= nxt + 1e-6]  # before the clock moves: exact
            self._run_to(nxt)
            for x in ending:
                x.remaining = 0.0
                self.active.remove(x)
            done += ending
            while self.pending and self.pending[0].join_us <= nxt + 1e-9:
                self.active.append(self.pending.pop(0))
        self._run_to(max(t, self.now))
        return done

    def _run_to(self, t: float) -> None:
        if self.active and t > self.now:
            sent = self.bandwidth / len(self.active) * (t - self.now) / 1e6
            for x in self.active:
                x.remaining = max(0.0, x.remaining - sent)
            self.busy_us += t - self.now
        self.now = max(self.now, t)
