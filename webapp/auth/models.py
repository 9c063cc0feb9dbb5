"""Users, their roles, web sessions, API tokens and login attempts."""

from __future__ import annotations

import datetime as dt
from typing import ClassVar, Literal

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from webapp.core.timeutil import aware_datetime_type, utcnow

Role = Literal["labeler", "lead", "pm", "support_lead", "ml_lead", "admin"]
ROLES: tuple[str, ...] = ("labeler", "lead", "pm", "support_lead", "ml_lead", "admin")

# Token scopes that are not roles: what an agent's drafting tool may do through the API (ingest),
# what a Prometheus scraper may read (metrics: /-/metrics only), and what the team's CI may do
# (ci: push runs, drafts, datasets and KB revisions, read runs, checks and gates; webapp.web.deps).
EXTRA_SCOPES: tuple[str, ...] = ("ingest", "metrics", "ci")


class User(SQLModel, table=True):
    __tablename__: ClassVar[str] = "app_user"

    id: int | None = Field(default=None, primary_key=True)
    email: str = Field(max_length=254, unique=True, index=True)
    name: str = Field(default="", max_length=200)
    password_hash: str = Field(max_length=255)
    is_active: bool = True
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class UserRole(SQLModel, table=True):
    __tablename__: ClassVar[str] = "user_role"

    user_id: int = Field(foreign_key="app_user.id", primary_key=True, ondelete="CASCADE")
    role: str = Field(primary_key=True, max_length=20)
    # Who granted it: an admin (kept until an admin takes it away), or the identity provider's roles
    # claim at the last sign-in (replaced at every sign-in; see webapp/auth/oidc_accounts.py).
    source: str = Field(default="admin", max_length=10)


class WebSession(SQLModel, table=True):
    """A signed-in browser; the cookie holds a random token, the database only its SHA-256."""

    __tablename__: ClassVar[str] = "web_session"

    id: int | None = Field(default=None, primary_key=True)
    token_hash: str = Field(max_length=64, unique=True, index=True)
    user_id: int = Field(foreign_key="app_user.id", index=True, ondelete="CASCADE")
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    expires_at: dt.datetime = Field(sa_type=aware_datetime_type())
    # the last request seen (to the minute): a session idle for DRAFTDESK_SESSION_IDLE_MINUTES ends
    last_seen_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    ip: str = Field(default="", max_length=64)


class ApiToken(SQLModel, table=True):
    """A bearer token for /api/v1; stored as SHA-256, shown once, scoped and revocable."""

    __tablename__: ClassVar[str] = "api_token"

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="app_user.id", index=True, ondelete="CASCADE")
    name: str = Field(max_length=100)
    prefix: str = Field(max_length=12)
    token_hash: str = Field(max_length=64, unique=True, index=True)
    scopes: str = Field(max_length=200)
    # Who minted it: the owner themself, an admin for someone else (then only ingest/metrics/ci scopes,
    # see auth.service.create_token), or NULL for the operator's command line and tokens made before 0017.
    created_by: int | None = Field(default=None, foreign_key="app_user.id")
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    last_used_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    revoked_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split()


class LoginAttempt(SQLModel, table=True):
    __tablename__: ClassVar[str] = "login_attempt"

    id: int | None = Field(default=None, primary_key=True)
    email: str = Field(max_length=254, index=True)
    ip: str = Field(max_length=64, index=True)
    success: bool
    at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type(), index=True)


RoleSource = Literal["admin", "claim"]


class OidcIdentity(SQLModel, table=True):
    """A person at the identity provider (issuer + subject), linked to one user: never looked up by email."""

    __tablename__: ClassVar[str] = "oidc_identity"
    __table_args__ = (UniqueConstraint("issuer", "subject", name="uq_oidc_identity_issuer_subject"),)

    id: int | None = Field(default=None, primary_key=True)
    issuer: str = Field(max_length=255)
    subject: str = Field(max_length=255)
    user_id: int = Field(foreign_key="app_user.id", index=True, ondelete="CASCADE")
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    last_sign_in_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class OidcLoginRequest(SQLModel, table=True):
    """A sign-in sent to the identity provider and not yet back: only hashes, single use, ten minutes.

    The browser's `dd_oidc` cookie holds the PKCE code verifier; this row holds the SHA-256 of the
    state and of that verifier (webapp/auth/oidc.py says why the two halves live apart).
    """

    __tablename__: ClassVar[str] = "oidc_login_request"

    id: int | None = Field(default=None, primary_key=True)
    state_hash: str = Field(max_length=64, unique=True, index=True)
    verifier_hash: str = Field(max_length=64)
    next_path: str = Field(default="/", max_length=500)
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    expires_at: dt.datetime = Field(sa_type=aware_datetime_type(), index=True)
    used_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())


class AuditEvent(SQLModel, table=True):
    """One thing a person did that gives or uses authority (webapp/auth/audit.py); rows are only added.

    Who acted (`actor_id`; NULL for the operator's command line), with which credential (`credential`:
    "session 17", "token 5" or "command line"; a row id, never the secret), on whom (`subject_id`,
    the account an account, role or token action is about, or the author of the graded work), on what
    (`target`: "token 5", "pilot gate, run r1", "draft 12") and how (`detail`).
    """

    __tablename__: ClassVar[str] = "audit_event"

    id: int | None = Field(default=None, primary_key=True)
    at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type(), index=True)
    action: str = Field(max_length=40, index=True)
    actor_id: int | None = Field(default=None, foreign_key="app_user.id", index=True)
    credential: str = Field(default="command line", max_length=40)
    subject_id: int | None = Field(default=None, foreign_key="app_user.id", index=True)
    target: str = Field(default="", max_length=200)
    detail: str = Field(default="", max_length=500)


class FlashRead(SQLModel, table=True):
    """A one-time message already shown (webapp/web/flash.py): its nonce, kept until it would have expired."""

    __tablename__: ClassVar[str] = "flash_read"

    nonce: str = Field(primary_key=True, max_length=32)
    expires_at: dt.datetime = Field(sa_type=aware_datetime_type(), index=True)
