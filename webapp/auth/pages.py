"""Login and logout pages, and signing out everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse, Response

from webapp.auth import service
from webapp.auth.service import Principal
from webapp.core.config import Settings
from webapp.core.db import SessionDep
from webapp.core.security import (
    SECURE_COOKIES_OVER_HTTP,
    SESSION_COOKIE,
    new_csrf_seed,
    plain_http_notice_due,
)
from webapp.web.deps import ANY_ROLE, optional_principal, require_role
from webapp.web.templating import render_view

router = APIRouter()


def _safe_next(target: str | None) -> str:
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


def client_ip(request: Request) -> str:
    """Return the caller's address (behind a proxy in DRAFTDESK_FORWARDED_ALLOW_IPS, the client's it reports)."""
    return request.client.host if request.client else "unknown"


@dataclass(frozen=True)
class LoginView:
    """/login: the form, where to go after signing in, and why a sign-in failed or cannot work."""

    next: str
    email: str
    error: str | None
    plain_http_notice: str | None  # over plain HTTP with Secure cookies, why signing in cannot work


def login_view(request: Request, *, next: str | None, email: str, error: str | None) -> LoginView:
    """Build the login page (only safe local `next` targets are kept)."""
    notice = SECURE_COOKIES_OVER_HTTP[0].upper() + SECURE_COOKIES_OVER_HTTP[1:] + "."
    return LoginView(
        next=_safe_next(next), email=email, error=error, plain_http_notice=notice if plain_http_notice_due(request) else None
    )


def _login_limits(settings: Settings) -> service.LoginLimits:
    return service.LoginLimits(
        max_failures=settings.login_max_failures,
        account_max_failures=settings.login_account_max_failures,
        window_minutes=settings.login_window_minutes,
    )


@router.get("/login", name="login_page")
def login_page(request: Request, session: SessionDep, next: str = "/") -> Response:
    """Show the login form (public); a signed-in user goes straight on."""
    if optional_principal(request, session):
        return RedirectResponse(_safe_next(next), status_code=303)
    return render_view(request, "auth/login.html", login_view(request, next=next, email="", error=None))


@router.post("/login")
def login(
    request: Request,
    session: SessionDep,
    email: Annotated[str, Form()],
    password: Annotated[str, Form()],
    next: Annotated[str, Form()] = "/",
) -> Response:
    """Check credentials, open a session, and redirect (public; rate-limited per account and address)."""
    settings: Settings = request.app.state.settings
    ip = client_ip(request)
    try:
        user = service.sign_in(
            session=session, email=email, password=password, ip=ip, limits=_login_limits(settings)
        )
    except service.LoginBlocked:
        msg = f"Too many failed sign-ins. Try again in {settings.login_window_minutes} minutes."
        return render_view(request, "auth/login.html", login_view(request, next=next, email=email, error=msg), status_code=429)
    if user is None:
        view = login_view(request, next=next, email=email, error="Wrong email or password.")
        return render_view(request, "auth/login.html", view, status_code=401)
    token = service.start_session(session=session, user=user, hours=settings.session_hours, ip=ip)
    response = RedirectResponse(_safe_next(next), status_code=303)
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


def _signed_out(request: Request) -> Response:
    """Send the browser to the login page without its session cookie, with a fresh CSRF seed."""
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    request.state.csrf_seed = new_csrf_seed()
    return response


@router.post("/logout")
def logout(request: Request, session: SessionDep) -> Response:
    """End the session (public: signing out needs no role, only the CSRF token)."""
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        service.end_session(session=session, token=token)
    return _signed_out(request)


@router.post("/logout/everywhere", name="logout_everywhere")
def logout_everywhere(
    request: Request, session: SessionDep, principal: Principal = Depends(require_role(*ANY_ROLE))
) -> Response:
    """End every session of the signed-in user, in every browser (any role, for themselves only)."""
    service.end_all_sessions(session=session, user_id=principal.user_id)
    return _signed_out(request)
