"""CSRF protection: a signed double-submit token, bound to the session, checked on every state-changing request.

The browser holds a random value in the HttpOnly cookie `dd_csrf`; forms carry
HMAC(secret, value + session cookie) in the field `csrf_token`, and htmx and fetch send it in the
header `X-CSRF-Token` (set once on <body hx-headers>). Requests authenticated by a bearer token carry
no ambient credentials, so they are exempt. The cookie is renewed at login so that a value
planted before login is useless after it; and since the token also covers the session cookie
(issue #33), a token (with its cookie) taken from another session, or from before sign-in, is
refused: a cookie planted into a signed-in browser does not bring a token that works there.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import logging
import secrets

from fastapi import HTTPException, Request

CSRF_COOKIE = "dd_csrf"
SESSION_COOKIE = "dd_session"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
CSRF_INVALID = "CSRF token missing or invalid; reload the page and try again"
SECURE_COOKIES_OVER_HTTP = (
    "this server marks cookies Secure, so the browser does not send them over plain HTTP; "
    "open it over HTTPS or set DRAFTDESK_SECURE_COOKIES=0"
)

log = logging.getLogger(__name__)


def new_csrf_seed() -> str:
    """Return a fresh random seed for the CSRF cookie."""
    return secrets.token_urlsafe(24)


def csrf_token_for(secret_key: str, seed: str, session_token: str | None = None) -> str:
    """Return the token a form or header must carry for a CSRF cookie seed and a session cookie (None: signed out)."""
    message = f"{seed}\x00{session_token or ''}"
    return hmac.new(secret_key.encode(), message.encode(), hashlib.sha256).hexdigest()


def csrf_seed(request: Request) -> str:
    """Return this request's CSRF seed: the cookie's, or a new one that middleware will set."""
    seed = getattr(request.state, "csrf_seed", None)
    if seed:
        return seed
    seed = request.cookies.get(CSRF_COOKIE) or new_csrf_seed()
    request.state.csrf_seed = seed
    return seed


def csrf_token(request: Request) -> str:
    """Return the CSRF token to embed in this request's page."""
    settings = request.app.state.settings
    return csrf_token_for(settings.secret_key, csrf_seed(request), request.cookies.get(SESSION_COOKIE))


def secure_cookies_over_plain_http(request: Request) -> bool:
    """Tell whether this request came over plain HTTP (after trusted proxy headers) while cookies are Secure.

    A request a proxy marked `X-Forwarded-Proto: https` is not counted: the browser is on HTTPS and
    keeps the cookies (that proxy is only missing from DRAFTDESK_FORWARDED_ALLOW_IPS).
    """
    if not request.app.state.settings.cookie_secure or request.url.scheme != "http":
        return False
    return request.headers.get("x-forwarded-proto", "").strip().lower() != "https"


def _loopback_host(host: str | None) -> bool:
    """Tell whether a browser treats this host as trustworthy: localhost, 127.0.0.0/8 or ::1."""
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def plain_http_notice_due(request: Request) -> bool:
    """Tell whether the login page should warn that signing in cannot work here (Secure cookies over HTTP).

    Not on a loopback address: Chromium and Firefox count http://127.0.0.1 and http://localhost as
    secure and keep Secure cookies there, so a developer's or an SSH tunnel's sign-in works.
    """
    return secure_cookies_over_plain_http(request) and not _loopback_host(request.url.hostname)


@functools.cache
def _warn_plain_http() -> None:
    """Log, once per process, that browsers on plain HTTP cannot sign in."""
    log.warning("a request over plain HTTP came without the CSRF cookie: %s", SECURE_COOKIES_OVER_HTTP)


async def csrf_protect(request: Request) -> None:
    """Reject a state-changing request without a valid CSRF token (bearer-token calls are exempt)."""
    if request.method in SAFE_METHODS:
        return
    if request.headers.get("authorization", "").lower().startswith("bearer "):
        return
    seed = request.cookies.get(CSRF_COOKIE)
    sent = request.headers.get(CSRF_HEADER)
    if sent is None:
        ctype = request.headers.get("content-type", "")
        if ctype.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            form = await request.form()
            value = form.get(CSRF_FIELD)
            sent = value if isinstance(value, str) else None
    secret = request.app.state.settings.secret_key
    expected = csrf_token_for(secret, seed, request.cookies.get(SESSION_COOKIE)) if seed else None
    if not expected or not sent or not hmac.compare_digest(expected, sent):
        if seed is None and secure_cookies_over_plain_http(request):
            _warn_plain_http()
            raise HTTPException(status_code=403, detail=f"CSRF token missing: {SECURE_COOKIES_OVER_HTTP}")
        raise HTTPException(status_code=403, detail=CSRF_INVALID)
