"""The offline report: the bank-map replay, and one self-contained HTML file per run."""

from __future__ import annotations

from layerscope.events import PageAllocEvent, PageEvictEvent, PageFreeEvent, PageMigrateEvent
from layerscope.export.report import PAGE_STATES, bank_grid

FREE, PREFILL, DECODE, HINT, TENANT, EVICTED = range(len(PAGE_STATES))


def test_bank_grid_replays_page_events_up_to_a_moment() -> None:
    events = [
        PageAllocEvent(t_us=0.0, owner="tenant", phase="idle", logical=[0], banks=[1], slots=[3]),
        PageAllocEvent(t_us=1.0, owner="seq0", phase="prefill", logical=[0, 1, 2], banks=[0, 1, 2], slots=[0, 0, 0]),
        PageAllocEvent(t_us=1.0, owner="hint", phase="prefill", logical=[0], banks=[2], slots=[1]),
        PageMigrateEvent(t_us=2.0, owner="seq0", logical=1, from_bank=1, from_slot=0, to_bank=0, to_slot=1,
                         bytes=1.0, dur_us=1.0),
        PageAllocEvent(t_us=3.0, owner="seq0", phase="decode", logical=[3], banks=[1], slots=[0]),
        PageEvictEvent(t_us=4.0, owner="seq0", logical=[0], banks=[0], slots=[0], bytes=1.0),
        PageFreeEvent(t_us=5.0, owner="tenant", banks=[1], slots=[3]),
    ]  # fmt: skip
    assert bank_grid(events, 1.5, banks=3, capacity=4) == [
        [PREFILL, FREE, FREE, FREE],
        [PREFILL, FREE, FREE, TENANT],
        [PREFILL, HINT, FREE, FREE],
    ]
    assert bank_grid(events, 10.0, banks=3, capacity=4) == [
        [EVICTED, PREFILL, FREE, FREE],  # the migrated page keeps its state in its new slot
        [DECODE, FREE, FREE, FREE],
        [PREFILL, HINT, FREE, FREE],
    ]
