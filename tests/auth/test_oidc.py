"""The identity provider's settings, pending sign-ins, account linking and role precedence (on each database).

The flow itself, against the real provider in Chromium, is tests/auth/test_oidc_browser.py.
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlmodel import Session, select

from tests.factories import make_user
from webapp.admin.service import role_sources, set_admin_roles
from webapp.auth.models import OidcIdentity, User, UserRole
from webapp.auth.oidc import OidcConfig, OidcRefused, parse_role_map
from webapp.auth.oidc_accounts import begin_sign_in, claim_sign_in, link_account, sync_claim_roles
from webapp.auth.service import AuthError, principal_for_user
from webapp.core.config import ConfigError, Settings
from webapp.core.timeutil import utcnow
from webapp.web.deps import WAITING_FOR_A_ROLE, RoleCheck

ISSUER = "https://idp.example.test"
NOW = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)


def _roles(session: Session, user_id: int) -> dict[str, str]:
    return {r.role: r.source for r in session.exec(select(UserRole).where(UserRole.user_id == user_id)).all()}


class TestSettings:
    def test_an_issuer_needs_a_client_id_and_secret_and_https(self) -> None:
        with pytest.raises(ConfigError, match="DRAFTDESK_OIDC_CLIENT_SECRET is not"):
            Settings(mode="dev", oidc_issuer=ISSUER, oidc_client_id="dd")
        with pytest.raises(ConfigError, match="must be an https:// URL"):
            Settings(mode="dev", oidc_issuer="http://idp.example.test", oidc_client_id="dd", oidc_client_secret="s")
        assert Settings(mode="dev", oidc_issuer="http://127.0.0.1:9", oidc_client_id="dd", oidc_client_secret="s").oidc_enabled

    def test_passwords_off_needs_a_provider_and_a_map_needs_its_claim(self) -> None:
        with pytest.raises(ConfigError, match="nobody could sign in"):
            Settings(mode="dev", password_login=False)
        with pytest.raises(ConfigError, match="DRAFTDESK_OIDC_ROLES_CLAIM"):
            Settings(mode="dev", oidc_role_map="dd-pm=pm")

    def test_the_secret_is_not_in_the_settings_repr(self) -> None:
        settings = Settings(mode="dev", oidc_issuer=ISSUER, oidc_client_id="dd", oidc_client_secret="very-secret")
        assert "very-secret" not in repr(settings) and "very-secret" not in repr(OidcConfig.from_settings(settings))


class TestRoleMap:
    def test_pairs_map_values_to_roles_and_a_value_may_give_two(self) -> None:
        assert parse_role_map(" dd-pm=pm , dd-leads=lead,dd-leads=labeler,") == {
            "dd-pm": frozenset({"pm"}), "dd-leads": frozenset({"lead", "labeler"}),
        }  # fmt: skip

    @pytest.mark.parametrize("text", ["dd-pm", "dd-pm=boss", "=pm"])
    def test_a_bad_pair_is_named(self, text: str) -> None:
        with pytest.raises(ConfigError, match=r"pair 2 .* write value=role"):
            parse_role_map("ok=pm," + text)

    def test_the_claim_gives_only_mapped_values_and_accepts_one_string(self) -> None:
        settings = Settings(
            mode="dev", oidc_issuer=ISSUER, oidc_client_id="dd", oidc_client_secret="s",
            oidc_roles_claim="groups", oidc_role_map="dd-pm=pm,dd-admins=admin",
        )  # fmt: skip
        config = OidcConfig.from_settings(settings)
        assert config is not None and config.redirect_uri == "http://127.0.0.1:8000/login/oidc/callback"
        assert config.provider_name == "idp.example.test"
        assert config.roles_from_claims({"groups": ["dd-pm", "other"]}) == {"pm"}
        assert config.roles_from_claims({"groups": "dd-admins"}) == {"admin"}
        assert config.roles_from_claims({"groups": 7}) == frozenset() == config.roles_from_claims({})


class TestPendingSignIn:
    def test_a_sign_in_is_taken_once_by_the_browser_that_started_it(self, session: Session) -> None:
        state, verifier = begin_sign_in(session=session, next_path="/runs", now=NOW)
        with pytest.raises(OidcRefused) as other:
            claim_sign_in(session=session, state=state, verifier="another-browser", now=NOW)
        assert other.value.reason == "other_browser"
        with pytest.raises(OidcRefused) as again:  # the failed try used it up
            claim_sign_in(session=session, state=state, verifier=verifier, now=NOW)
        assert again.value.reason == "replayed"
        state, verifier = begin_sign_in(session=session, next_path="/runs", now=NOW)
        assert claim_sign_in(session=session, state=state, verifier=verifier, now=NOW).next_path == "/runs"

    def test_after_ten_minutes_it_has_expired(self, session: Session) -> None:
        state, verifier = begin_sign_in(session=session, next_path="/", now=NOW)
        with pytest.raises(OidcRefused) as late:
            claim_sign_in(session=session, state=state, verifier=verifier, now=NOW + dt.timedelta(minutes=10))
        assert late.value.reason == "expired_request"

    def test_a_pending_sign_in_stores_no_secret_in_plain(self, session: Session) -> None:
        state, verifier = begin_sign_in(session=session, next_path="/", now=NOW)
        session.commit()
        from webapp.auth.models import OidcLoginRequest

        row = session.exec(select(OidcLoginRequest)).one()
        assert state not in (row.state_hash, row.verifier_hash) and verifier not in (row.state_hash, row.verifier_hash)


class TestLinking:
    def test_the_first_sign_in_creates_an_account_without_a_role_then_finds_it_by_subject(self, session: Session) -> None:
        first = link_account(session=session, issuer=ISSUER, claims={"sub": "u1", "email": "Ann@Example.test", "name": "Ann"}, now=NOW)
        assert (first.email, first.name, first.password_hash) == ("ann@example.test", "Ann", "")
        assert principal_for_user(session=session, user=first).roles == frozenset()
        # a changed email at the provider keeps the account: the subject decides
        again = link_account(session=session, issuer=ISSUER, claims={"sub": "u1", "email": "ann.b@example.test"}, now=NOW)
        assert again.id == first.id
        # the same subject at another issuer is another person
        with pytest.raises(OidcRefused) as taken:
            link_account(session=session, issuer="https://other.example.test", claims={"sub": "u1", "email": "ann@example.test"}, now=NOW)
        assert taken.value.reason == "email_taken"

    def test_an_existing_account_is_linked_only_when_the_provider_vouches_for_its_email(self, session: Session) -> None:
        local = make_user(session, email="bo@example.test", roles=["pm"])
        with pytest.raises(OidcRefused) as unverified:
            link_account(session=session, issuer=ISSUER, claims={"sub": "b1", "email": "bo@example.test"}, now=NOW)
        assert unverified.value.reason == "email_taken"
        linked = link_account(session=session, issuer=ISSUER, claims={"sub": "b1", "email": "bo@example.test", "email_verified": True}, now=NOW)
        assert linked.id == local.id
        # a second identity from the same issuer cannot take that account by its email
        with pytest.raises(OidcRefused):
            link_account(session=session, issuer=ISSUER, claims={"sub": "b2", "email": "bo@example.test", "email_verified": True}, now=NOW)
        assert session.exec(select(OidcIdentity.subject).where(OidcIdentity.user_id == local.id)).all() == ["b1"]

    def test_no_email_or_a_deactivated_account_is_refused(self, session: Session) -> None:
        with pytest.raises(OidcRefused) as no_email:
            link_account(session=session, issuer=ISSUER, claims={"sub": "c1"}, now=NOW)
        assert no_email.value.reason == "no_email"
        user = link_account(session=session, issuer=ISSUER, claims={"sub": "c2", "email": "cy@example.test"}, now=NOW)
        user.is_active = False
        session.add(user)
        with pytest.raises(OidcRefused) as inactive:
            link_account(session=session, issuer=ISSUER, claims={"sub": "c2", "email": "cy@example.test"}, now=NOW)
        assert inactive.value.reason == "inactive"


class TestRolePrecedence:
    def test_claim_roles_follow_the_claim_and_an_admins_grants_stay(self, session: Session) -> None:
        admin = make_user(session, email="root@example.test", roles=["admin"])
        user = link_account(session=session, issuer=ISSUER, claims={"sub": "d1", "email": "di@example.test"}, now=NOW)
        uid = user.id or 0
        assert sync_claim_roles(session=session, user_id=uid, roles=frozenset({"pm", "lead"})) == {"pm", "lead"}
        set_admin_roles(session=session, user_id=uid, roles=["labeler", "lead"], acting_user_id=admin.id or 0)
        assert _roles(session, uid) == {"pm": "claim", "lead": "admin", "labeler": "admin"}
        assert role_sources(session=session).by_claim == {uid: frozenset({"pm"})}
        # out of every group at the provider: the claim's role goes, the admin's grants stay
        assert sync_claim_roles(session=session, user_id=uid, roles=frozenset()) == {"lead", "labeler"}
        assert _roles(session, uid) == {"lead": "admin", "labeler": "admin"}
        set_admin_roles(session=session, user_id=uid, roles=[], acting_user_id=admin.id or 0)
        assert _roles(session, uid) == {}

    def test_an_admin_cannot_drop_their_own_admin_role_or_grant_an_unknown_one(self, session: Session) -> None:
        admin = make_user(session, email="root@example.test", roles=["admin"])
        with pytest.raises(AuthError, match="your own admin role"):
            set_admin_roles(session=session, user_id=admin.id or 0, roles=["pm"], acting_user_id=admin.id or 0)
        with pytest.raises(AuthError, match="boss is not one of"):
            set_admin_roles(session=session, user_id=admin.id or 0, roles=["admin", "boss"], acting_user_id=admin.id or 0)


class TestWaitingForARole:
    async def _check(self, principal) -> str:  # type: ignore[no-untyped-def]
        from fastapi import HTTPException

        try:
            await RoleCheck("pm")(principal)
        except HTTPException as exc:
            return str(exc.detail)
        return "admitted"

    def test_a_person_without_a_role_is_told_they_wait_for_one(self, session: Session) -> None:
        import asyncio

        user = link_account(session=session, issuer=ISSUER, claims={"sub": "e1", "email": "ed@example.test"}, now=utcnow())
        assert asyncio.run(self._check(principal_for_user(session=session, user=user))) == WAITING_FOR_A_ROLE
        other = make_user(session, email="lab@example.test", roles=["labeler"])
        assert asyncio.run(self._check(principal_for_user(session=session, user=other))) == "this page needs the role pm"
        assert session.get(User, user.id) is not None
