"""Helpers for the hardening tests: the server as a subprocess, and small asyncio websocket clients."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websockets

Msg = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
SHORT = "decode-pulses"  # 727 events, simulated in ~0.05 s
MAX_SPEED = 1e6


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """`python -m layerscope serve` on 127.0.0.1:port; its stderr goes to a file the tests can read."""

    def __init__(self, port: int | None = None, args: list[str] | None = None) -> None:
        self.port = port or free_port()
        self.args = args or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkstemp(prefix="layerscope-serve-", suffix=".log")[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def start(self, timeout_s: float = 30.0) -> None:
        cmd = [sys.executable, "-m", "layerscope", "serve", "--port", str(self.port), *self.args]
        with self.log.open("ab") as log:
            env = {k: v for k, v in os.environ.items() if k != "LAYERSCOPE_ALLOWED_HOSTS"}  # the real Host check
            self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log, env=env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"server exited: {self.log.read_text()[-2000:]}"
            try:
                if self.get("/healthz")["status"] == "ok":
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"server did not answer /healthz within {timeout_s} s")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def debug(self) -> dict[str, int]:
        return self.get("/api/debug/sessions")

    def rss_kib(self) -> int:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS in /proc status")

    def wait_idle(self, baseline_tasks: int | None = None, timeout_s: float = 15.0) -> dict[str, int]:
        """Poll the debug endpoint until no session is left (the server cleans up just after a close)."""
        deadline = time.monotonic() + timeout_s
        live = self.debug()
        while time.monotonic() < deadline:
            live = self.debug()
            settled = baseline_tasks is None or live["asyncio_tasks"] <= baseline_tasks
            if live["sessions"] == 0 and live["tasks"] == 0 and settled:
                return live
            time.sleep(0.1)
        return live


@dataclass
class Viewer:
    """What one client saw."""

    loaded: Msg | None = None
    frames: int = 0
    events: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    errors: list[Msg] = field(default_factory=list)
    dropped: int = 0
    ended: bool = False
    bytes: int = 0
    delays_ms: list[float] = field(default_factory=list)

    def take(self, raw: str | bytes) -> Msg:
        self.bytes += len(raw)
        m = json.loads(raw)
        if m["type"] == "frame":
            self.frames += 1
            self.events += len(m["events"])
            self.dropped = m["dropped_snapshots"]
            if m.get("created_ms") is not None:
                self.delays_ms.append(time.time() * 1000.0 - m["created_ms"])
            for e in m["events"]:
                self.kinds[e["kind"]] = self.kinds.get(e["kind"], 0) + 1
        elif m["type"] == "error":
            self.errors.append(m)
        elif m["type"] == "loaded":
            self.loaded = m
        elif m["type"] == "end":
            self.ended = True
        return m


async def recv_until(ws: Any, viewer: Viewer, kind: str, timeout_s: float = 30.0, limit: int = 100_000) -> Msg:
    """Read messages into `viewer` up to the first of type `kind` (bounded in count and time)."""
    async with asyncio.timeout(timeout_s):
        for _ in range(limit):
            m = viewer.take(await ws.recv())
            if m["type"] == kind:
                return m
    raise AssertionError(f"no {kind!r} within {limit} messages")


async def play_once(ws: Any, viewer: Viewer, scenario: str = SHORT, speed: float = MAX_SPEED) -> Viewer:
    await ws.send(json.dumps({"type": "load", "scenario": scenario}))
    await recv_until(ws, viewer, "loaded")
    await ws.send(json.dumps({"type": "play", "speed": speed}))
    await recv_until(ws, viewer, "end")
    return viewer


async def viewer_plays(url: str, scenario: str = SHORT, speed: float = MAX_SPEED, plays: int = 1) -> Viewer:
    viewer = Viewer()
    async with connect(url) as ws:
        for _ in range(plays):
            viewer.ended = False
            await play_once(ws, viewer, scenario, speed)
    return viewer


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def connect(url: str, **kw: Any) -> Any:
    """A websocket client that never goes through a proxy (loopback only) and takes big replay frames."""
    kw.setdefault("max_size", 64 * 2**20)
    return websockets.connect(url, proxy=None, **kw)


async def _gather(make: list[Any], timeout_s: float) -> list[Any]:
    async with asyncio.timeout(timeout_s):
        return list(await asyncio.gather(*(m() for m in make)))


def run_all(make: list[Any], timeout_s: float = 60.0) -> list[Any]:
    """Run coroutine factories concurrently in one event loop, all within `timeout_s`."""
    return asyncio.run(_gather(make, timeout_s))


class RawClient:
    """A minimal blocking websocket client over a plain socket, with a small receive buffer.

    Unlike a client library it buffers nothing of its own: when it stops reading, the server's writes block
    as soon as the kernel's socket buffers are full. Text frames only, no extensions; answers pings.
    """

    def __init__(self, port: int, rcvbuf: int | None = None, origin: str | None = None) -> None:
        self.sock = socket.socket()
        if rcvbuf is not None:  # small buffers stall sooner but drain slowly (one window per delayed ACK)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(30)
        self.sock.connect(("127.0.0.1", port))
        origin_line = f"Origin: {origin}\r\n" if origin else ""
        self.sock.sendall(
            (
                f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{origin_line}\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            assert chunk, "connection closed during the handshake"
            head += chunk
        self.status = int(head.split(b" ", 2)[1])

    def send_frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
        else:
            head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send_json(self, obj: Any) -> None:
        self.send_frame(0x1, json.dumps(obj).encode())

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 16))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> tuple[int, bytes]:
        b0, b1 = self._exact(2)
        n = b1 & 0x7F
        if n == 126:
            n = int.from_bytes(self._exact(2), "big")
        elif n == 127:
            n = int.from_bytes(self._exact(8), "big")
        return b0 & 0x0F, self._exact(n)

    def recv_json(self) -> Msg:
        """The next text message (continuation frames are not used by the server)."""
        for _ in range(1000):
            opcode, payload = self.recv_frame()
            if opcode == 0x1:
                return json.loads(payload)
            if opcode == 0x9:  # the server's keepalive ping
                self.send_frame(0xA, payload)
            if opcode == 0x8:
                raise ConnectionError(f"closed by server: {payload[2:].decode(errors='replace')}")
        raise AssertionError("no text frame")

    def close(self) -> None:
        self.sock.close()


# -- headless Chromium (Debian's build, as in tests/browser: Playwright's own download does not work here) ---------
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def js(page: Any, expr: str) -> Any:
    """Evaluated over the devtools protocol, so the page's CSP (no eval) does not block it."""
    return page.evaluate(f"() => ({expr})")


def wait(page: Any, expr: str, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := js(page, expr):
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {expr}")


# -- in-process helpers (TestClient) --------------------------------------------------------------------------------
def wait_for(cond: Any, timeout_s: float = 10.0) -> bool:
    """Poll `cond()` until it is true (the server finishes a close or a cancel shortly after the client's move)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


def ws_answer(client: Any, cmd: Msg) -> Msg:
    """The first message answering `cmd` on a fresh websocket of a TestClient."""
    with client.websocket_connect("/ws") as ws:
        ws.send_json(cmd)
        return ws.receive_json()


def answer_then_probe(client: Any, cmd: Msg) -> Msg:
    """The first answer to `cmd`; then the same connection loads the short preset (it stays usable)."""
    with client.websocket_connect("/ws") as ws:
        ws.send_json(cmd)
        first = ws.receive_json()
        ws.send_json({"type": "load", "scenario": SHORT})
        assert ws.receive_json()["type"] == "loaded"
    return first
