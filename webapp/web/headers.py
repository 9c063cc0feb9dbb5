"""The security headers every answer carries, and the CSRF cookie when a request minted its seed.

A plain ASGI middleware (not `@app.middleware("http")`, whose BaseHTTPMiddleware wraps every
response in a streaming copy and a task group: about a third of a bare request's server time).
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.requests import cookie_parser
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from webapp.core.security import CSRF_COOKIE
from webapp.web import csp

_DEFAULTS = (
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "same-origin"),
    ("Content-Security-Policy", csp.POLICY),
)


def _cookie_value(scope: Scope, name: str) -> str | None:
    """The cookie as `request.cookies` reads it (Starlette's parser)."""
    for key, value in scope.get("headers", ()):
        if key == b"cookie":
            return cookie_parser(value.decode("latin-1")).get(name)
    return None


class SecurityHeaders:
    """Add the default security headers (unless the route set its own) and set the CSRF cookie."""

    def __init__(self, app: ASGIApp, *, cookie_secure: bool) -> None:
        self.app = app
        self.cookie_secure = cookie_secure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                seed = scope.get("state", {}).get("csrf_seed")
                if seed and _cookie_value(scope, CSRF_COOKIE) != seed:
                    cookie = Response()
                    cookie.set_cookie(
                        CSRF_COOKIE, seed, httponly=True, samesite="lax", secure=self.cookie_secure, path="/"
                    )
                    headers.append("set-cookie", cookie.headers["set-cookie"])
                for name, value in _DEFAULTS:
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)
