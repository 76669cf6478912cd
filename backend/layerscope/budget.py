"""A run's budget, in the types the engine and the server share (the estimate itself: runtime/budget.py).

    Work                  what estimate_work(spec) answers: weighted engine steps, and the setting most responsible
    RunBudget.check(n)    called by the engine loops every CHECK_EVERY steps (runtime/budget.py) with the events made
                          so far: raises BudgetExceeded past the event or CPU budget, Cancelled once `cancel()` was
                          called (the client left, the server shuts down); the run stops within CHECK_EVERY steps
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Work:
    units: int  # weighted engine steps, main run and compare run together
    field: str  # the setting most responsible, for the refusal's message


class BudgetExceeded(ValueError):
    """A run passed its event or CPU budget while it ran."""


class Cancelled(Exception):
    """Nobody waits for the run any more (its clients left, or the server is shutting down)."""


YIELD_S = 0.004  # a custom run's pause per check while a preset simulates: ~one GIL switch interval (5 ms)


@dataclass
class RunBudget:
    """`yield_to`: while it is set (a viewer waits for a preset), each check pauses YIELD_S, so the preset's thread
    gets the GIL more often than one in three; every check also lets the event loop take the GIL (sleep(0))."""

    max_events: int
    max_cpu_s: float
    yield_to: threading.Event | None = None
    _cancel: threading.Event = field(default_factory=threading.Event)
    _cpu0: float | None = None

    def start(self) -> None:
        """In the thread that runs the simulation: its CPU time counts from here."""
        self._cpu0 = time.thread_time()

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def check(self, events: int) -> None:
        time.sleep(YIELD_S if self.yield_to is not None and self.yield_to.is_set() else 0.0)
        if self._cancel.is_set():
            raise Cancelled("the run was cancelled")
        if events > self.max_events:
            raise BudgetExceeded(
                f"this run passed the server's budget of {self.max_events} events per run and was stopped "
                "(fewer or shorter requests, a larger chunk_size or page_size)"
            )
        if self._cpu0 is not None and time.thread_time() - self._cpu0 > self.max_cpu_s:
            raise BudgetExceeded(
                f"this run passed the server's budget of {self.max_cpu_s:g} CPU-seconds per run and was stopped "
                "(fewer or shorter requests, numerics off or numerics_model tiny)"
            )
