import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layerscope.runtime.kv.allocator import EVICTED
from layerscope.runtime.kv.bank_aware import BankAwareAllocator
from layerscope.runtime.kv.block_pool import BlockPool
from layerscope.runtime.kv.naive import NaiveAllocator


def test_bank_aware_prefill_interleaves_and_decode_appends_next_door() -> None:
    alloc = BankAwareAllocator(BlockPool(banks=4, pages_per_bank=4))
    grant = alloc.allocate("s", 6, "prefill")
    assert grant is not None
    assert list(zip(grant.banks, grant.slots, strict=True)) == [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1)]
    grant = alloc.allocate("s", 2, "decode")
    assert grant is not None and not grant.migrations
    assert list(zip(grant.banks, grant.slots, strict=True)) == [(1, 2), (1, 3)]  # same bank as page 5, adjacent
    grant = alloc.allocate("s", 1, "decode")  # bank 1 is full: step to bank 2 (the walk's stride)
    assert grant is not None and (grant.banks, grant.slots) == ([2], [1])
    alloc.check()


def test_bank_aware_decode_migrates_a_neighbour_out_of_the_way() -> None:
    pool = BlockPool(banks=3, pages_per_bank=3)
    alloc = BankAwareAllocator(pool)
    alloc.allocate("s", 1, "prefill")  # page 0 -> (0, 0)
    pool.take("tenant", 0, 1, logical=0)  # someone sits in the adjacent slot
    grant = alloc.allocate("s", 1, "decode")
    assert grant is not None and (grant.banks, grant.slots) == ([0], [1])
    [m] = grant.migrations
    assert (m.owner, m.from_bank, m.from_slot, m.to_bank, m.to_slot, m.reason) == ("tenant", 0, 1, 1, 0, "make_room")
    assert pool.owner_name(int(pool.owner[1, 0])) == "tenant"
    alloc.check()


def test_naive_takes_the_first_free_address() -> None:
    pool = BlockPool(banks=2, pages_per_bank=3)
    pool.take("tenant", 1, 0, logical=0)
    alloc = NaiveAllocator(pool)
    grant = alloc.allocate("s", 4, "prefill")
    assert grant is not None
    assert list(zip(grant.banks, grant.slots, strict=True)) == [(0, 0), (0, 1), (1, 1), (0, 2)]
    assert alloc.allocate("s", 2, "decode") is None  # one page left: the shortage is a return value ...
    assert alloc.table("s") == [(0, 0), (0, 1), (1, 1), (0, 2)]  # ... and nothing changed
    assert pool.num_free == 1


def test_fragmented_pool_fails_a_contiguous_run_then_compaction_recovers() -> None:
    pool = BlockPool(banks=2, pages_per_bank=8)
    for bank in (0, 1):
        for slot in range(0, 8, 2):
            pool.take("tenant", bank, slot, logical=slot)  # every other slot held: half the pool free
    alloc = BankAwareAllocator(pool)
    assert pool.num_free == 8 and pool.largest_free_run() == 1
    assert alloc.reserve_hint("s", 3, first_decode_page=0) is None
    moves = alloc.compact(0)
    assert [(m.from_slot, m.to_slot) for m in moves] == [(2, 1), (4, 2), (6, 3)]
    assert {m.reason for m in moves} == {"compact"} and pool.largest_free_run(0) == 4
    assert alloc.reserve_hint("s", 3, first_decode_page=0) == (0, 4)
    grant = alloc.allocate("s", 2, "decode")  # decode pages come out of the reservation, in order
    assert grant is not None and grant.from_hint == 2 and (grant.banks, grant.slots) == ([0, 0], [4, 5])
    alloc.check()


def test_evicted_pages_are_restored_into_free_slots() -> None:
    pool = BlockPool(banks=2, pages_per_bank=2)
    alloc = BankAwareAllocator(pool)
    alloc.allocate("s", 3, "prefill")
    out = alloc.evict("s", 2)
    assert [p for p, _, _ in out] == [0, 1] and alloc.evicted("s") == [0, 1]
    assert alloc.table("s")[0] == (EVICTED, EVICTED) and pool.num_free == 3
    assert alloc.restore("s", 0) == (0, 0)
    assert alloc.evicted("s") == [1]
    alloc.check()


