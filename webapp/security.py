"""CSRF protection: a signed double-submit token checked on every state-changing request.

The browser holds a random value in the HttpOnly cookie `dd_csrf`; forms carry
HMAC(secret, value) in the field `csrf_token`, and htmx and fetch send it in the header
`X-CSRF-Token` (set once on <body hx-headers>). Requests authenticated by a bearer token carry
no ambient credentials, so they are exempt. The cookie is renewed at login so that a value
planted before login is useless after it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from fastapi import HTTPException, Request

CSRF_COOKIE = "dd_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def new_csrf_seed() -> str:
    """Return a fresh random seed for the CSRF cookie."""
    return secrets.token_urlsafe(24)


def csrf_token_for(secret_key: str, seed: str) -> str:
    """Return the token a form or header must carry for a given cookie seed."""
    return hmac.new(secret_key.encode(), seed.encode(), hashlib.sha256).hexdigest()


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
    return csrf_token_for(request.app.state.settings.secret_key, csrf_seed(request))


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
    expected = csrf_token_for(request.app.state.settings.secret_key, seed) if seed else None
    if not expected or not sent or not hmac.compare_digest(expected, sent):
        raise HTTPException(status_code=403, detail="CSRF token missing or invalid; reload the page and try again")
