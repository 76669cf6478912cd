"""The playback of one prepared run: a clock from simulated time to wall time, and the cursor of events sent.

Pure and synchronous (the session drives it), so it is tested without sockets or sleeps.

Speed is a multiplier: at speed 1 a whole run plays in `play_seconds` wall seconds (20 s by default) whatever
its simulated length, so a 2 ms prefill and a 2 s long-context run both read comfortably; speed 2 is twice as fast.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

from layerscope.events import MERGEABLE_KINDS
from layerscope.server.overview import clock
from layerscope.server.runs import PreparedRun

Events = list[dict[str, Any]]


def merge_snapshots(events: Events) -> tuple[Events, int]:
    """Keep only the latest event of each mergeable kind (in place of order); return them and how many went."""
    last: dict[str, int] = {}
    for i, e in enumerate(events):
        if e["kind"] in MERGEABLE_KINDS:
            last[e["kind"]] = i
    kept = [e for i, e in enumerate(events) if e["kind"] not in MERGEABLE_KINDS or last[e["kind"]] == i]
    return kept, len(events) - len(kept)


def merge_range(run: PreparedRun, start: int, end: int) -> Events:
    """merge_snapshots(run.events[start:end])[0], found from the run's snapshot index: a frame costs a slice or a few,
    not two Python passes over its events (per viewer and per tick: the server's main per-frame work at 50 viewers)."""
    idx = run.snapshot_index
    lo, hi = bisect_left(idx, start), bisect_left(idx, end)
    if hi - lo <= 1:
        return run.events[start:end]
    events = run.events
    last = {events[i]["kind"]: i for i in idx[lo:hi]}  # the last of each kind wins
    keep = set(last.values())
    out: Events = []
    prev = start
    for i in idx[lo:hi]:
        if i not in keep:
            out += events[prev:i]
            prev = i + 1
    out += events[prev:end]
    return out


def decimate_snapshots(events: Events, per_kind: int) -> Events:
    """Thin mergeable snapshots to about `per_kind` each, evenly in index, always keeping the last one."""
    idx: dict[str, list[int]] = {}
    for i, e in enumerate(events):
        if e["kind"] in MERGEABLE_KINDS:
            idx.setdefault(e["kind"], []).append(i)
    drop: set[int] = set()
    for positions in idx.values():
        if len(positions) > per_kind:
            stride = -(-len(positions) // per_kind)
            keep = set(positions[::-1][::stride])  # counted from the end so the latest survives
            drop.update(p for p in positions if p not in keep)
    return [e for i, e in enumerate(events) if i not in drop]


def extent_us(run: PreparedRun) -> float:
    """How far playback goes: the end of the run or of its compare run, whichever is later, when both count the same
    clock (article-vs-real's B runs 24.73 ms beside A's 5.81 ms; the dashboard draws both on one axis). A compare
    run on another clock (one layer's beside a serving run's whole-model time) has no place on this clock."""
    main, other = run.result, getattr(run.result, "compare", None)
    if other is None or main is None or clock(other) != clock(main):
        return run.duration_us
    ends = (e.t_us + e.dur_us if e.kind == "kernel" else e.t_us for e in other.events)
    return max(run.duration_us, max(ends, default=0.0))


class Playback:
    """Cursor and clock over one run. All times in simulated microseconds unless named `wall`."""

    def __init__(self, run: PreparedRun, play_seconds: float, max_frame_events: int) -> None:
        self.run = run
        self.end_us = extent_us(run)  # the playback's end: the longer of the two runs (see extent_us)
        self.play_seconds = play_seconds
        self.max_frame_events = max_frame_events
        self.cursor = 0  # index of the next event not yet sent
        self.t_us = 0.0
        self.speed = 1.0
        self.playing = False
        self._wall0 = 0.0
        self._t0 = 0.0

    # -- clock ---------------------------------------------------------------------------
    @property
    def rate(self) -> float:
        """Simulated µs per wall second."""
        return max(self.end_us, 1.0) / self.play_seconds * self.speed

    @property
    def at_end(self) -> bool:
        return self.cursor >= len(self.run.events) and self.t_us >= self.end_us

    def play(self, wall: float) -> None:
        self.playing, self._wall0, self._t0 = True, wall, self.t_us

    def pause(self) -> None:
        self.playing = False

    def set_speed(self, speed: float, wall: float) -> None:
        self.speed = speed
        if self.playing:  # rebase so the clock does not jump
            self._wall0, self._t0 = wall, self.t_us

    # -- frames --------------------------------------------------------------------------
    def advance(self, wall: float) -> Events:
        """Events due by the clock at `wall` (at most max_frame_events; the rest wait for the next tick)."""
        target = min(self._t0 + (wall - self._wall0) * self.rate, self.end_us)
        end = bisect_right(self.run.times, target)
        if end - self.cursor > self.max_frame_events:
            end = self.cursor + self.max_frame_events
            target = self.run.times[end - 1]
            self._wall0, self._t0 = wall, target  # the clock waits for the backlog instead of skipping it
        batch = merge_range(self.run, self.cursor, end)
        self.cursor, self.t_us = end, max(self.t_us, target)
        return batch

    def step(self) -> Events:
        """One batch: every event up to and including the next kernel launch (plus events at that same time).

        With no kernel left, the events at the next timestamp. Empty at the end of the run.
        """
        events, times, n = self.run.events, self.run.times, len(self.run.events)
        if self.cursor >= n:
            self.t_us = self.end_us
            return []
        j = self.cursor
        while j < n and events[j]["kind"] != "kernel":
            j += 1
        if j == n:
            j = self.cursor
        end = j + 1
        while end < n and times[end] == times[j] and events[end]["kind"] != "kernel":
            end += 1
        batch = merge_range(self.run, self.cursor, end)
        self.cursor, self.t_us = end, max(self.t_us, times[end - 1])
        return batch

    def seek(self, t_us: float, per_kind: int) -> Events:
        """Everything up to t_us, to rebuild state from scratch: mergeable snapshots thinned to `per_kind`."""
        end = bisect_right(self.run.times, t_us)
        self.cursor, self.t_us = end, t_us
        return decimate_snapshots(self.run.events[:end], per_kind)

    def rebase(self, wall: float) -> None:
        self._wall0, self._t0 = wall, self.t_us
