"""Security headers on every HTTP response: a strict CSP (no unsafe-eval) for the dashboard, a looser one for /docs."""

from __future__ import annotations

import re

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import Response

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
