"""JSON API: who am I."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from webapp.auth.models import EXTRA_SCOPES
from webapp.auth.schemas import WhoamiPublic
from webapp.auth.service import Principal
from webapp.web.deps import ANY_ROLE, RoleCheck

router = APIRouter(tags=["auth"])


@router.get("/whoami")
def whoami(principal: Principal = Depends(RoleCheck(*ANY_ROLE, scope=EXTRA_SCOPES[0]))) -> WhoamiPublic:
    """Return the caller's identity, roles and token scopes."""
    return WhoamiPublic(
        email=principal.email,
        name=principal.name,
        roles=sorted(principal.roles),
        scopes=sorted(principal.scopes),
        via=principal.via,
    )
