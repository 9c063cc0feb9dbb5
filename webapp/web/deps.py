"""Request dependencies: the current principal and named role checks."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from webapp.auth import audit
from webapp.auth import service as auth_service
from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.core.security import SESSION_COOKIE
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow


class NotAuthenticated(HTTPException):
    """No valid session or token: pages redirect to the login page, the API answers 401."""

    def __init__(self) -> None:
        super().__init__(status_code=401, detail="authentication required", headers={"WWW-Authenticate": "Bearer"})


def request_now(request: Request) -> dt.datetime:
    """Return the time a request is judged at: `app.state.clock()` when a test set one, else the clock."""
    clock = getattr(request.app.state, "clock", None)
    return clock() if clock is not None else utcnow()


def optional_principal(request: Request, session: SessionDep) -> Principal | None:
    """Return the caller from a bearer token or a session cookie, or None."""
    cached = getattr(request.state, "principal", None)
    if cached is not None:
        return cached
    principal: Principal | None = None
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        principal = auth_service.principal_from_api_token(session=session, token=auth[7:].strip())
        if principal is None:
            raise NotAuthenticated()
    else:
        token = request.cookies.get(SESSION_COOKIE)
        if token:
            principal = auth_service.principal_from_session_token(
                session=session,
                token=token,
                idle_minutes=request.app.state.settings.session_idle_minutes,
                now=request_now(request),
            )
    request.state.principal = principal
    audit.remember_principal(session=session, principal=principal)
    return principal


# The dependencies that do no I/O are `async def`: FastAPI runs a plain `def` dependency in a
# worker thread, a hop (and under load a wait for the interpreter lock) for a few comparisons.


async def current_principal(principal: Annotated[Principal | None, Depends(optional_principal)]) -> Principal:
    """Return the caller, or fail with 401."""
    if principal is None:
        raise NotAuthenticated()
    return principal


CurrentUser = Annotated[Principal, Depends(current_principal)]


# A signed-in person without any role (the first sign-in through the identity provider creates such an
# account, webapp/auth/oidc_accounts.py): every page says so instead of naming the role it needs.
WAITING_FOR_A_ROLE = (
    "You are signed in, but your account has no role yet: waiting for an admin to grant you a role. "
    "Ask your Draft Desk admin, then sign in again or reload this page."
)


class RoleCheck:
    """Dependency that admits a caller holding any of the given roles (403 otherwise)."""

    def __init__(self, *roles: str, scope: str | None = None) -> None:
        self.roles = frozenset(roles)
        self.scope = scope

    async def __call__(self, principal: CurrentUser) -> Principal:
        if self.scope is not None:
            if principal.has_scope(self.scope):
                return principal
            if not self.roles:
                raise HTTPException(status_code=403, detail=f"this call needs a token with the scope '{self.scope}'")
        if self.roles and not principal.has_role(*self.roles):
            if not principal.roles and principal.via == "session":
                raise HTTPException(status_code=403, detail=WAITING_FOR_A_ROLE)
            detail = f"this page needs the role {' or '.join(sorted(self.roles))}"
            if principal.via == "token" and principal.scopes & self.roles:
                detail += (
                    "; this token's role scopes do not act: it was minted by someone other than its owner "
                    "(such a token carries only ingest, metrics or ci), or its owner no longer holds the role"
                )
            raise HTTPException(status_code=403, detail=detail)
        return principal

    def __repr__(self) -> str:
        return f"RoleCheck({sorted(self.roles)}, scope={self.scope})"


def require_role(*roles: str) -> RoleCheck:
    """Admit callers holding any of the roles; use as Depends(require_role("lead"))."""
    return RoleCheck(*roles)


def require_scope(scope: str, *roles: str) -> RoleCheck:
    """Admit API-token callers with the scope (or, when roles are given, callers holding one of them)."""
    return RoleCheck(*roles, scope=scope)


ANY_ROLE = ("labeler", "lead", "pm", "support_lead", "ml_lead", "admin")


async def get_spec(request: Request) -> EvalSpec:
    """Return the application's eval spec."""
    return request.app.state.spec


SpecDep = Annotated[EvalSpec, Depends(get_spec)]


# The team's pipeline (issue 40): a `ci` token pushes runs, drafts, datasets and KB revisions and
# reads runs, checks and gates, nothing else. Decision: people who answer for what is deployed, the
# ML lead and the admin, may make the same calls with their session or a role token.
CI_SCOPE = "ci"
PIPELINE_ROLES = ("ml_lead", "admin")


def require_pipeline() -> RoleCheck:
    """Admit a `ci` token, or an ML lead or admin (session or role token): the pipeline's writes."""
    return RoleCheck(*PIPELINE_ROLES, scope=CI_SCOPE)


def readable_by_ci(*roles: str) -> RoleCheck:
    """Admit callers holding one of the roles, or a `ci` token: the reads the pipeline needs (runs, checks, gates)."""
    return RoleCheck(*roles, scope=CI_SCOPE)
