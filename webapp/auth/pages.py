"""Login and logout pages."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from webapp.auth import service
from webapp.db import SessionDep
from webapp.deps import SESSION_COOKIE, optional_principal
from webapp.security import new_csrf_seed
from webapp.templating import render

router = APIRouter()


def _safe_next(target: str | None) -> str:
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


def client_ip(request: Request) -> str:
    """Return the caller's address (the proxy is trusted to set the socket peer)."""
    return request.client.host if request.client else "unknown"


@router.get("/login", name="login_page")
def login_page(request: Request, session: SessionDep, next: str = "/") -> Response:
    """Show the login form (public); a signed-in user goes straight on."""
    if optional_principal(request, session):
        return RedirectResponse(_safe_next(next), status_code=303)
    return render(request, "auth/login.html", {"next": _safe_next(next), "error": None, "email": ""})


@router.post("/login")
def login(
    request: Request,
    session: SessionDep,
    email: Annotated[str, Form()],
    password: Annotated[str, Form()],
    next: Annotated[str, Form()] = "/",
) -> Response:
    """Check credentials, open a session, and redirect (public; rate-limited per account and address)."""
    settings = request.app.state.settings
    ip = client_ip(request)
    ctx = {"next": _safe_next(next), "email": email}
    if service.login_blocked(
        session=session,
        email=email,
        ip=ip,
        max_failures=settings.login_max_failures,
        window_minutes=settings.login_window_minutes,
    ):
        msg = f"Too many failed sign-ins. Try again in {settings.login_window_minutes} minutes."
        return render(request, "auth/login.html", {**ctx, "error": msg}, status_code=429)
    user = service.authenticate(session=session, email=email, password=password, ip=ip)
    if user is None:
        return render(request, "auth/login.html", {**ctx, "error": "Wrong email or password."}, status_code=401)
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


@router.post("/logout")
def logout(request: Request, session: SessionDep) -> Response:
    """End the session (public: signing out needs no role, only the CSRF token)."""
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        service.end_session(session=session, token=token)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
