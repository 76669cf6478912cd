"""The cyclic garbage collector paused while a simulation runs.

A run allocates tens of thousands of long-lived objects (its events) and almost no reference cycles, so the
collector's passes (triggered by allocation counts) rescan a growing heap and find nothing: about a fifth of a
500-request serving run's CPU time (bench/README.md). Reference counting still frees everything that is not in
a cycle; what is, the collector takes once it runs again. On resuming, what the runs left alive (a first run's
price memo, tables and routing draws: ~157k objects) goes straight to the oldest generation (gc.freeze, then
gc.unfreeze: no traversal), as the engine does for a run's events: otherwise the first young pass after the pause
traversed them all to find them alive (72 ms of a cold 500-request `layerscope bench`, bench/README.md). Not
where the process keeps objects frozen itself (the server's cached runs, server/runs.py settle_heap): unfreezing
would hand those back to the collector's full passes.
Process-wide, so nested and concurrent runs (server threads) share one count: the collector resumes when the last
of them ends, if it was enabled before the first.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False
_was_frozen = False  # objects were frozen when the pause began (the server's): leave the generations alone


@contextmanager
def paused_gc() -> Iterator[None]:
    global _depth, _was_enabled, _was_frozen
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            _was_frozen = gc.get_freeze_count() > 0
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                if not _was_frozen:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()
