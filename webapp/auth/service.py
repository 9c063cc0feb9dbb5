"""Passwords, web sessions, API tokens and the login rate limit."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import ColumnElement, bindparam, func, text
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, delete, select

from webapp.auth import audit
from webapp.auth.models import EXTRA_SCOPES, ROLES, ApiToken, LoginAttempt, User, UserRole, WebSession
from webapp.core.db import is_sqlite, stored_id
from webapp.core.timeutil import as_utc, utcnow

_hasher = PasswordHasher()
TOKEN_PREFIX = "dd_"


class AuthError(ValueError):
    """A user, role, token or password request that cannot be honoured."""


# How a request authenticated: a browser session cookie or an API token.
AuthVia = Literal["session", "token"]


@dataclass(frozen=True)
class Principal:
    """Who is making a request: a user, their effective roles, and how they authenticated."""

    user_id: int
    email: str
    name: str
    roles: frozenset[str]
    via: AuthVia = "session"
    scopes: frozenset[str] = field(default_factory=frozenset)
    # the web session's or API token's row id (the audit log names it; never the secret)
    credential_id: int | None = None
    # who minted the API token when not its owner (an admin's ingest token for an agent), else None
    minted_by: int | None = None

    def has_role(self, *roles: str) -> bool:
        return bool(self.roles.intersection(roles))

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def display(self) -> str:
        return self.name or self.email


def sha256_hex(value: str) -> str:
    """Return the hex SHA-256 of a token; tokens are random, so a fast hash is the right one."""
    return hashlib.sha256(value.encode()).hexdigest()


def hash_password(password: str) -> str:
    """Hash a password with Argon2id."""
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """Check a password against its Argon2 hash."""
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def user_roles(*, session: Session, user_id: int) -> frozenset[str]:
    """Return the roles a user holds."""
    return frozenset(session.exec(select(UserRole.role).where(UserRole.user_id == user_id)).all())


def create_user(*, session: Session, email: str, password: str, roles: Iterable[str], name: str = "") -> User:
    """Create a user with the given roles; refuse unknown roles, duplicates and short passwords."""
    email = email.strip().lower()
    roles = sorted(set(roles))
    if not email or "@" not in email:
        raise AuthError(f"email: {email!r} is not an email address")
    bad = [r for r in roles if r not in ROLES]
    if bad or not roles:
        raise AuthError(f"role: {', '.join(bad) or '(none)'} is not one of {', '.join(ROLES)}")
    if len(password) < 8:
        raise AuthError("password: must be at least 8 characters")
    if session.exec(select(User).where(User.email == email)).first():
        raise AuthError(f"email: a user with {email} already exists")
    user = User(email=email, name=name, password_hash=hash_password(password))
    session.add(user)
    session.flush()
    for role in roles:
        session.add(UserRole(user_id=stored_id(user.id), role=role))
    session.flush()
    audit.record(session=session, action="user.create", subject_id=user.id, target=f"user {email}")
    for role in roles:
        audit.record(session=session, action="role.grant", subject_id=user.id, target=f"role {role}")
    return user


def get_user_by_email(*, session: Session, email: str) -> User | None:
    """Find a user by email, case-insensitively."""
    return session.exec(select(User).where(User.email == email.strip().lower())).first()


def principal_for_user(*, session: Session, user: User, via: AuthVia = "session") -> Principal:
    """Build the Principal of a signed-in user."""
    assert user.id is not None
    return Principal(user.id, user.email, user.name, user_roles(session=session, user_id=user.id), via)


# --- login rate limit ---------------------------------------------------------------------------
#
# Decision (issue #33): failures are counted per (account, address), not per account. Five wrong
# passwords from one address lock that address out of that account for the window; the account's
# owner signing in from elsewhere is not affected, so nobody can keep the PM out on sign-off day by
# guessing. Guessing spread over many addresses meets the per-account ceiling
# (DRAFTDESK_LOGIN_ACCOUNT_MAX_FAILURES, 50 in the window): past it, only addresses that have signed
# this account in before (a successful attempt still kept, see login_attempt_retention_days) may try.
# One address also has a ceiling over all accounts (4 x the per-account limit: an office shares one
# address between many agents), against one address trying one password on every account.
#
# Counting is race-safe: the check and the record of the attempt, as a failure until its password
# is found right, run under a lock on the account and one on the address (PostgreSQL advisory
# transaction locks; SQLite's write lock) and commit together (begin_attempt), so concurrent tries
# see each other as failures. The password is checked after that commit (argon2, ~0.2 s): until
# 6 December the check ran inside the locked transaction, which on SQLite held the one write lock
# for it and made every save and events batch of that moment wait (bench_realistic: a sign-in held
# the lock 193 ms at p50). finish_attempt then records a right password as a success.


class LoginBlocked(Exception):
    """Too many failed sign-ins: the password was not checked."""


@dataclass(frozen=True)
class LoginLimits:
    """The failed sign-in limits (DRAFTDESK_LOGIN_*)."""

    max_failures: int
    account_max_failures: int
    window_minutes: int

    @property
    def address_max_failures(self) -> int:
        """Failures from one address to any accounts before the address is refused."""
        return self.max_failures * 4


# PostgreSQL: one advisory lock per account and per address (a 64-bit hash of the name, in the database)
_ADVISORY_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")


def _lock_attempts(*, session: Session, email: str, ip: str) -> None:
    """Hold the sign-in locks of this account and this address until the transaction ends.

    Always the account's first, then the address's: no request holding an address lock waits for
    an account lock, so two requests never wait for each other.
    """
    if is_sqlite(session):
        return  # signing in is a POST: its transaction holds SQLite's one write lock, which serialises every attempt
    conn = session.connection()
    conn.execute(_ADVISORY_LOCK, {"key": f"login-email:{email}"})
    conn.execute(_ADVISORY_LOCK, {"key": f"login-ip:{ip}"})


def _failures(*, session: Session, since: dt.datetime, where: Iterable[ColumnElement[bool]]) -> int:
    query = (
        select(func.count())
        .select_from(LoginAttempt)
        .where(col(LoginAttempt.success).is_(False), col(LoginAttempt.at) >= since, *where)
    )
    return session.exec(query).one()


def _known_address(*, session: Session, email: str, ip: str) -> bool:
    """Tell whether this account has signed in from this address (within the attempts kept)."""
    query = select(LoginAttempt.id).where(
        LoginAttempt.email == email, LoginAttempt.ip == ip, col(LoginAttempt.success).is_(True)
    )
    return session.exec(query.limit(1)).first() is not None


def login_blocked(
    *, session: Session, email: str, ip: str, limits: LoginLimits, now: dt.datetime | None = None
) -> bool:
    """Tell whether this address may not try this account now (see the limits above)."""
    email = email.strip().lower()
    since = (now or utcnow()) - dt.timedelta(minutes=limits.window_minutes)
    pair = _failures(session=session, since=since, where=(col(LoginAttempt.email) == email, col(LoginAttempt.ip) == ip))
    if pair >= limits.max_failures:
        return True
    if _failures(session=session, since=since, where=(col(LoginAttempt.ip) == ip,)) >= limits.address_max_failures:
        return True
    account = _failures(session=session, since=since, where=(col(LoginAttempt.email) == email,))
    return account >= limits.account_max_failures and not _known_address(session=session, email=email, ip=ip)


@dataclass(frozen=True)
class PendingAttempt:
    """A sign-in attempt recorded as a failure, its password not checked yet (begin_attempt)."""

    attempt_id: int
    user_id: int | None  # None: no such account
    password_hash: str | None  # None: no account, or an inactive one (never signs in)


def begin_attempt(*, session: Session, email: str, ip: str, limits: LoginLimits) -> PendingAttempt:
    """Within the limits, record an attempt as failed until its password is found right; commit it before the check.

    Raises LoginBlocked, recording nothing, when this address is over a limit for this account.
    """
    email = email.strip().lower()
    _lock_attempts(session=session, email=email, ip=ip)
    if login_blocked(session=session, email=email, ip=ip, limits=limits):
        raise LoginBlocked(email)
    user = get_user_by_email(session=session, email=email)
    attempt = LoginAttempt(email=email, ip=ip, success=False)
    session.add(attempt)
    session.flush()
    if user is None:
        return PendingAttempt(stored_id(attempt.id), None, None)
    return PendingAttempt(stored_id(attempt.id), user.id, user.password_hash if user.is_active else None)


def password_matches(pending: PendingAttempt, password: str) -> bool:
    """Check the attempt's password (no database): an unknown account spends the same time on a dummy hash."""
    if pending.user_id is None:
        verify_password(_dummy_hash(), password)  # so the answer does not tell which emails exist
        return False
    return pending.password_hash is not None and verify_password(pending.password_hash, password)


