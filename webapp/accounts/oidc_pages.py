"""Signing in through the identity provider: the start (a form POST from the login page) and the callback."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from webapp.accounts.signin import client_ip, safe_next, signed_in
from webapp.auth import oidc_accounts
from webapp.auth.oidc import CALLBACK_PATH, OidcClient, OidcRefused, nonce_for
from webapp.core.config import Settings
from webapp.core.db import SessionDep
from webapp.web.deps import request_now
from webapp.web.templating import render_view

router = APIRouter()
log = logging.getLogger("webapp.auth.oidc_pages")  # the name docs/deployment.md tells operators to look for, kept by the move

OIDC_COOKIE = "dd_oidc"
OIDC_COOKIE_PATH = "/login/oidc"


@dataclass(frozen=True)
class OidcErrorView:
    """A refused sign-in through the provider: what went wrong, in words, and the way back."""

    provider_name: str
    message: str


def _client(request: Request) -> OidcClient:
    client: OidcClient | None = getattr(request.app.state, "oidc", None)
    if client is None:
        raise HTTPException(status_code=404, detail="signing in through an identity provider is not configured here")
    return client


def _refused(request: Request, client: OidcClient, exc: OidcRefused) -> Response:
    """Render the refusal (no session, the pending sign-in's cookie gone) and log one line naming the reason."""
    log.warning("oidc sign-in refused: reason=%s detail=%s", exc.reason, exc.detail or exc.message)
    status = 502 if exc.reason == "unreachable" else 400
    view = OidcErrorView(provider_name=client.config.provider_name, message=exc.message)
    response = render_view(request, "auth/oidc_error.html", view, status_code=status)
    response.delete_cookie(OIDC_COOKIE, path=OIDC_COOKIE_PATH)
    return response


@router.post("/login/oidc", name="oidc_start")
def oidc_start(request: Request, session: SessionDep, next: Annotated[str, Form()] = "/") -> Response:
    """Send the browser to the identity provider (public; CSRF-checked like every POST)."""
    client = _client(request)
    settings: Settings = request.app.state.settings
    try:
        state, verifier = oidc_accounts.begin_sign_in(session=session, next_path=safe_next(next), now=request_now(request))
        url = client.authorization_url(state=state, nonce=nonce_for(settings.secret_key, verifier), verifier=verifier)
    except OidcRefused as exc:
        session.rollback()
        return _refused(request, client, exc)
    response = RedirectResponse(url, status_code=303)
    response.set_cookie(
        OIDC_COOKIE,
        verifier,
        httponly=True,
        samesite="lax",  # the provider's redirect back is a top-level GET from its site: Lax sends the cookie, Strict would not
        secure=settings.cookie_secure,
        max_age=oidc_accounts.LOGIN_REQUEST_MINUTES * 60,
        path=OIDC_COOKIE_PATH,
    )
    return response


@router.get(CALLBACK_PATH, name="oidc_callback")
def oidc_callback(
    request: Request,
    session: SessionDep,
    state: str | None = None,
    code: str | None = None,
    error: str | None = None,
    error_description: str | None = None,
) -> Response:
    """Finish a sign-in: check the state, exchange the code, validate the ID token, open a session (public)."""
    client = _client(request)
    settings: Settings = request.app.state.settings
    now = request_now(request)
    verifier = request.cookies.get(OIDC_COOKIE)
    try:
        pending = oidc_accounts.claim_sign_in(session=session, state=state, verifier=verifier, now=now)
        assert verifier is not None  # claim_sign_in refuses a missing cookie
        if error or not code:
            detail = f"provider answered error={error!r} ({error_description or 'no description'})" if error else "no code"
            raise OidcRefused("provider_error", f"{client.config.provider_name} did not sign you in. Start again from the login page.", detail)
        token = client.exchange(code=code, verifier=verifier)
        claims = client.claims(token=token, nonce=nonce_for(settings.secret_key, verifier), now=now)
        user = oidc_accounts.link_account(session=session, issuer=client.config.issuer, claims=claims, now=now)
        roles = client.config.roles_from_claims(claims)
        held = oidc_accounts.sync_claim_roles(session=session, user_id=user.id or 0, roles=roles)
    except OidcRefused as exc:
        # the pending sign-in stays marked used (committed with this answer); nothing else was written
        return _refused(request, client, exc)
    log.info("oidc sign-in: user=%s roles=%s", user.id, ",".join(sorted(held)) or "(none: waiting for an admin)")
    response = signed_in(request, session, user=user, next=pending.next_path, ip=client_ip(request))
    response.delete_cookie(OIDC_COOKIE, path=OIDC_COOKIE_PATH)
    return response
