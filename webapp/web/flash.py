"""One-time messages after a redirect ("Version 2 approved."), carried in a signed, short-lived cookie.

Post-redirect-get: a form's POST answers 303 to a page, and what that page should say rides in
a cookie, never in the URL. A message in the URL (`?flash=...`, `?error=...`) lets anyone craft a
link that makes the app say whatever they like ("Your session expired: sign in at evil.example");
a cookie can only be set by the app's own answers, and its value is signed with the secret key
(HMAC-SHA256, purpose-bound), so a tampered or forged one is ignored. The cookie is scoped to
the page it is meant for (its path), lives FLASH_SECONDS (and the signed body carries its own
expiry, so a replayed value goes stale even if a browser keeps it), and is consumed on read: the
page that shows it deletes it, so a reload does not repeat the message.

A copied value is no use elsewhere or twice (issue 41): the signed body names the browser session
it was made in (a hash of the session cookie; of the CSRF cookie before sign-in), so another
session ignores it, and carries a random nonce that the page showing it records in `flash_read`
(until the message would have expired anyway), so a second read, in this session or any, shows
nothing. Decisions and reasons: docs/security.md, "Flash messages are signed, not read from the URL".
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import secrets
import time
from typing import Literal, TypeVar
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, delete

from webapp.auth.models import FlashRead
from webapp.core.db import session_scope
from webapp.core.security import CSRF_COOKIE, SESSION_COOKIE

FLASH_COOKIE = "dd_flash"
FLASH_SECONDS = 120
FlashKind = Literal["ok", "error", "warn"]
R = TypeVar("R", bound=Response)


class Flash(BaseModel):
    """A message for the next page: its text, its kind, and an optional id of the row it is about."""

    text: str
    kind: FlashKind = "ok"
    ref: int | None = None  # e.g. the alert channel whose signing secret the page shows once
    path: str = "/"  # the page it is for
    expires: float = 0.0  # Unix time after which it is ignored
    bind: str = ""  # the browser session it was made in (bound_to)
    nonce: str = ""  # recorded when shown: a second read finds it taken


def _sign(secret_key: str, body: str) -> str:
    return hmac.new(secret_key.encode(), b"draftdesk-flash|" + body.encode(), hashlib.sha256).hexdigest()


def encode_flash(secret_key: str, message: Flash) -> str:
    """Return the cookie value of a message: signature '.' base64url(JSON) (cookie-safe for any text)."""
    body = base64.urlsafe_b64encode(message.model_dump_json().encode()).decode().rstrip("=")
    return _sign(secret_key, body) + "." + body


def redirect_with_flash(
    request: Request, url: str, *, text: str, kind: FlashKind = "ok", ref: int | None = None
) -> RedirectResponse:
    """Answer with 303 to `url` (a path of this app), leaving `text` for that page to show once."""
    response = RedirectResponse(url, status_code=303)
    set_flash(request, response, url, text=text, kind=kind, ref=ref)
    return response


def set_flash(
    request: Request, response: Response, url: str, *, text: str, kind: FlashKind = "ok", ref: int | None = None
) -> None:
    """Attach a one-time message for the page at `url` to a response (a redirect, or an htmx HX-Redirect)."""
    settings = request.app.state.settings
    path = urlsplit(url).path or "/"
    message = Flash(
        text=text, kind=kind, ref=ref, path=path, expires=time.time() + FLASH_SECONDS,
        bind=bound_to(request), nonce=secrets.token_hex(16),
    )  # fmt: skip
    response.set_cookie(
        FLASH_COOKIE, encode_flash(settings.secret_key, message), max_age=FLASH_SECONDS, path=path,
        httponly=True, samesite="strict", secure=settings.cookie_secure,
    )


def _raw_path(request: Request) -> str:
    # The path as the browser sent it (percent-encoded, like the cookie's path), not the decoded one.
    raw = request.scope.get("raw_path")
    return raw.decode("latin-1").split("?", 1)[0] if isinstance(raw, bytes) and raw else request.url.path


def bound_to(request: Request) -> str:
    """Return the browser session a message is bound to: a hash of its session cookie (else its CSRF cookie)."""
    cookie = request.cookies.get(SESSION_COOKIE) or request.cookies.get(CSRF_COOKIE) or ""
    return hashlib.sha256(b"draftdesk-flash-bind|" + cookie.encode()).hexdigest()[:32] if cookie else ""


def _first_read(request: Request, message: Flash) -> bool:
    """Record the message's nonce as shown; False when it was shown before (a replay)."""
    expires = dt.datetime.fromtimestamp(message.expires, dt.UTC)
    try:
        with session_scope(request.app.state.engine) as db:
            db.exec(delete(FlashRead).where(col(FlashRead.expires_at) < dt.datetime.now(dt.UTC)))
            db.add(FlashRead(nonce=message.nonce, expires_at=expires))
    except IntegrityError:
        return False
    return True


def read_flash(request: Request) -> Flash | None:
    """Return the message left for this page, once; None if absent, forged, stale, misdirected or shown before."""
    if hasattr(request.state, "flash"):
        return request.state.flash
    request.state.flash = message = _read_flash(request)
    return message


def _read_flash(request: Request) -> Flash | None:
    raw = request.cookies.get(FLASH_COOKIE, "")
    sig, _, body = raw.partition(".")
    if not body or not hmac.compare_digest(sig, _sign(request.app.state.settings.secret_key, body)):
        return None
    try:
        message = Flash.model_validate_json(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, ValidationError):
        return None
    if message.expires < time.time() or message.path != _raw_path(request):
        return None
    if not message.nonce or message.bind != bound_to(request):
        return None
    return message if _first_read(request, message) else None


def flash_context(request: Request) -> dict[str, str | None]:
    """Return the page's `flash` and `error` texts from the signed message (both None without one)."""
    message = read_flash(request)
    if message is None:
        return {"flash": None, "error": None}
    return {"flash": None if message.kind == "error" else message.text, "error": message.text if message.kind == "error" else None}


def consume_flash(request: Request, response: R) -> R:
    """Delete the message cookie the request carried, so that a reload shows it no more; return the response."""
    if FLASH_COOKIE in request.cookies:
        response.delete_cookie(FLASH_COOKIE, path=_raw_path(request))
    return response
