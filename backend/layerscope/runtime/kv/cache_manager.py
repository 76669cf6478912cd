"""KV cache manager for many requests (vLLM v1's KVCacheManager): block tables, prefix cache, LRU eviction.

    Scheduler ──▶ KVCacheManager ──▶ KVAllocator policy (free_queue: vLLM's; bank_aware | naive: the article's)
                  │                      └──▶ BlockPool (banks x slots, owners)
                  ├ req_to_blocks: request id -> [Block]  (its block table; shared prefix blocks appear in many)
                  ├ cached: block hash -> [Block]          (full blocks, hash = H(parent hash, block tokens);
                  │                                          duplicates kept, the first one is served)
                  └ evictable: cached blocks no request uses, in the order they were freed

vLLM's rules, from vllm/v1/core (kv_cache_manager.py, block_pool.py, kv_cache_utils.py):
- allocate_slots caches the blocks that the scheduled tokens will fill (KVCacheManager.allocate_slots:
  num_tokens_to_cache = min(computed + new, num_tokens)), so a request admitted later in the same step hits them.
- Blocks are not de-duplicated (BlockPool.cache_full_blocks: "We currently don't de-duplicate the blocks in the
  cache"): two requests that compute the same block each cache theirs; get_cached_block serves the first.
- One free queue holds never-used and cached-but-unused blocks alike (FreeKVCacheBlockQueue); an allocation takes
  its head and evicts it from the cache if it was cached (BlockPool.get_new_blocks, _maybe_evict_cached_block), a
  hit takes a free cached block out of the queue (BlockPool.touch), and a request's blocks join the tail tail
  first (KVCacheManager.free: "so that the tail blocks are evicted first"). The vLLM runtime's FreeQueueAllocator
  is that queue; the article's policies keep their own free lists, and cached blocks are evicted least recently
  freed first when the pool has no free slot left.
- Prefix cache stats count each admission (PrefixCacheStats.record: requests, queries = the request's tokens,
  hits = tokens found cached), a preempted request's apart; prefix_cache_hit_rate is hits / queries of requests
  never preempted, as vllm:prefix_cache_hits / vllm:prefix_cache_queries.

A block's pool owner is the request that allocated it ("req<id>"); once that request lets go of a block
other requests still use or the prefix cache keeps, the pool records it as "prefix_cache" (a "keep" log entry:
the engine's page_cache event). Failure kinds as in vLLM: no room -> `allocate_slots` returns None (the scheduler
preempts); a caller's mistake raises ValueError; a broken invariant asserts.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from layerscope.runtime.kv.allocator import KVAllocator, Migration
from layerscope.runtime.kv.block_pool import BlockPool
from layerscope.runtime.request import Request

CACHE_OWNER = "prefix_cache"
ROOT_HASH = b"layerscope-prefix-root"  # the parent hash of a request's first block (vLLM: NONE_HASH)
LogKind = Literal["free", "keep", "evict"]


@dataclass(eq=False, slots=True)
class Block:
    bank: int
    slot: int
    ref_cnt: int = 0
    block_hash: bytes | None = None  # set once the block is full and cached


@dataclass(slots=True)
class Allocation:
    """What one allocate_slots call changed (the engine turns it into page events)."""

    new_blocks: list[Block] = field(default_factory=list)
    migrations: list[Migration] = field(default_factory=list)
    evicted: list[tuple[int, int]] = field(default_factory=list)  # (bank, slot) of cached blocks given back


@dataclass
class PrefixCacheStats:
    """vLLM's PrefixCacheStats (vllm/v1/metrics/stats.py): one record per admission, preempted requests apart."""

    requests: int = 0
    queries: int = 0  # tokens the admitted requests asked for (vllm:prefix_cache_queries)
    hits: int = 0  # of those, found in the cache (vllm:prefix_cache_hits)
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0

    def record(self, num_tokens: int, num_hits: int, preempted: bool) -> None:
        if preempted:
            self.preempted_requests += 1
            self.preempted_queries += num_tokens
            self.preempted_hits += num_hits
        else:
            self.requests += 1
            self.queries += num_tokens
            self.hits += num_hits


def block_hash(parent: bytes, tokens: bytes) -> bytes:
    """Hash of a full block: its tokens and its prefix's hash (as vLLM's hash_block_tokens, sha256)."""
    return hashlib.sha256(parent + tokens).digest()


def hash_blocks(req: Request, bs: int) -> None:
    """Hashes of the request's full blocks of known tokens (prompt, then sampled output), kept on the request
    (vLLM's request.block_hashes)."""
    hashes = req.block_hashes
    full = (req.input_len + req.num_output_tokens) // bs  # req.num_tokens: called once per filled block
    if len(hashes) >= full:
        return
    tokens = req.token_ids
    for i in range(len(hashes), full):
        parent = hashes[-1] if hashes else ROOT_HASH
        hashes.append(block_hash(parent, tokens[i * bs : (i + 1) * bs].tobytes()))


