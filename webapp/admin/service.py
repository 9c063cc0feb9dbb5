"""Admin actions that go beyond the auth service: (de)activating users, the admin overview."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import ColumnElement, func
from sqlmodel import Session, SQLModel, col, delete, select

from webapp.auth import audit
from webapp.auth.models import ROLES, ApiToken, OidcIdentity, User, UserRole, WebSession
from webapp.auth.service import AuthError, list_tokens
from webapp.datasets.models import Dataset
from webapp.kb.models import KbArticle
from webapp.runs.models import Run


@dataclass(frozen=True)
class TokenRow:
    """An API token on the tokens page: its owner and who minted it (None: not recorded)."""

    token: ApiToken
    owner: User
    creator: User | None


def token_rows(*, session: Session) -> list[TokenRow]:
    """List every API token with its owner and its creator, newest first."""
    rows = list_tokens(session=session)
    creator_ids = {t.created_by for t, _ in rows if t.created_by is not None}
    creators = {u.id: u for u in session.exec(select(User).where(col(User.id).in_(creator_ids)))} if creator_ids else {}
    return [TokenRow(t, owner, creators.get(t.created_by)) for t, owner in rows]


def set_user_active(*, session: Session, user_id: int, active: bool, acting_user_id: int) -> User:
    """Activate or deactivate a user; deactivation also ends their web sessions at once."""
    user = session.get(User, user_id)
    if user is None:
        raise AuthError(f"user: no user with id {user_id}")
    if not active and user_id == acting_user_id:
        raise AuthError("user: you cannot deactivate yourself")
    user.is_active = active
    session.add(user)
    if not active:
        session.exec(delete(WebSession).where(col(WebSession.user_id) == user_id))
    session.flush()
    action = "user.activate" if active else "user.deactivate"
    audit.record(session=session, action=action, actor_id=acting_user_id, subject_id=user_id, target=f"user {user.email}")
    return user


def set_admin_roles(*, session: Session, user_id: int, roles: Iterable[str], acting_user_id: int) -> User:
    """Make an admin's grants to a user exactly `roles`; roles from the provider's claim stay (the claim decides them).

    A role the claim also gives becomes an admin's grant (it then stays when the claim drops it). An
    admin cannot take their own admin role away (nobody would be left to give it back).
    """
    user = session.get(User, user_id)
    if user is None:
        raise AuthError(f"user: no user with id {user_id}")
    wanted = set(roles)
    bad = sorted(wanted - set(ROLES))
    if bad:
        raise AuthError(f"role: {', '.join(bad)} is not one of {', '.join(ROLES)}")
    held = {r.role: r for r in session.exec(select(UserRole).where(UserRole.user_id == user_id)).all()}
    if user_id == acting_user_id and "admin" not in wanted and held.get("admin") and held["admin"].source == "admin":
        raise AuthError("role: you cannot take your own admin role away")
    def log(action: audit.AuditAction, role: str) -> None:
        audit.record(session=session, action=action, actor_id=acting_user_id, subject_id=user_id, target=f"role {role}")

    for role, row in held.items():
        if row.source == "admin" and role not in wanted:
            session.delete(row)
            log("role.remove", role)
        elif row.source == "claim" and role in wanted:
            row.source = "admin"
            session.add(row)
            log("role.grant", role)  # now an admin's grant: it stays when the claim drops it
    for role in sorted(wanted - held.keys()):
        session.add(UserRole(user_id=user_id, role=role, source="admin"))
        log("role.grant", role)
    session.flush()
    return user


@dataclass(frozen=True)
class RoleSources:
    """Who granted a user's roles, and whether they sign in through the identity provider."""

    by_claim: dict[int, frozenset[str]]
    through_provider: frozenset[int]


def role_sources(*, session: Session) -> RoleSources:
    """Return, per user, the roles the provider's claim gave, and the users linked to the provider."""
    by_claim: dict[int, set[str]] = {}
    for row in session.exec(select(UserRole).where(UserRole.source == "claim")).all():
        by_claim.setdefault(row.user_id, set()).add(row.role)
    linked = frozenset(session.exec(select(OidcIdentity.user_id)).all())
    return RoleSources({k: frozenset(v) for k, v in by_claim.items()}, linked)


@dataclass
class AdminOverview:
    users: int
    active_users: int
    tokens: int
    articles: int
    datasets: int
    runs: int


def overview(*, session: Session) -> AdminOverview:
    """Count what the admin looks after."""

    def count(model: type[SQLModel], *where: ColumnElement[bool]) -> int:
        return session.exec(select(func.count()).select_from(model).where(*where)).one()

    return AdminOverview(
        users=count(User),
        active_users=count(User, col(User.is_active).is_(True)),
        tokens=count(ApiToken, col(ApiToken.revoked_at).is_(None)),
        articles=count(KbArticle),
        datasets=count(Dataset),
        runs=count(Run),
    )
