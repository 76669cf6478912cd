"""Security headers on every HTTP response: a strict CSP (no unsafe-eval) for the dashboard, a looser one for /docs;
a bound on request bodies; the Host and Origin checks (DNS rebinding, cross-site requests)."""

from __future__ import annotations

import asyncio
import ipaddress
import re
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from layerscope.server.settings import Settings

# Plotly injects <style> elements and sets inline styles, hence 'unsafe-inline' for styles only.
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "font-src 'self' data:; connect-src 'self' {ws}; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
# Swagger UI / ReDoc load their bundle from a CDN and bootstrap with an inline script.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; img-src 'self' data: https://fastapi.tiangolo.com; "
    "worker-src blob:; object-src 'none'; frame-ancestors 'none'"
)


_HOST_RE = re.compile(r"^[A-Za-z0-9.\-]+(:[0-9]{1,5})?$|^\[[0-9a-fA-F:]+\](:[0-9]{1,5})?$")


class SecurityHeaders:
    """A plain ASGI middleware (not BaseHTTPMiddleware, which keeps a route from seeing its client disconnect:
    a sweep whose client left must stop, server/sweep.py) adding the headers to every response's start."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        host = host if _HOST_RE.match(host) else ""  # never copy a hostile Host header into the policy
        docs = scope["path"] in ("/docs", "/redoc", "/docs/oauth2-redirect")
        csp = DOCS_CSP if docs else PAGE_CSP.format(ws=f"ws://{host} wss://{host}" if host else "")
        extra = {"Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                 "X-Frame-Options": "DENY", "Cross-Origin-Opener-Policy": "same-origin"}

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                out = MutableHeaders(scope=message)
                for name, value in extra.items():
                    if name not in out:
                        out[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


class BodyLimit:
    """Refuse a request body over `max_bytes` with 413 before anything parses it (a declared Content-Length is
    checked at once; a chunked body is counted as it arrives and buffered, so no route ever reads more)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        chunks, size, more = [], 0, True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunks.append(msg.get("body", b""))
            size += len(chunks[-1])
            more = msg.get("more_body", False)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
        whole: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:  # the buffered body once, then the client's own messages (disconnect)
            nonlocal whole
            msg, whole = whole, None
            return msg if msg is not None else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        text = f"request body over the {self.max_bytes}-byte limit"
        await JSONResponse({"detail": text}, status_code=413)(scope, receive, send)


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})


def host_name(host: str) -> str:
    """`example.org:8000` -> `example.org`, `[::1]:8000` -> `::1`, lower-case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_allowed(host: str | None, bound: str, allowed: list[str]) -> bool:
    """The Host a request names must be one the server is reached by: the bound host, loopback, or a listed name.
    A server bound to every interface also answers any IP address (a rebinding attack needs a name); a name it
    is reached by must be listed (--allowed-host)."""
    if host is None:
        return False
    name = host_name(host)
    if "*" in allowed or name in LOOPBACK_HOSTS or name == host_name(bound):
        return True
    if name in (host_name(a) for a in allowed):
        return True
    return bound in WILDCARD_BINDS and _is_ip(name)


def origin_allowed(origin: str | None, host: str | None, allowed: list[str]) -> bool:
    """No Origin (a non-browser client) or the page's own host: allowed; anything else must be listed."""
    if origin is None:
        return True
    if origin in allowed or "*" in allowed:
        return True
    return host is not None and host != "" and urlsplit(origin).netloc.lower() == host.lower()


CROSS_SITE = frozenset({"cross-site", "same-site"})  # Sec-Fetch-Site values of a request another site made


class RequestGuard:
    """Refuse, before any route runs: a Host the server is not reached by (403; a websocket is closed before it
    opens), a POST from a foreign Origin (403), and an export GET another site made (an <img> or <a> on any
    page: 403 by Sec-Fetch-Site, Origin or Referer). `settings` is read per request (tests change it)."""

    def __init__(self, app: ASGIApp, settings: Settings, guarded_gets: tuple[str, ...] = ()) -> None:
        self.app, self.settings, self.guarded_gets = app, settings, guarded_gets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        reason = self._refusal(scope, headers)
        if reason is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": reason})
        else:
            await JSONResponse({"detail": reason}, status_code=403)(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> str | None:
        s, host = self.settings, headers.get("host")
        if not host_allowed(host, s.host, s.allowed_hosts):
            return "host not allowed (start the server with --allowed-host NAME to serve it under that name)"
        if scope["type"] != "http":
            return None  # the websocket's own Origin check follows in its route
        origin = headers.get("origin")
        if scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            return None if origin_allowed(origin, host, s.allowed_origins) else "origin not allowed"
        if scope["path"] in self.guarded_gets:
            referer = urlsplit(headers.get("referer", ""))
            came_from = f"{referer.scheme}://{referer.netloc}" if referer.netloc else None
            foreign = headers.get("sec-fetch-site") in CROSS_SITE or not all(
                origin_allowed(o, host, s.allowed_origins) for o in (origin, came_from)
            )
            if foreign:
                return "exports are downloaded from the dashboard's own page (or POSTed), not from another site"
        return None


def header_deadline_protocol(timeout_s: float) -> type:
    """uvicorn's h11 protocol with a deadline on each request's head: a connection that has not sent a whole
    request line and headers `timeout_s` after it opened (or after its last response) is closed. uvicorn has no
    such timer of its own (its keep-alive timer stops at the first byte), so slowloris sockets stayed open."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadlineH11(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:  # armed only while no request head is in: close
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

        def handle_events(self) -> None:
            before = getattr(self, "scope", None)
            super().handle_events()
            if getattr(self, "scope", None) is not before:  # a whole request head arrived (or a websocket upgrade)
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request's head has its own deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadlineH11
