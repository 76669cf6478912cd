"""KV cache manager for many requests (vLLM v1's KVCacheManager): block tables, prefix cache, LRU eviction.

    Scheduler ──▶ KVCacheManager ──▶ KVAllocator policy (bank_aware | naive: where a new block goes)
                  │                      └──▶ BlockPool (banks x slots, owners)
                  ├ req_to_blocks: request id -> [Block]  (its block table; shared prefix blocks appear in many)
                  ├ cached: block hash -> Block            (full blocks, hash = H(parent hash, block tokens))
                  └ evictable: cached blocks no request uses, least recently used first

A block's pool owner is the request that allocated it ("req<id>"); once that request lets go of a block
other requests still use or the prefix cache keeps, the pool records it as "prefix_cache". Failure kinds as
in vLLM: no room -> `allocate_slots` returns None (the scheduler preempts); a caller's mistake raises
ValueError; a broken invariant asserts.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field

from layerscope.runtime.kv.allocator import KVAllocator, Migration
from layerscope.runtime.request import Request

CACHE_OWNER = "prefix_cache"
ROOT_HASH = b"layerscope-prefix-root"  # the parent hash of a request's first block (vLLM: NONE_HASH)


@dataclass(eq=False)
class Block:
    bank: int
    slot: int
    ref_cnt: int = 0
    block_hash: bytes | None = None  # set once the block is full and cached


@dataclass
class Allocation:
    """What one allocate_slots call changed (the engine turns it into page events)."""

    new_blocks: list[Block] = field(default_factory=list)
    migrations: list[Migration] = field(default_factory=list)
    evicted: list[tuple[int, int]] = field(default_factory=list)  # (bank, slot) of cached blocks given back


def block_hash(parent: bytes, tokens: bytes) -> bytes:
    """Hash of a full block: its tokens and its prefix's hash (as vLLM's hash_block_tokens, sha256)."""
    return hashlib.sha256(parent + tokens).digest()


class KVCacheManager:
    def __init__(self, allocator: KVAllocator, block_size: int, prefix_caching: bool) -> None:
        self.allocator = allocator
        self.pool = allocator.pool
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.req_to_blocks: dict[int, list[Block]] = {}
        self.blocks: dict[tuple[int, int], Block] = {}  # every block some request or the cache holds
        self.cached: dict[bytes, Block] = {}
        self.evictable: OrderedDict[tuple[int, int], Block] = OrderedDict()
        self.version = 0  # bumps whenever a block table changes
        self.num_query_tokens = 0  # prefix cache stats, as vLLM's PrefixCacheStats (queries, hits)
        self.num_hit_tokens = 0
        self._log: list[tuple[str, int | None, list[tuple[int, int]]]] = []  # ("free" | "evict", request, slots)

    # -- queries ---------------------------------------------------------------------------------------------
    def block_table(self, request_id: int) -> list[tuple[int, int]]:
        return [(b.bank, b.slot) for b in self.req_to_blocks.get(request_id, [])]

    @property
    def hit_rate(self) -> float:
        return self.num_hit_tokens / self.num_query_tokens if self.num_query_tokens else 0.0

    def get_computed_blocks(self, req: Request) -> list[Block]:
        """The longest run of the request's leading full blocks found in the prefix cache. At least one token
        is always left to compute (its logits give the next token), as vLLM's max_cache_hit_length."""
        if not self.prefix_caching:
            return []
        self._hash_blocks(req)
        hits = []
        for i, h in enumerate(req.block_hashes):
            if (i + 1) * self.block_size > req.num_tokens - 1:
                break
            b = self.cached.get(h)
            if b is None:
                break
            hits.append(b)
        if req.num_preemptions == 0:  # as vLLM, a recomputed request does not count twice
            self.num_query_tokens += req.num_tokens
            self.num_hit_tokens += len(hits) * self.block_size
        return hits

    # -- allocation ------------------------------------------------------------------------------------------
    def allocate_slots(self, req: Request, num_new_tokens: int, hits: list[Block] | None = None) -> Allocation | None:
        """Blocks for `num_new_tokens` more tokens of `req` (after `hits`, blocks found in the cache); None
        when the pool cannot hold them even after evicting every unused cached block."""
        if num_new_tokens < 1:
            raise ValueError(f"request {req.request_id}: allocate_slots needs >= 1 token, got {num_new_tokens}")
        hits = hits or []
        table = self.req_to_blocks.setdefault(req.request_id, [])
        computed = req.num_computed_tokens + len(hits) * self.block_size
        need = -(-(computed + num_new_tokens) // self.block_size) - len(table) - len(hits)
        if need <= 0 and not hits:
            return Allocation()  # the tokens fit the request's last block: most decode steps
        # cached hits no request uses are evictable: touching them takes them off that list
        reclaimable = sum(1 for b in hits if b.ref_cnt == 0) if hits else 0
        free = self.pool.num_free
        if need > free + len(self.evictable) - reclaimable:
            return None
        out = Allocation()
        for b in hits:
            if b.ref_cnt == 0:
                del self.evictable[(b.bank, b.slot)]
            b.ref_cnt += 1
            table.append(b)
        if need > 0:
            if need > free:
                out.evicted = self._evict(need - free)
            owner = f"req{req.request_id}"
            grant = self.allocator.allocate(owner, need, "prefill" if req.is_prefill else "decode")
            assert grant is not None, f"{need} blocks for {owner}: the pool counted them free but placed none"
            for m in grant.migrations:
                self._moved(m)
            out.migrations = grant.migrations
            blocks, new = self.blocks, out.new_blocks
            for bank, slot in zip(grant.banks, grant.slots, strict=True):
                b = Block(bank, slot, 1)
                blocks[(bank, slot)] = b
                new.append(b)
            table += new
        if hits or need > 0:
            self.version += 1
        return out

    def cache_blocks(self, req: Request) -> None:
        """Full blocks whose tokens are all computed enter the prefix cache (first writer wins)."""
        if not self.prefix_caching:
            return
        self._hash_blocks(req)
        table = self.req_to_blocks.get(req.request_id, [])
        full = min(req.num_computed_tokens // self.block_size, len(req.block_hashes), len(table))
        for i in range(full):
            b = table[i]
            if b.block_hash is None and req.block_hashes[i] not in self.cached:
                b.block_hash = req.block_hashes[i]
                self.cached[b.block_hash] = b

    def free(self, req: Request) -> list[tuple[int, int]]:
        """The request lets go of its blocks (finished or preempted), tail first so that tail blocks are
        evicted first; returns the (bank, slot) of blocks given back to the pool (the rest stay cached)."""
        table = self.req_to_blocks.pop(req.request_id, [])
        owner = f"req{req.request_id}"
        released = []
        for b in reversed(table):
            b.ref_cnt -= 1
            assert b.ref_cnt >= 0, f"block ({b.bank}, {b.slot}) freed more often than taken"
            if b.ref_cnt == 0 and b.block_hash is None:
                released.append((b.bank, b.slot))
                continue
            if self.pool.owner_name(int(self.pool.owner[b.bank, b.slot])) == owner:
                self.pool.retag(b.bank, b.slot, CACHE_OWNER, 0)
            if b.ref_cnt == 0:
                self.evictable[(b.bank, b.slot)] = b
        if released:  # given back in one vectorised call, then to the policy in the same order (tail first)
            self.pool.release_many([b for b, _ in released], [s for _, s in released])
            for where in released:
                self.allocator.released(*where)
                del self.blocks[where]
        self.allocator.tables.pop(owner, None)
        if table:
            self.version += 1
        self._log.append(("free", req.request_id, released))
        return released

    def drain_log(self) -> list[tuple[str, int | None, list[tuple[int, int]]]]:
        """Slots given back since the last call: ("free", request id, slots) or ("evict", None, slots)."""
        log, self._log = self._log, []
        return log

    # -- internals -------------------------------------------------------------------------------------------
    def _hash_blocks(self, req: Request) -> None:
        """Hashes of the request's full blocks of known tokens (prompt, then sampled output)."""
        bs = self.block_size
        hashes = req.block_hashes
        for i in range(len(hashes), req.num_tokens // bs):
            parent = hashes[-1] if hashes else ROOT_HASH
            hashes.append(block_hash(parent, req.token_ids[i * bs : (i + 1) * bs].tobytes()))

    def _evict(self, n: int) -> list[tuple[int, int]]:
        out = []
        for _ in range(max(0, n)):
            where, b = self.evictable.popitem(last=False)
            assert b.block_hash is not None and b.ref_cnt == 0, f"block {where} evictable but in use or unhashed"
            del self.cached[b.block_hash]
            del self.blocks[where]
            self.pool.release(*where)
            self.allocator.released(*where)
            out.append(where)
        if out:
            self._log.append(("evict", None, out))
        return out

    def _moved(self, m: Migration) -> None:
        """A policy migrated a page to make room: the block follows its data."""
        b = self.blocks.pop((m.from_bank, m.from_slot), None)
        if b is None:
            return  # another tenant's page
        b.bank, b.slot = m.to_bank, m.to_slot
        self.blocks[(b.bank, b.slot)] = b
        key = (m.from_bank, m.from_slot)
        if key in self.evictable:
            self.evictable = OrderedDict(((b.bank, b.slot) if k == key else k, v) for k, v in self.evictable.items())