class KVCacheManager:
    def __init__(self, allocator: KVAllocator, block_size: int, prefix_caching: bool) -> None:
        self.allocator = allocator
        self.pool = allocator.pool
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.req_to_blocks: dict[int, list[Block]] = {}
        self.num_cached_blocks: dict[int, int] = {}  # leading blocks of a request's table already cached
        self.blocks: dict[tuple[int, int], Block] = {}  # every block some request or the cache holds
        self.cached: dict[bytes, list[Block]] = {}
        self.evictable: OrderedDict[tuple[int, int], Block] = OrderedDict()
        self.version = 0  # bumps whenever a block table changes
        self.stats = PrefixCacheStats()
        # the policy's free queue holds the cached blocks too (vLLM's): it evicts them through reclaim
        self._one_queue = allocator.queues_cached_blocks(self._reclaim)
        self._evicting: list[tuple[int, int]] = []
        self._log: list[tuple[LogKind, int | None, list[tuple[int, int]]]] = []  # (kind, request, slots)

    # -- queries ---------------------------------------------------------------------------------------------
    def block_table(self, request_id: int) -> list[tuple[int, int]]:
        return [(b.bank, b.slot) for b in self.req_to_blocks.get(request_id, [])]

    @property
    def hit_rate(self) -> float:
        """vllm:prefix_cache_hits / vllm:prefix_cache_queries (requests never preempted)."""
        return self.stats.hits / self.stats.queries if self.stats.queries else 0.0

    def get_computed_blocks(self, req: Request) -> list[Block]:
        """The longest run of the request's leading full blocks found in the prefix cache (the first of
        duplicates, as BlockPool.get_cached_block). At least one token is always left to compute (its logits
        give the next token), as vLLM's max_cache_hit_length = num_tokens - 1."""
        if not self.prefix_caching:
            return []
        hash_blocks(req, self.block_size)
        hits = []
        for i, h in enumerate(req.block_hashes):
            if (i + 1) * self.block_size > req.num_tokens - 1:
                break
            same = self.cached.get(h)
            if not same:
                break
            hits.append(same[0])
        return hits

    def record_admission(self, req: Request, num_hit_tokens: int) -> None:  # vLLM: record_prefix_cache_stats
        if self.prefix_caching:
            self.stats.record(req.num_tokens, num_hit_tokens, req.num_preemptions > 0)

    # -- allocation ------------------------------------------------------------------------------------------
    def allocate_slots(self, req: Request, num_new_tokens: int, hits: list[Block] | None = None) -> Allocation | None:
        """Blocks for `num_new_tokens` more tokens of `req` (after `hits`, blocks found in the cache); None
        when the pool cannot hold them even after evicting every unused cached block. The blocks those tokens
        fill enter the prefix cache now (vLLM: allocate_slots -> cache_blocks)."""
        if num_new_tokens < 1:
            raise ValueError(f"request {req.request_id}: allocate_slots needs >= 1 token, got {num_new_tokens}")
        hits = hits or []
        table = self.req_to_blocks.setdefault(req.request_id, [])
        computed = req.num_computed_tokens + len(hits) * self.block_size
        need = -(-(computed + num_new_tokens) // self.block_size) - len(table) - len(hits)
        if need <= 0 and not hits:
            self.cache_blocks(req, computed + num_new_tokens)
            return Allocation()  # the tokens fit the request's last block: most decode steps
        if need == 1 and not hits and self._one_queue:  # a decode crossing a block boundary: most allocations
            has_room = self.pool.num_free + len(self.evictable) > 0
            return _take_block(self, req, table, computed + num_new_tokens) if has_room else None
        # cached hits no request uses are evictable: touching them takes them off that list
        reclaimable = sum(1 for b in hits if b.ref_cnt == 0) if hits else 0
        free = self.pool.num_free
        if need > free + len(self.evictable) - reclaimable:
            return None
        out = Allocation()
        for b in hits:
            if b.ref_cnt == 0:
                del self.evictable[(b.bank, b.slot)]
                self.allocator.touched(b.bank, b.slot)
            b.ref_cnt += 1
            table.append(b)
        if need > 0:
            self._new_blocks(req, need, free, out)
            table += out.new_blocks
        self.version += 1
        self.cache_blocks(req, computed + num_new_tokens)
        return out

    def allocate_boundary_blocks(self, reqs: list[Request]) -> list[Allocation] | None:
        """allocate_slots(req, 1) of each decode in `reqs` (in order) whose token starts a new block, in one call,
        when the policy is the one queue and the pool holds a block for each (none fails, none preempts: each take
        lowers num_free + len(evictable) by one); else None, nothing done (the caller takes the general path)."""
        if not self._one_queue or self.pool.num_free + len(self.evictable) < len(reqs):
            return None
        tables = self.req_to_blocks
        return [_take_block(self, r, tables[r.request_id], r.num_computed_tokens + 1) for r in reqs]

    def _new_blocks(self, req: Request, need: int, free: int, out: Allocation) -> None:
        if need > free and not self._one_queue:
            out.evicted = self._evict(need - free)
        owner = f"req{req.request_id}"
        grant = self.allocator.allocate(owner, need, "prefill" if req.is_prefill else "decode")
        assert grant is not None, f"{need} blocks for {owner}: the pool counted them free but placed none"
        if self._evicting:  # cached blocks the queue's head handed over (one queue)
            out.evicted, self._evicting = self._evicting, []
            self._log.append(("evict", None, out.evicted))
        for m in grant.migrations:
            self.evictable = _follow_migration(self.blocks, self.evictable, m)
        out.migrations = grant.migrations
        blocks, new = self.blocks, out.new_blocks
        for bank, slot in zip(grant.banks, grant.slots, strict=True):
            b = Block(bank, slot, 1)
            blocks[(bank, slot)] = b
            new.append(b)

    def cache_blocks(self, req: Request, num_tokens: int) -> None:
        """The request's full blocks within its first `num_tokens` tokens (capped at the tokens it knows) enter
        the prefix cache, duplicates included (vLLM: SingleTypeKVCacheManager.cache_blocks)."""
        if not self.prefix_caching:
            return
        rid = req.request_id
        full = min(num_tokens, req.input_len + req.num_output_tokens) // self.block_size  # at most its known tokens
        done = self.num_cached_blocks.get(rid, 0)
        if full <= done:
            return
        table = self.req_to_blocks.get(rid, [])
        hash_blocks(req, self.block_size)
        hashes = req.block_hashes
        for i in range(done, min(full, len(table))):
            b = table[i]
            if b.block_hash is None:
                b.block_hash = hashes[i]
                self.cached.setdefault(b.block_hash, []).append(b)
        self.num_cached_blocks[rid] = min(full, len(table))

    def free(self, req: Request) -> list[tuple[int, int]]:
        """The request lets go of its blocks (finished or preempted), tail first so that tail blocks are
        evicted first; returns the (bank, slot) of blocks given back to the pool (the rest stay cached)."""
        rid = req.request_id
        table = self.req_to_blocks.pop(rid, [])
        self.num_cached_blocks.pop(rid, None)
        owner = f"req{rid}"
        released, held, idle, cached = _let_go(table, self.blocks, self.evictable)
        kept = _pass_to_cache(self.pool, held, owner)
        if len(released) == 1:  # a request's partial last block, most often
            self.pool.release(*released[0])
        elif released:  # given back in one vectorised call
            self.pool.release_many([b for b, _ in released], [s for _, s in released])
        if idle:  # then to the policy's free list in eviction order, cached and uncached interleaved
            self.allocator.idle_many(idle, cached)
        self.allocator.tables.pop(owner, None)
        if table:
            self.version += 1
        self._log.append(("free", rid, released))
        if kept:
            self._log.append(("keep", rid, kept))
        return released

    def drain_log(self) -> list[tuple[LogKind, int | None, list[tuple[int, int]]]]:
        """Since the last call: ("free" | "keep" | "evict", request or None, slots given back | kept | evicted)."""
        log, self._log = self._log, []
        return log

    # -- internals -------------------------------------------------------------------------------------------
    def _uncache(self, where: tuple[int, int]) -> Block:
        """An unused cached block leaves the cache (BlockPool._maybe_evict_cached_block) and the pool."""
        b = self.evictable.pop(where)
        assert b.block_hash is not None and b.ref_cnt == 0, f"block {where} evictable but in use or unhashed"
        same = self.cached[b.block_hash]
        same.remove(b)
        if not same:
            del self.cached[b.block_hash]
        del self.blocks[where]
        self.pool.release(*where)
        return b

    def _reclaim(self, bank: int, slot: int) -> bool:
        """The one free queue's head is this slot: evict it if it is an unused cached block (not a tenant's)."""
        if (bank, slot) not in self.evictable:
            return False
        self._uncache((bank, slot))
        self._evicting.append((bank, slot))
        return True

    def _evict(self, n: int) -> list[tuple[int, int]]:
        """The article's policies: the least recently freed unused cached blocks go back to the pool."""
        out = []
        for _ in range(max(0, n)):
            where = next(iter(self.evictable))
            self._uncache(where)
            self.allocator.released(*where)
            out.append(where)
        if out:
            self._log.append(("evict", None, out))
        return out


def _take_block(m: KVCacheManager, req: Request, table: list[Block], num_tokens: int) -> Allocation:
    """m.allocate_slots of one new block without hits, for a one-queue policy (nothing to evict up front, no
    migrations) and a pool known to hold one: the same queue head, block and cache entries as the general path,
    in fewer calls."""
    where = m.allocator.take_one(f"req{req.request_id}", "prefill" if req.is_prefill else "decode")
    assert where is not None, f"a block for request {req.request_id}: the pool counted one free but placed none"
    b = Block(where[0], where[1], 1)
    m.blocks[where] = b
    table.append(b)
    out = Allocation([b])
    if m._evicting:  # the queue's head was an unused cached block
        out.evicted, m._evicting = m._evicting, []
        m._log.append(("evict", None, out.evicted))
    m.version += 1
    if num_tokens // m.block_size > m.num_cached_blocks.get(req.request_id, 0):  # (a decode's: never)
        m.cache_blocks(req, num_tokens)
    return out


def cache_filled_block(m: KVCacheManager, req: Request, num_tokens: int) -> None:
    """m.cache_blocks(req, num_tokens) for a decode whose token, the request's last known one, fills its last
    block (num_tokens = its known tokens, a multiple of the block size): one hash and one cache entry when
    the blocks before it are cached and hashed already (every decode but a resumed one's), else the general
    walk."""
    rid, bs, hashes = req.request_id, m.block_size, req.block_hashes
    i = num_tokens // bs - 1  # the block it fills
    table = m.req_to_blocks.get(rid)
    if not m.prefix_caching:
        return
    if len(hashes) != i or table is None or len(table) <= i or m.num_cached_blocks.get(rid, 0) != i:
        m.cache_blocks(req, num_tokens)
        return
    h = block_hash(hashes[-1] if i else ROOT_HASH, req.token_ids[i * bs : num_tokens].tobytes())
    hashes.append(h)
    m.num_cached_blocks[rid] = i + 1
    b = table[i]
    if b.block_hash is None:
        b.block_hash = h
        m.cached.setdefault(h, []).append(b)


def _let_go(table: list[Block], blocks: dict[tuple[int, int], Block], evictable: OrderedDict[tuple[int, int], Block]
            ) -> tuple[list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, int]], list[bool]]:
    """A request lets go of its table's blocks, tail first: each one's count drops; one no request uses any more
    leaves `blocks` (uncached) or joins `evictable` (cached). Returns the slots released to the pool, those held
    (by another request or the cache), those idle (in eviction order) and, parallel to them, which stay cached."""
    released: list[tuple[int, int]] = []
    held: list[tuple[int, int]] = []
    idle: list[tuple[int, int]] = []
    cached: list[bool] = []
    for b in reversed(table):
        n = b.ref_cnt = b.ref_cnt - 1
        assert n >= 0, f"block ({b.bank}, {b.slot}) freed more often than taken"
        where = (b.bank, b.slot)
        if n:
            held.append(where)
            continue
        idle.append(where)
        if b.block_hash is None:  # leaves the manager
            released.append(where)
            cached.append(False)
            del blocks[where]
        else:  # stays cached, evictable
            held.append(where)
            cached.append(True)
            evictable[where] = b
    return released, held, idle, cached