def finish_attempt(*, session: Session, pending: PendingAttempt, ok: bool) -> User | None:
    """Record a right password as the attempt's success and return its user; a wrong one stays a failure (None).

    The account is read again: deactivated, or its password changed, during the check (which ran
    outside the transaction), the attempt stays a failure.
    """
    if not ok or pending.user_id is None:
        return None
    # populate_existing: the session keeps the row begin_attempt read (expire_on_commit=False); read it again
    user = session.get(User, pending.user_id, populate_existing=True)
    if user is None or not user.is_active or user.password_hash != pending.password_hash:
        return None
    attempt = session.get(LoginAttempt, pending.attempt_id)
    if attempt is not None:
        attempt.success = True
        session.add(attempt)
    return user


def sign_in(*, session: Session, email: str, password: str, ip: str, limits: LoginLimits) -> User | None:
    """Check credentials within the failed sign-in limits and record the attempt; return the user when right.

    The three steps in the caller's one transaction (the login page commits between them instead:
    webapp/accounts/pages.py). Raises LoginBlocked, without checking the password, when this address
    is over a limit for this account.
    """
    pending = begin_attempt(session=session, email=email, ip=ip, limits=limits)
    return finish_attempt(session=session, pending=pending, ok=password_matches(pending, password))


@functools.cache
def _dummy_hash() -> str:
    """Return a hash to check unknown emails against (made on first use: hashing takes ~0.2 s, and
    every command line start would pay it at import)."""
    return _hasher.hash("not-a-real-password")


