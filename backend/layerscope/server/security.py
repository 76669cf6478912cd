"""Security headers on every HTTP response: a strict CSP (no unsafe-eval) for the dashboard, a looser one for /docs;
a bound on request bodies."""

from __future__ import annotations

import re

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


class SecurityHeaders(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        host = request.headers.get("host", "")
        host = host if _HOST_RE.match(host) else ""  # never copy a hostile Host header into the policy
        docs = request.url.path in ("/docs", "/redoc", "/docs/oauth2-redirect")
        csp = DOCS_CSP if docs else PAGE_CSP.format(ws=f"ws://{host} wss://{host}" if host else "")
        response.headers.setdefault("Content-Security-Policy", csp)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
        return response


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
