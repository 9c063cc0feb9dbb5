"""JSON API shapes of auth."""

from __future__ import annotations

from typing import Literal

from webapp.core.public import PublicModel


class WhoamiPublic(PublicModel):
    """The caller's identity, roles, token scopes and how they authenticated."""

    email: str
    name: str
    roles: list[str]
    scopes: list[str]
    via: Literal["session", "token"]