# --- web sessions -------------------------------------------------------------------------------

# How stale a session's last_seen_at may get: written at most once a minute, not at every request.
SESSION_TOUCH_INTERVAL = dt.timedelta(minutes=1)


def start_session(*, session: Session, user: User, hours: int, ip: str = "") -> str:
    """Open a web session for a user and return the cookie token (only its hash is stored)."""
    token = secrets.token_urlsafe(32)
    assert user.id is not None
    now = utcnow()
    session.add(
        WebSession(
            token_hash=sha256_hex(token),
            user_id=user.id,
            expires_at=now + dt.timedelta(hours=hours),
            last_seen_at=now,
            ip=ip,
        )
    )
    session.flush()
    return token


# Every page asks for its caller: two prebuilt Core statements, not three ORM loads (about 1 ms less per request).
# The session, its user and the user's roles in one statement (it runs on every request): the
# roles as one comma-joined string (role names are identifiers, see ROLES).
_USER_ROLES = (
    sa_select(func.aggregate_strings(col(UserRole.role), ","))
    .where(col(UserRole.user_id) == col(User.id))
    .scalar_subquery()
)
_SESSION_USER = (
    sa_select(
        col(WebSession.id),
        col(WebSession.expires_at),
        col(WebSession.last_seen_at),
        col(User.id),
        col(User.email),
        col(User.name),
        col(User.is_active),
        _USER_ROLES,
    )
    .join(User, col(User.id) == WebSession.user_id)
    .where(col(WebSession.token_hash) == bindparam("token_hash"))
)


