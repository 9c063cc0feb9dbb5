"""Opening a web session after a successful sign-in, whichever way it was made (password or identity provider)."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import RedirectResponse
from sqlmodel import Session

from webapp.auth import service
from webapp.auth.models import User
from webapp.core.config import Settings
from webapp.core.security import SESSION_COOKIE, new_csrf_seed


def safe_next(target: str | None) -> str:
    """Return `target` when it is a path on this site, else the home page."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


def client_ip(request: Request) -> str:
    """Return the caller's address (behind a proxy in DRAFTDESK_FORWARDED_ALLOW_IPS, the client's it reports)."""
    return request.client.host if request.client else "unknown"


def signed_in(request: Request, session: Session, *, user: User, next: str, ip: str) -> RedirectResponse:
    """Open a web session for a user and send the browser on with its cookie (passwords and the identity provider alike)."""
    settings: Settings = request.app.state.settings
    token = service.start_session(session=session, user=user, hours=settings.session_hours, ip=ip)
    response = RedirectResponse(safe_next(next), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        token,
        httponly=True,
        samesite="lax",
        secure=settings.cookie_secure,
        max_age=settings.session_hours * 3600,
        path="/",
    )
    # A new CSRF seed at login, so a value planted before sign-in is worthless after it.
    request.state.csrf_seed = new_csrf_seed()
    return response
