"""JSON API: who am I."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from webapp.accounts.schemas import WhoamiPublic
from webapp.auth.models import EXTRA_SCOPES
from webapp.auth.service import Principal
from webapp.web.deps import ANY_ROLE, RoleCheck

router = APIRouter(tags=["auth"])


@router.get(
    "/whoami",
    summary="Who am I",
    description=(
        "Any person (session or role token) and an agent tool's `ingest` token checks which user, roles "
        "and token scopes the server sees, e.g. when an agent tool is set up. A `ci` token reaches only "
        "the pipeline's operations (403 here)."
    ),
)
def whoami(principal: Principal = Depends(RoleCheck(*ANY_ROLE, scope=EXTRA_SCOPES[0]))) -> WhoamiPublic:
    """Return the caller's identity, roles and token scopes."""
    return WhoamiPublic.of(principal, roles=sorted(principal.roles), scopes=sorted(principal.scopes))
