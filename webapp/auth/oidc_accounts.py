"""The database side of signing in through the identity provider: pending sign-ins, linked accounts, claimed roles.

Decisions (issue 40):
- A person is their provider's (issuer, subject), never their email: a changed email at the provider
  keeps the account, and someone later given an old address does not get its account.
- One exception, for a team moving from passwords: an existing account that has no identity from
  this issuer yet is linked on its first sign-in when the provider vouches for the email
  (`email_verified` true). Without that, an email already taken is refused with a clear page. Nobody,
  an admin included, can point an identity at an account by hand: a link is made only from a
  validated ID token, so an admin cannot sign in as someone else through the provider.
- The first sign-in of an unknown person creates an active account with no role: every page then
  says they wait for an admin to grant one (webapp/web/deps.py), and the admin's users page lists them.
- Roles: an admin's grants and the roles claim add up. The claim's roles are replaced at every
  sign-in (taken out of a group at the provider: the role goes at the next sign-in); an admin's
  grants stay until an admin removes them (user_role.source tells which is which).
"""

from __future__ import annotations

import datetime as dt
import secrets

from sqlmodel import Session, col, delete, select

from webapp.auth import audit
from webapp.auth.models import OidcIdentity, OidcLoginRequest, User, UserRole
from webapp.auth.oidc import JsonObject, OidcRefused, sha256_hex
from webapp.core.db import stored_id
from webapp.core.timeutil import as_utc

LOGIN_REQUEST_MINUTES = 10
# used and expired rows are kept a day (a replayed callback is named as such), then pruned
LOGIN_REQUEST_KEEP = dt.timedelta(days=1)


def begin_sign_in(*, session: Session, next_path: str, now: dt.datetime) -> tuple[str, str]:
    """Record a sign-in sent to the provider; return its state (for the URL) and its verifier (for the cookie)."""
    stale = delete(OidcLoginRequest).where(col(OidcLoginRequest.expires_at) < now - LOGIN_REQUEST_KEEP)
    session.exec(stale.execution_options(synchronize_session=False))  # rows in the identity map are not compared in Python
    state, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(48)
    session.add(
        OidcLoginRequest(
            state_hash=sha256_hex(state),
            verifier_hash=sha256_hex(verifier),
            next_path=next_path,
            created_at=now,
            expires_at=now + dt.timedelta(minutes=LOGIN_REQUEST_MINUTES),
        )
    )
    session.flush()
    return state, verifier


def claim_sign_in(*, session: Session, state: str | None, verifier: str | None, now: dt.datetime) -> OidcLoginRequest:
    """Take the pending sign-in a callback answers, once: refuse a missing, unknown, used, expired or other browser's one."""
    if not state:
        raise OidcRefused("missing_state", "This sign-in answer has no state: start again from the login page.", "no state parameter")
    row = session.exec(select(OidcLoginRequest).where(OidcLoginRequest.state_hash == sha256_hex(state))).first()
    if row is None:
        raise OidcRefused("unknown_state", "This sign-in answer does not belong to a sign-in started here: start again from the login page.", "unknown state")
    if row.used_at is not None:
        raise OidcRefused("replayed", "This sign-in answer was already used: start again from the login page.", "state already used (a callback visited twice)")
    row.used_at = now  # before any other check: whatever follows, this state never works again
    session.add(row)
    session.flush()
    if as_utc(row.expires_at) <= now:
        raise OidcRefused("expired_request", "This sign-in took too long: start again from the login page.", "state expired")
    if not verifier or not secrets.compare_digest(sha256_hex(verifier), row.verifier_hash):
        raise OidcRefused("other_browser", "This sign-in was started in another browser: start again from the login page.", "state not bound to this browser's cookie")
    return row


def _email_of(claims: JsonObject) -> str:
    email = claims.get("email")
    return email.strip().lower() if isinstance(email, str) else ""


def link_account(*, session: Session, issuer: str, claims: JsonObject, now: dt.datetime) -> User:
    """Return the account of the provider's (issuer, subject), linking or creating it on the first sign-in."""
    subject = str(claims["sub"])
    found = session.exec(
        select(OidcIdentity, User)
        .join(User, col(User.id) == OidcIdentity.user_id)
        .where(OidcIdentity.issuer == issuer, OidcIdentity.subject == subject)
    ).first()
    if found is not None:
        identity, user = found
        identity.last_sign_in_at = now
        session.add(identity)
    else:
        user = _first_sign_in(session=session, issuer=issuer, claims=claims)
        session.add(OidcIdentity(issuer=issuer, subject=subject, user_id=stored_id(user.id), created_at=now, last_sign_in_at=now))
    if not user.is_active:
        raise OidcRefused("inactive", "This account is deactivated. Ask an admin.", f"user {user.id} is deactivated")
    session.flush()
    return user


def _first_sign_in(*, session: Session, issuer: str, claims: JsonObject) -> User:
    """Create the account of someone signing in for the first time (no role), or link their verified email's."""
    email = _email_of(claims)
    if not email or "@" not in email:
        raise OidcRefused("no_email", "The identity provider did not tell us your email address.", "ID token has no email (ask for the email scope)")
    existing = session.exec(select(User).where(User.email == email)).first()
    if existing is None:
        name = claims.get("name")
        user = User(email=email, name=name.strip()[:200] if isinstance(name, str) else "", password_hash="")
        session.add(user)
        session.flush()
        # nobody created it: the provider vouched for the person (no actor; the detail says so)
        audit.record(session=session, action="user.create", subject_id=user.id, target=f"user {email}",
                     detail=f"first sign-in through the identity provider {issuer}")
        return user
    linked = session.exec(select(OidcIdentity.id).where(OidcIdentity.user_id == existing.id, OidcIdentity.issuer == issuer)).first()
    if claims.get("email_verified") is True and linked is None:
        return existing
    raise OidcRefused(
        "email_taken",
        f"An account with the email {email} already exists and the identity provider does not vouch for that email. Ask an admin.",
        f"email {email} belongs to user {existing.id} (email_verified {claims.get('email_verified')!r}, linked {linked is not None})",
    )


def sync_claim_roles(*, session: Session, user_id: int, roles: frozenset[str]) -> frozenset[str]:
    """Make the roles the claim gives exactly `roles` (an admin's grants stay); return every role the user holds."""
    held = {r.role: r for r in session.exec(select(UserRole).where(UserRole.user_id == user_id)).all()}
    for role, row in held.items():
        if row.source == "claim" and role not in roles:
            session.delete(row)
            audit.record(session=session, action="role.remove", subject_id=user_id, target=f"role {role}",
                         detail="the identity provider's claim no longer gives it")
    for role in sorted(roles - held.keys()):
        session.add(UserRole(user_id=user_id, role=role, source="claim"))
        audit.record(session=session, action="role.grant", subject_id=user_id, target=f"role {role}",
                     detail="from the identity provider's claim")
    session.flush()
    return frozenset(r for r, row in held.items() if row.source == "admin") | roles
