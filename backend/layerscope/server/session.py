"""One playback session per websocket client: commands in, frames out through a bounded queue.

    receive loop ──▶ Session.handle_text ──▶ Playback (cursor, clock)
                                   ticker task ──┘  │ frames, control messages
                                                    ▼
                                   OutQueue (bounded; frames coalesce) ──▶ sender task ──▶ websocket

The sender is the only task that writes to the socket, so a client that reads slowly only fills its own
queue: when `queue_frames` frames are pending, new frames merge into the last one and superseded
bank/memory snapshots are dropped (counted in frame.dropped_snapshots, cumulative). Kernel, chunk, fault
and every other event are never dropped. Control messages (loaded, state, end, error) are never merged;
a client that lets more than `queue_control` of them pile up is disconnected.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from layerscope.protocol import (
    COMMAND_ADAPTER,
    MAX_MESSAGE_BYTES,
    MAX_REPLAY_BYTES,
    LoadCommand,
    PauseCommand,
    PlayCommand,
    SeekCommand,
    SpeedCommand,
    StepCommand,
)
from layerscope.server.load import CommandError, load_run, loaded_from_disk
from layerscope.server.playback import Events, Playback, merge_snapshots
from layerscope.server.runs import EncodedEvent, PreparedRun, RunCache, compact_dumps
from layerscope.server.settings import Settings

log = logging.getLogger("layerscope.server")
Message = dict[str, Any]
MAX_DEFERRED = 16  # commands a viewer may send while its load is pending (they apply once it is answered)


class ClientTooSlow(Exception):
    """The client let too many control messages pile up without reading them."""


class OutQueue:
    """Pending messages for one client, bounded: frames coalesce, control messages are capped."""

    def __init__(self, max_frames: int, max_control: int) -> None:
        self._items: deque[Message] = deque()
        self._max_frames, self._max_control = max_frames, max_control
        self._frames = 0
        self._ready = asyncio.Event()
        self.dropped_snapshots = 0  # cumulative, reported in every frame
        self.seq = 0

    def __len__(self) -> int:
        return len(self._items)

    def push_control(self, msg: Message) -> None:
        if len(self._items) - self._frames >= self._max_control:
            raise ClientTooSlow(f"more than {self._max_control} unread messages")
        self._items.append(msg)
        self._ready.set()

    def push_frame(self, t_us: float, events: Events, reset: bool = False) -> None:
        if reset:
            self.clear_frames()
        tail = self._items[-1] if self._items else None
        if not reset and self._frames >= self._max_frames and tail is not None and tail["type"] == "frame":
            tail["events"], dropped = merge_snapshots(tail["events"] + events)
            tail["t_us"] = t_us
            self.dropped_snapshots += dropped
        else:
            created = time.time() * 1000.0  # a merged frame keeps its first content's time: delay is the oldest's
            self._items.append({"type": "frame", "t_us": t_us, "events": events, "reset": reset, "created_ms": created})
            self._frames += 1
        self._ready.set()

    def clear_frames(self) -> None:
        """Forget unsent frames (a seek or a new load supersedes them); their snapshots count as dropped."""
        for m in self._items:
            if m["type"] == "frame":
                self.dropped_snapshots += sum(1 for e in m["events"] if e["kind"] in ("banks", "memory"))
        self._items = deque(m for m in self._items if m["type"] != "frame")
        self._frames = 0

    async def get(self) -> Message:
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        msg = self._items.popleft()
        if msg["type"] == "frame":
            self._frames -= 1
            self.seq += 1
            msg = {
                "type": "frame",
                "seq": self.seq,
                "t_us": msg["t_us"],
                "events": msg["events"],
                "dropped_snapshots": self.dropped_snapshots,
                "reset": msg["reset"],
                "created_ms": msg["created_ms"],
            }
        return msg


def parse_command(text: str) -> Any:
    size = len(text.encode())
    # Only a `load` replaying recorded events may be large; the substring test spares parsing anything else.
    limit = MAX_REPLAY_BYTES if '"events"' in text else MAX_MESSAGE_BYTES
    if size > limit:
        raise CommandError(f"message of {size} bytes is over the {limit}-byte limit")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise CommandError(f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:  # e.g. 60 000 nested '[': json.loads recurses once per level
        raise CommandError("invalid JSON: nested too deeply") from None
    except ValueError:  # an integer over Python's 4300-digit limit (int_max_str_digits)
        raise CommandError("invalid JSON: a number with too many digits") from None
    if not isinstance(data, dict):
        raise CommandError(f"a command is a JSON object, got {type(data).__name__}")
    if size > MAX_MESSAGE_BYTES and not (data.get("type") == "load" and data.get("events") is not None):
        raise CommandError(f"message of {size} bytes is over the {MAX_MESSAGE_BYTES}-byte limit")
    if "type" not in data:
        raise CommandError("missing field 'type'", "type")
    try:
        return COMMAND_ADAPTER.validate_python(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = [str(p) for p in err["loc"]]
        if err["type"] == "union_tag_invalid":
            raise CommandError(f"unknown command type {data['type']!r}", "type") from None
        field = (".".join(loc[1:]) or loc[0]) if loc else None  # loc[0] is the command type (the union tag)
        field = field and field.encode("utf-8", "backslashreplace").decode()  # a lone surrogate in a key
        raise CommandError(f"field '{field}': {err['msg']}", field) from None


class Session:
    """State of one client: the loaded run, its playback and its outgoing queue.

    A `load` runs as a task of its own, so the receive loop keeps reading: a newer load supersedes (cancels) it,
    and a client that leaves cancels it (close()); the simulation stops when nobody else waits for it. Playback
    commands are paced (Settings.commands_per_s, a token bucket: past it they wait), seeks coalesce (at most one
    applied per seek_interval_s, the latest wins), and a seek's rebuild and a large message's parsing run off the
    event loop.
    """

    def __init__(self, runs: RunCache, settings: Settings, clock: Callable[[], float] | None = None) -> None:
        self.runs, self.settings = runs, settings
        self.queue = OutQueue(settings.queue_frames, settings.queue_control)
        self.playback: Playback | None = None
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self._wake = asyncio.Event()
        self._load_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # held while a seek rebuilds in a worker thread: the ticker waits
        self._tokens, self._refilled = settings.commands_per_s, time.monotonic()
        self._seek_to: float | None = None
        self._seek_task: asyncio.Task[None] | None = None
        self._last_seek = -math.inf
        self._after_load: list[Any] = []

    # -- commands ------------------------------------------------------------------------
    async def handle_text(self, text: str) -> None:
        try:
            big = len(text) > MAX_MESSAGE_BYTES  # a recording: parsed and validated in a worker thread
            cmd = await asyncio.to_thread(parse_command, text) if big else parse_command(text)
            if not isinstance(cmd, LoadCommand) and self._load_task is not None and not self._load_task.done():
                self._defer(cmd)  # sent after a load: it applies to the run that load brings
                return
            await self._dispatch(cmd)
        except CommandError as e:
            self.error(str(e), e.field)

    def handle_binary(self, data: bytes) -> None:
        self.error(f"binary frames are not accepted ({len(data)} bytes); send JSON text")

    def error(self, message: str, field: str | None = None) -> None:
        log.info("client error: %s", message)
        self.queue.push_control({"type": "error", "message": message, "field": field})

    def _defer(self, cmd: Any) -> None:
        if len(self._after_load) >= MAX_DEFERRED:
            raise CommandError(f"more than {MAX_DEFERRED} commands sent while a load is pending", "type")
        self._after_load.append(cmd)

    async def _run_deferred(self) -> None:
        cmds, self._after_load = self._after_load, []
        for cmd in cmds:
            try:
                await self._dispatch(cmd)
            except CommandError as e:
                self.error(str(e), e.field)

    def close(self) -> None:
        """The client left: cancel its load (and so its simulation, if nobody else waits), let go of its run."""
        for task in (self._load_task, self._seek_task):
            if task is not None:
                task.cancel()
        run, self.playback = (self.playback.run if self.playback is not None else None), None
        self.queue = OutQueue(self.settings.queue_frames, self.settings.queue_control)  # drops `loaded`, frames
        if run is not None:
            self.runs.release(run)

    async def _dispatch(self, cmd: Any) -> None:
        if isinstance(cmd, LoadCommand):
            self._start_load(cmd)
            return
        pb = self.playback
        if pb is None:
            raise CommandError(f"no scenario loaded: send a 'load' command before '{cmd.type}'", "type")
        if isinstance(cmd, SeekCommand):
            if cmd.t_us > pb.end_us:
                raise CommandError(f"t_us {cmd.t_us:g} is past the end of the run ({pb.end_us:g} µs)", "t_us")
            await self._seek(pb, cmd.t_us)
            return
        await self._pace()
        async with self._lock:
            self._command(pb, cmd)
        self._send_state()

    async def _pace(self) -> None:
        """The viewer's command bucket (commands_per_s, bursts of as many): past it the command waits its turn, and
        the connection reads nothing meanwhile, so a flood slows its sender alone and every command is answered."""
        rate, now = self.settings.commands_per_s, time.monotonic()
        self._tokens = min(rate, self._tokens + (now - self._refilled) * rate)
        self._refilled = now
        if self._tokens < 1.0:
            await asyncio.sleep((1.0 - self._tokens) / rate)
            self._tokens, self._refilled = 1.0, time.monotonic()
        self._tokens -= 1.0

    def _command(self, pb: Playback, cmd: Any) -> None:
        now = self._clock()
        if isinstance(cmd, PlayCommand):
            if cmd.speed is not None:
                pb.set_speed(cmd.speed, now)
            if pb.at_end:
                self._push_rebuild(0.0, pb.seek(0.0, self.settings.seek_snapshots))
            pb.play(now)
            self._wake.set()
        elif isinstance(cmd, PauseCommand):
            pb.pause()
        elif isinstance(cmd, SpeedCommand):
            pb.set_speed(cmd.speed, now)
        elif isinstance(cmd, StepCommand):
            pb.pause()
            events = pb.step()
            if events:
                self.queue.push_frame(pb.t_us, events)
            else:
                self._send_end()

    async def _seek(self, pb: Playback, t_us: float) -> None:
        """Apply now if no seek was applied within seek_interval_s, else remember it: the latest pending seek is
        applied when the interval is over (a dragged slider sends dozens a second; only the last one matters)."""
        self._seek_to = t_us
        if self._seek_task is not None and not self._seek_task.done():
            return
        if time.monotonic() - self._last_seek >= self.settings.seek_interval_s:
            await self._apply_seek(pb)
        else:
            self._seek_task = asyncio.create_task(self._later_seeks(pb))

    async def _later_seeks(self, pb: Playback) -> None:
        while self._seek_to is not None and self.playback is pb:
            await asyncio.sleep(max(0.0, self._last_seek + self.settings.seek_interval_s - time.monotonic()))
            await self._apply_seek(pb)

    async def _apply_seek(self, pb: Playback) -> None:
        t_us, self._seek_to = self._seek_to, None
        if t_us is None or self.playback is not pb:
            return
        self._last_seek = time.monotonic()
        async with self._lock:
            events = await asyncio.to_thread(pb.seek, t_us, self.settings.seek_snapshots)
            if self.playback is not pb:  # a new run was loaded meanwhile
                return
            self._push_rebuild(t_us, events)
            pb.rebase(self._clock())
        self._send_state()

    def _push_rebuild(self, t_us: float, events: Events) -> None:
        """A reset frame, split so no frame holds more than max_frame_events (the rest follow at the same t_us)."""
        n = self.settings.max_frame_events
        for i in range(0, max(len(events), 1), n):
            self.queue.push_frame(t_us, events[i : i + n], reset=i == 0)

    def _start_load(self, cmd: LoadCommand) -> None:
        """At most one load pending per viewer: a newer one cancels the older."""
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
        self._load_task = asyncio.create_task(self._load_answered(cmd))

    async def _load_answered(self, cmd: LoadCommand) -> None:
        try:
            await self._load(cmd)
        except ClientTooSlow as e:  # the receive loop drops the client at its next message
            log.warning("dropping a load's answer: %s", e)

    async def _load(self, cmd: LoadCommand) -> None:
        early = await self._loaded_early(cmd)
        try:
            run = await load_run(self.runs, self.settings, cmd)
        except CommandError as e:
            self.error(str(e), e.field)
            await self._run_deferred()
            return
        self.runs.hold(run)
        if self.playback is not None:
            self.playback.pause()
        self.queue.clear_frames()
        if cmd.loaded and not early:
            self.queue.push_control(loaded_message(run))
        try:
            await run.finished()  # the streamed events, claims, tour: made after `loaded` (runs.finish)
        except asyncio.CancelledError:  # a newer load, or the viewer left: it never showed this run
            self.runs.release(run)
            raise
        except Exception:
            log.exception("preparing the rest of %s failed", run.spec.name)
            self.runs.release(run)
            self.error("simulation failed: internal error while preparing playback, in the server's log")
            await self._run_deferred()
            return
        if self.playback is not None:
            self.runs.release(self.playback.run)
        self._seek_to = None
        self.playback = Playback(run, self.settings.play_seconds, self.settings.max_frame_events)
        self.queue.clear_frames()
        self.queue.push_control(run.details)
        self._send_state()
        await self._run_deferred()

    async def _loaded_early(self, cmd: LoadCommand) -> bool:
        """A preset's `loaded` from the disk cache (server/diskcache.py), sent before its run is simulated, so a
        cold server's preset switch draws at once, as the page's first preset does (GET /api/loaded). The run
        shown so far stops; commands sent meanwhile wait for the new run, as during any pending load."""
        if not cmd.loaded:
            return False
        stored = await loaded_from_disk(self.runs, self.settings, cmd)
        if stored is None:
            return False
        if self.playback is not None:
            self.playback.pause()
        self.queue.clear_frames()
        self.queue.push_control(EncodedEvent({"type": "loaded"}, stored[1]))
        return True

    async def wait_loaded(self) -> None:
        """Until the pending load (if any) is answered (tests, and the receive loop's own ordering)."""
        if self._load_task is not None:
            await asyncio.wait({self._load_task})

    def _send_state(self) -> None:
        pb = self.playback
        if pb is not None:
            self.queue.push_control({"type": "state", "playing": pb.playing, "speed": pb.speed, "t_us": pb.t_us})

    def _send_end(self) -> None:
        assert self.playback is not None, "end without a run"
        self.queue.push_control({"type": "end", "summary": self.playback.run.summary})

    # -- tasks ---------------------------------------------------------------------------
    async def ticker(self) -> None:
        """Emit at most one frame per tick while playing; sleep on an event while paused.

        Ticks sit on a fixed grid (each deadline is the previous one plus tick_s), so the period is tick_s
        however long a tick's work takes; a ticker that fell more than a tick behind skips the missed ticks
        rather than bursting to catch up (the playback clock is wall time, so nothing is lost by skipping).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time()
        while True:
            pb = self.playback
            if self._lock.locked():  # a seek is rebuilding the playback in a worker thread
                await asyncio.sleep(self.settings.tick_s)
                continue
            if pb is None or not pb.playing:
                self._wake.clear()
                await self._wake.wait()
                deadline = loop.time()
                continue
            before = pb.t_us
            events = pb.advance(self._clock())
            if events or pb.t_us != before:  # empty frames too: the client's clock moves between events
                self.queue.push_frame(pb.t_us, events)
            if pb.at_end:
                pb.pause()
                self._send_end()
                self._send_state()
                continue
            deadline += self.settings.tick_s
            now = loop.time()
            if deadline < now - self.settings.tick_s:
                deadline = now
            await asyncio.sleep(deadline - now)

    async def sender(self, send_text: Callable[[str], Awaitable[None]]) -> None:
        while True:
            msg = await self.queue.get()
            await send_text(encode_message(msg))


def encode_message(msg: Message) -> str:
    """The JSON text of a message. A frame is assembled from its events' texts made once per run
    (EncodedEvent.text), so no viewer re-encodes the same events, and `loaded` is its run's text as it is (one
    json.dumps per run, not per viewer); the result parses to exactly what json.dumps(msg) would give."""
    if isinstance(msg, EncodedEvent):
        return msg.text
    if msg["type"] != "frame":
        return compact_dumps(msg)
    head = {k: v for k, v in msg.items() if k != "events"}
    # a list, not a generator: faster
    events = ",".join([e.text if type(e) is EncodedEvent else compact_dumps(e) for e in msg["events"]])
    return f'{compact_dumps(head)[:-1]},"events":[{events}]}}'


def loaded_message(run: PreparedRun) -> Message:
    """The same message (and text) for every viewer of the run: never mutate it."""
    return run.loaded
