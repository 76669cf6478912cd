import numpy as np
import pytest

from layerscope.runtime.kv.block_pool import BlockPool


def test_take_release_and_free_list_order() -> None:
    pool = BlockPool(banks=2, pages_per_bank=4)
    pool.take("a", 0, 1, logical=0)
    pool.take("a", 0, 3, logical=1)
    assert pool.free_slots(0) == [0, 2]
    assert pool.free_slots(1) == [0, 1, 2, 3]
    assert pool.used_per_bank() == [2, 0] and pool.num_free == 6
    assert pool.first_free(0) == 0 and pool.first_free(0, start=1) == 2 and pool.first_free(0, start=3) is None
    pool.release(0, 1)
    assert pool.free_slots(0) == [0, 1, 2]
    pool.check()


def test_first_free_anywhere_walks_addresses_slot_major() -> None:
    pool = BlockPool(banks=3, pages_per_bank=2)
    order = []
    for i in range(6):
        where = pool.first_free_any()
        assert where is not None
        pool.take("a", *where, logical=i)
        order.append(where)
    assert order == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    assert pool.first_free_any() is None  # an expected shortage is a return value
    pool.release(1, 0)
    assert pool.first_free_any() == (1, 0)


def test_caller_mistakes_raise() -> None:
    pool = BlockPool(banks=2, pages_per_bank=2)
    pool.take("a", 0, 0, logical=0)
    with pytest.raises(ValueError, match="already owned"):
        pool.take("b", 0, 0, logical=0)
    with pytest.raises(ValueError, match="already free"):
        pool.release(1, 1)
    with pytest.raises(ValueError, match="outside the pool"):
        pool.take("a", 2, 0, logical=1)
    with pytest.raises(ValueError):
        BlockPool(0, 4)


def test_runs_of_adjacent_free_slots() -> None:
    pool = BlockPool(banks=2, pages_per_bank=8)
    for slot in (1, 4):
        pool.take("t", 0, slot, logical=slot)
    assert pool.largest_free_run(0) == 3  # slots 5, 6, 7
    assert pool.largest_free_run() == 8  # bank 1 is empty
    assert pool.find_run(2, 0) == 2 and pool.find_run(3, 0) == 5 and pool.find_run(4, 0) is None
    pool.take_many("t", np.array([1, 1]), np.array([0, 5]), np.array([0, 1]))
    assert pool.largest_free_run(1) == 4 and pool.num_free == 12
    pool.check()


def test_release_many_equals_one_release_each() -> None:
    one, many = BlockPool(3, 4), BlockPool(3, 4)
    where = [(b, s) for s in range(4) for b in range(3)]  # the whole pool taken
    for pool in (one, many):
        for i, (b, s) in enumerate(where):
            pool.take("r", b, s, i)
    where = [(0, 1), (2, 3), (1, 0)]
    for b, s in where[:3]:
        one.release(b, s)
    many.release_many([b for b, _ in where[:3]], [s for _, s in where[:3]])
    assert np.array_equal(one.owner, many.owner) and np.array_equal(one.logical, many.logical)
    assert np.array_equal(one.num_free_per_bank, many.num_free_per_bank) and one.num_free == many.num_free
    assert one.first_free_any() == many.first_free_any() == (1, 0)
    many.check()
    with pytest.raises(ValueError, match="already free"):
        many.release_many([2], [3])
    with pytest.raises(ValueError, match="outside the pool"):
        many.release_many([3], [0])


def test_largest_free_run_matches_a_walk_of_every_row_mostly_free_or_mostly_used() -> None:
    """The run is read from whichever is fewer, used or free slots: both ways agree with walking each row."""
    rng = np.random.default_rng(7)

    def walked(pool: BlockPool, bank: int | None) -> int:
        best = 0
        for b in range(pool.banks) if bank is None else [bank]:
            run = 0
            for s in range(pool.pages_per_bank):
                run = run + 1 if pool.is_free(b, s) else 0
                best = max(best, run)
        return best

    for _ in range(300):
        pool = BlockPool(int(rng.integers(1, 5)), int(rng.integers(1, 30)))
        share = rng.random()  # how full: from nearly empty to nearly full, both ways of reading it
        for b in range(pool.banks):
            for s in range(pool.pages_per_bank):
                if rng.random() < share:
                    pool.take("r", b, s, 0)
        assert pool.largest_free_run() == walked(pool, None)
        bank = int(rng.integers(0, pool.banks))
        assert pool.largest_free_run(bank) == walked(pool, bank)