ops = st.lists(
    st.tuples(st.sampled_from(["prefill", "decode", "evict", "restore", "compact", "tenant", "free_tenant"]),
              st.integers(0, 7)),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(policy=st.sampled_from([BankAwareAllocator, NaiveAllocator]), banks=st.integers(1, 5),
       per_bank=st.integers(1, 6), ops=ops)
def test_no_page_is_lost_or_doubly_owned(policy: type, banks: int, per_bank: int, ops: list) -> None:
    pool = BlockPool(banks, per_bank)
    alloc = policy(pool)
    rng = np.random.default_rng(0)
    for op, n in ops:
        if op in ("prefill", "decode"):
            before = list(alloc.table("s"))
            grant = alloc.allocate("s", n % 3 + 1, op)
            if grant is None:
                assert alloc.table("s") == before  # a refused allocation changes nothing
            else:
                assert alloc.table("s")[: len(before)] == before or grant.migrations
        elif op == "evict":
            alloc.evict("s", n)
        elif op == "restore" and alloc.evicted("s"):
            alloc.restore("s", alloc.evicted("s")[0])
        elif op == "compact":
            for m in alloc.compact(n % banks):
                assert m.from_bank == m.to_bank and m.to_slot < m.from_slot
        elif op == "tenant" and pool.num_free:
            where = pool.first_free_any()
            assert where is not None
            pool.take("tenant", *where, logical=int(rng.integers(100)))
        elif op == "free_tenant":
            held = np.argwhere(pool.owner == pool.owner_id("tenant"))
            if len(held):
                pool.release(*map(int, held[n % len(held)]))
        alloc.check()  # every table entry owned by its owner at that logical page, no slot twice
        resident = [e for e in alloc.table("s") if e[0] != EVICTED]
        owned = int(np.count_nonzero(pool.owner == pool.owner_id("s")))
        assert owned == len(resident)  # no page lost: the pool and the table agree
        assert owned + pool.num_free + int(np.count_nonzero(pool.owner == pool.owner_id("tenant"))) == pool.num_pages


def test_compaction_moves_pages_out_to_other_banks_when_the_bank_alone_cannot_hold_the_run() -> None:
    pool = BlockPool(banks=3, pages_per_bank=4)
    for bank, slot in [(0, 0), (0, 2), (1, 1), (1, 3), (2, 0)]:
        pool.take("tenant", bank, slot, logical=4 * bank + slot)
    alloc = BankAwareAllocator(pool)
    assert pool.num_free == 7 and pool.largest_free_run() == 3
    assert alloc.reserve_hint("s", 4, first_decode_page=0) is None  # no bank has 4 free slots
    moves = alloc.compact(2, need=4)
    # bank 2's only page goes to the lowest free slot of the other bank with the most free slots (bank 0 wins ties)
    assert [(m.from_bank, m.from_slot, m.to_bank, m.to_slot) for m in moves] == [(2, 0, 0, 1)]
    assert pool.largest_free_run(2) == 4 and pool.num_free == 7  # nothing lost, nothing created
    assert alloc.reserve_hint("s", 4, first_decode_page=0) == (2, 0)
    alloc.check()
    with pytest.raises(ValueError, match="cannot fit in a bank of 4"):
        alloc.compact(0, need=5)


def test_compaction_stops_when_the_pool_has_no_room_elsewhere() -> None:
    pool = BlockPool(banks=2, pages_per_bank=2)
    for bank in (0, 1):
        for slot in (0, 1):
            pool.take("tenant", bank, slot, logical=2 * bank + slot)
    alloc = BankAwareAllocator(pool)
    assert alloc.compact(0, need=2) == [] and pool.num_free == 0


def test_a_failed_allocation_hands_its_pages_back_to_the_free_queue() -> None:
    from layerscope.runtime.kv.free_queue import FreeQueueAllocator

    pool = BlockPool(2, 4)  # 8 pages
    alloc = FreeQueueAllocator(pool)
    assert alloc.reserve_hint("req0", 1, 0) is not None  # a hint sends allocate() down the base class's page loop
    assert alloc.allocate("req0", 8, "prefill") is None  # 7 pages are free: it places 7, then rolls them back
    assert pool.num_free == 7 and alloc.table("req0") == []
    grant = alloc.allocate("req1", 7, "prefill")  # every one of them can still be handed out
    assert grant is not None and len(set(zip(grant.banks, grant.slots, strict=True))) == 7