def principal_from_session_token(
    *, session: Session, token: str, idle_minutes: int, now: dt.datetime | None = None
) -> Principal | None:
    """Return the principal of a live web session (not expired, not idle too long), or None."""
    row = session.connection().execute(_SESSION_USER, {"token_hash": sha256_hex(token)}).first()
    if row is None:
        return None
    session_id, expires_at, last_seen_at, user_id, email, name, is_active, roles = row
    now = now or utcnow()
    last_seen = as_utc(last_seen_at)
    if as_utc(expires_at) <= now or now - last_seen >= dt.timedelta(minutes=idle_minutes) or not is_active:
        return None
    if now - last_seen > SESSION_TOUCH_INTERVAL:
        # through the ORM, so it is written at the request's commit: SQLite's write lock is then
        # held for the commit alone, not for the rest of a page that only reads
        stored = session.get(WebSession, session_id)
        if stored is not None:
            stored.last_seen_at = now
            session.add(stored)
    roles_held = frozenset(roles.split(",") if roles else ())
    return Principal(stored_id(user_id), email, name, roles_held, "session", credential_id=stored_id(session_id))


def end_session(*, session: Session, token: str) -> None:
    """Close a web session (log out)."""
    session.exec(delete(WebSession).where(col(WebSession.token_hash) == sha256_hex(token)))


def end_all_sessions(*, session: Session, user_id: int) -> int:
    """Close every web session of a user (sign out everywhere); return how many were open."""
    result = session.exec(delete(WebSession).where(col(WebSession.user_id) == user_id))
    session.flush()
    return int(result.rowcount or 0)


# --- API tokens ---------------------------------------------------------------------------------


def create_token(
    *, session: Session, user: User, name: str, scopes: Iterable[str] | None = None, created_by: int | None = None
) -> tuple[ApiToken, str]:
    """Create an API token; return the row and the plain token, which is never stored or shown again.

    `created_by` is the signed-in user minting it (None: the operator's command line). A token minted
    for someone else carries only the non-role scopes (ingest, metrics, ci): an admin must not be able to
    sign gates, grade or approve as another person through a token they hold.
    """
    assert user.id is not None
    held = user_roles(session=session, user_id=user.id)
    wanted = sorted(set(scopes)) if scopes else sorted(held)
    allowed = set(ROLES) | set(EXTRA_SCOPES)
    bad = [s for s in wanted if s not in allowed]
    if bad:
        raise AuthError(f"scope: {', '.join(bad)} is not one of {', '.join(sorted(allowed))}")
    not_held = [s for s in wanted if s in ROLES and s not in held]
    if not_held:
        raise AuthError(f"scope: {user.email} does not hold the role {', '.join(not_held)}")
    as_other = [s for s in wanted if s in ROLES]
    if created_by is not None and created_by != user.id and as_other:
        raise AuthError(
            f"scope: a token you mint for {user.email} may carry only {', '.join(EXTRA_SCOPES[:-1])} or {EXTRA_SCOPES[-1]}, not the role "
            f"{', '.join(as_other)} (a role token for another person is made at the command line: draftdesk tokens create)"
        )
    if not name.strip():
        raise AuthError("name: a token needs a name")
    plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(
        user_id=user.id,
        name=name.strip(),
        prefix=plain[:10],
        token_hash=sha256_hex(plain),
        scopes=" ".join(wanted),
        created_by=created_by,
    )
    session.add(token)
    session.flush()
    audit.record(
        session=session, action="token.create", actor_id=created_by, subject_id=user.id,
        target=f"token {token.id}", detail=f"{token.name!r}, scopes {token.scopes}",
    )  # fmt: skip
    return token, plain


