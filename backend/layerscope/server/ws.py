"""The /ws endpoint: Origin check, one Session per client, a receive loop, a ticker and a sender task."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from layerscope.server.security import origin_allowed
from layerscope.server.session import ClientTooSlow, Session

log = logging.getLogger("layerscope.server")
router = APIRouter()


@dataclass
class LiveCounter:
    """Live sessions and their tasks, so tests can check that nothing leaks."""

    sessions: int = 0
    tasks: int = 0
    open: set[Session] = field(default_factory=set)  # for queue figures in /api/debug/sessions


@router.websocket("/ws")
async def websocket_endpoint(ws: WebSocket) -> None:
    settings, runs, live = ws.app.state.settings, ws.app.state.runs, ws.app.state.live
    if not origin_allowed(ws.headers.get("origin"), ws.headers.get("host"), settings.allowed_origins):
        log.warning("refused websocket from origin %s", ws.headers.get("origin"))
        await ws.close(code=1008, reason="origin not allowed")
        return
    await ws.accept()
    if live.sessions >= settings.max_sessions:
        log.warning("refused websocket: %d viewers already (max_sessions)", live.sessions)
        await ws.send_json({"type": "error", "message": f"server full: {settings.max_sessions} viewers at once"})
        await ws.close(code=1013, reason="server full, try again later")
        return
    session = Session(runs, settings)
    live.sessions += 1
    live.open.add(session)
    tasks = [asyncio.create_task(session.sender(ws.send_text)), asyncio.create_task(session.ticker())]
    live.tasks += len(tasks)
    try:
        await _receive_loop(ws, session, tasks)
    finally:
        session.close()  # cancels its pending load (and the simulation, if nobody else waits), lets go of its run
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t
        live.tasks -= len(tasks)
        live.sessions -= 1
        live.open.discard(session)


async def _receive_loop(ws: WebSocket, session: Session, tasks: list[asyncio.Task[None]]) -> None:
    try:
        while not any(t.done() for t in tasks):  # a failed sender (socket gone) ends the session
            msg = await ws.receive()
            if msg["type"] == "websocket.disconnect":
                return
            if msg.get("text") is not None:
                await session.handle_text(msg["text"])
            elif msg.get("bytes") is not None:
                session.handle_binary(msg["bytes"])
    except ClientTooSlow as e:
        log.warning("dropping websocket client: %s", e)
        with contextlib.suppress(Exception):
            await ws.close(code=1008, reason=str(e))
    except (WebSocketDisconnect, RuntimeError):
        return
