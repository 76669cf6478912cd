"""AddressQueue (the free queue's storage) against the one OrderedDict it stands for, operation by operation."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from layerscope.runtime.kv.address_queue import AddressQueue

BANKS, PAGES = 3, 4
SLOTS = [(b, s) for s in range(PAGES) for b in range(BANKS)]  # address order


class Model:
    """The queue as FreeQueueAllocator kept it before: one OrderedDict of every slot, address order first."""

    def __init__(self) -> None:
        self.q: OrderedDict[tuple[int, int], None] = OrderedDict.fromkeys(SLOTS)

    def popleft(self) -> tuple[int, int] | None:
        return self.q.popitem(last=False)[0] if self.q else None

    def push(self, where: tuple[int, int]) -> None:
        self.q[where] = None

    def push_front(self, where: tuple[int, int]) -> None:
        self.q[where] = None
        self.q.move_to_end(where, last=False)

    def remove(self, where: tuple[int, int]) -> None:
        self.q.pop(where, None)


ops = st.lists(st.tuples(st.sampled_from(["pop", "push", "push_many", "front", "remove"]), st.sampled_from(SLOTS)),
               max_size=60)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_every_operation_leaves_the_same_queue_as_the_ordered_dict(seq: list[tuple[str, tuple[int, int]]]) -> None:
    model, q = Model(), AddressQueue(BANKS, PAGES)
    for op, where in seq:
        if op == "pop":
            assert q.popleft() == model.popleft()
        elif op == "push":
            q.push(where)
            model.push(where)
        elif op == "push_many":
            q.push_many([where, SLOTS[0]])
            model.push(where)
            model.push(SLOTS[0])
        elif op == "front":
            q.push_front(where)
            model.push_front(where)
        else:
            q.remove(where)
            model.remove(where)
        assert list(q) == list(model.q) and len(q) == len(model.q)
        assert all((s in q) == (s in model.q) for s in SLOTS)


def test_a_fresh_queue_hands_out_every_slot_in_address_order_then_what_was_pushed() -> None:
    q = AddressQueue(2, 3)
    assert [q.popleft() for _ in range(3)] == [(0, 0), (1, 0), (0, 1)]
    q.push((1, 0))
    q.remove((1, 1))  # out of the never-used part's middle
    assert list(q) == [(0, 2), (1, 2), (1, 0)] and len(q) == 3 and (1, 1) not in q
    assert [q.popleft() for _ in range(4)] == [(0, 2), (1, 2), (1, 0), None]