# How stale an API token's last_used_at may get (it is shown to admins, to the minute).
TOKEN_TOUCH_INTERVAL = dt.timedelta(minutes=1)


# An API call's caller in one round trip: the token, its owner and each role the owner holds (one
# row per role; an owner without roles gives one row with role NULL), as Core rows.
_TOKEN_USER = (
    sa_select(
        col(ApiToken.id),
        col(ApiToken.scopes),
        col(ApiToken.last_used_at),
        col(ApiToken.revoked_at),
        col(ApiToken.created_by),
        col(User.id),
        col(User.email),
        col(User.name),
        col(User.is_active),
        col(UserRole.role),
    )  # fmt: skip
    .join(User, col(User.id) == ApiToken.user_id)
    .outerjoin(UserRole, col(UserRole.user_id) == User.id)
    .where(col(ApiToken.token_hash) == bindparam("token_hash"))
)


def principal_from_api_token(*, session: Session, token: str) -> Principal | None:
    """Return the principal of a live API token, or None; its roles are its scopes the user still holds."""
    conn = session.connection()
    rows = conn.execute(_TOKEN_USER, {"token_hash": sha256_hex(token)}).all()
    if not rows:
        return None
    token_id, scope_text, last_used_at, revoked_at, created_by, user_id, email, name, is_active, _ = rows[0]
    if revoked_at is not None or not is_active:
        return None
    held = frozenset(r[-1] for r in rows if r[-1] is not None)
    if created_by is not None and created_by != user_id:
        held = frozenset()  # minted by someone else: no role of the owner's acts through it (create_token)
    scopes = frozenset(scope_text.split())
    now = utcnow()
    # at most once a minute: the update locks the token's row until the request commits, which
    # made every concurrent request of one agent tool (one token) wait for the others
    # (the ORM writes it at the request's commit, so the lock is held for the commit alone)
    if last_used_at is None or now - as_utc(last_used_at) > TOKEN_TOUCH_INTERVAL:
        row = session.get(ApiToken, token_id)
        if row is not None:
            row.last_used_at = now
            session.add(row)
    minted_by = created_by if created_by is not None and created_by != user_id else None
    return Principal(
        stored_id(user_id), email, name, held & scopes, "token", scopes, credential_id=token_id, minted_by=minted_by
    )


def revoke_token(*, session: Session, token_id: int) -> ApiToken:
    """Revoke an API token; it stops working at once."""
    row = session.get(ApiToken, token_id)
    if row is None:
        raise AuthError(f"token: no token with id {token_id}")
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        session.add(row)
        session.flush()
        audit.record(session=session, action="token.revoke", subject_id=row.user_id, target=f"token {row.id}")
    return row


def token_with_owner(*, session: Session, token_id: int) -> tuple[ApiToken, User] | None:
    """Return an API token with its owner, or None."""
    row = session.exec(
        select(ApiToken, User).join(User, col(User.id) == ApiToken.user_id).where(ApiToken.id == token_id)
    ).first()
    return None if row is None else (row[0], row[1])


def list_tokens(*, session: Session) -> list[tuple[ApiToken, User]]:
    """List every API token with its owner, newest first."""
    rows = session.exec(
        select(ApiToken, User).join(User, col(User.id) == ApiToken.user_id).order_by(col(ApiToken.id).desc())
    ).all()
    return list(rows)


def list_users(*, session: Session) -> list[tuple[User, frozenset[str]]]:
    """List users with their roles."""
    users = session.exec(select(User).order_by(User.email)).all()
    roles: dict[int, set[str]] = {}
    for ur in session.exec(select(UserRole)).all():
        roles.setdefault(ur.user_id, set()).add(ur.role)
    return [(u, frozenset(roles.get(stored_id(u.id), set()))) for u in users]