def _follow_migration(blocks: dict[tuple[int, int], Block], evictable: OrderedDict[tuple[int, int], Block],
                      m: Migration) -> OrderedDict[tuple[int, int], Block]:
    """A policy migrated a page to make room (bank-aware decode): the block follows its data, keeping its place
    in the eviction order. Returns the eviction order (rebuilt when the moved block was in it)."""
    key = (m.from_bank, m.from_slot)
    b = blocks.pop(key, None)
    if b is None:
        return evictable  # another tenant's page
    b.bank, b.slot = m.to_bank, m.to_slot
    blocks[(b.bank, b.slot)] = b
    if key not in evictable:
        return evictable
    return OrderedDict(((b.bank, b.slot) if k == key else k, v) for k, v in evictable.items())


def _pass_to_cache(pool: BlockPool, held: list[tuple[int, int]], owner: str) -> list[tuple[int, int]]:
    """Of the slots of blocks kept after `owner` let go of them, those it owned pass to the prefix cache (in one
    vectorised retag); they are returned, in order."""
    oid = pool.known_owner_id(owner)
    if not held or oid is None:
        return []
    at = np.array(held, dtype=np.int64)
    banks, slots = at[:, 0], at[:, 1]
    mine = pool.owner[banks, slots] == oid
    if mine.all():  # a request's own blocks: every one of them but those it found in the cache
        pool.retag_many(banks, slots, CACHE_OWNER, 0)
        return held
    if not mine.any():
        return []
    pool.retag_many(banks[mine], slots[mine], CACHE_OWNER, 0)
    return [w for w, m in zip(held, mine.tolist(), strict=True) if m]
