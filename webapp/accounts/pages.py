"""Login and logout pages, and signing out everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from webapp.accounts import oidc_pages
from webapp.accounts.signin import client_ip, safe_next, signed_in
from webapp.auth import service
from webapp.auth.oidc import OidcClient
from webapp.auth.service import Principal
from webapp.core.config import Settings
from webapp.core.db import SessionDep, write_transaction
from webapp.core.security import (
    SECURE_COOKIES_OVER_HTTP,
    SESSION_COOKIE,
    new_csrf_seed,
    plain_http_notice_due,
)
from webapp.web import csp
from webapp.web.deps import ANY_ROLE, optional_principal, require_role
from webapp.web.templating import render_view

router = APIRouter()
router.include_router(oidc_pages.router)  # /login/oidc and its callback


PASSWORDS_OFF = "Signing in with a password is turned off here: use the identity provider's button on the login page."


@dataclass(frozen=True)
class LoginView:
    """/login: the form, where to go after signing in, and why a sign-in failed or cannot work."""

    next: str
    email: str
    error: str | None
    plain_http_notice: str | None  # over plain HTTP with Secure cookies, why signing in cannot work
    provider_name: str | None = None  # set: the "Sign in with <provider>" button
    password_login: bool = True  # off: no password form


def login_view(request: Request, *, next: str | None, email: str, error: str | None) -> LoginView:
    """Build the login page (only safe local `next` targets are kept)."""
    notice = SECURE_COOKIES_OVER_HTTP[0].upper() + SECURE_COOKIES_OVER_HTTP[1:] + "."
    settings: Settings = request.app.state.settings
    client: OidcClient | None = getattr(request.app.state, "oidc", None)
    return LoginView(
        next=safe_next(next), email=email, error=error, plain_http_notice=notice if plain_http_notice_due(request) else None,
        provider_name=client.config.provider_name if client else None, password_login=settings.password_login,
    )  # fmt: skip


def _login_limits(settings: Settings) -> service.LoginLimits:
    return service.LoginLimits(
        max_failures=settings.login_max_failures,
        account_max_failures=settings.login_account_max_failures,
        window_minutes=settings.login_window_minutes,
    )


def render_login(request: Request, view: LoginView, *, status_code: int = 200) -> Response:
    """Render the login page; with an identity provider, its policy lets the sign-in form lead there."""
    client: OidcClient | None = getattr(request.app.state, "oidc", None)
    headers = {"Content-Security-Policy": csp.policy_with_form_action(client.config.issuer)} if client else None
    return render_view(request, "auth/login.html", view, status_code=status_code, headers=headers)


@router.get("/login", name="login_page")
def login_page(request: Request, session: SessionDep, next: str = "/") -> Response:
    """Show the login form (public); a signed-in user goes straight on."""
    if optional_principal(request, session):
        return RedirectResponse(safe_next(next), status_code=303)
    return render_login(request, login_view(request, next=next, email="", error=None))


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
    if not settings.password_login:
        raise HTTPException(status_code=403, detail=PASSWORDS_OFF)
    ip = client_ip(request)
    try:
        # recorded as a failure and committed before the password is checked, so the check (argon2,
        # ~0.2 s) holds no lock: SQLite's one write lock is every other writer's (webapp/auth/service.py)
        with write_transaction(session):
            pending = service.begin_attempt(session=session, email=email, ip=ip, limits=_login_limits(settings))
    except service.LoginBlocked:
        msg = f"Too many failed sign-ins. Try again in {settings.login_window_minutes} minutes."
        return render_login(request, login_view(request, next=next, email=email, error=msg), status_code=429)
    ok = service.password_matches(pending, password)
    with write_transaction(session):
        user = service.finish_attempt(session=session, pending=pending, ok=ok)
        answer = None if user is None else signed_in(request, session, user=user, next=next, ip=ip)
    if answer is None:
        view = login_view(request, next=next, email=email, error="Wrong email or password.")
        return render_login(request, view, status_code=401)
    return answer


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
