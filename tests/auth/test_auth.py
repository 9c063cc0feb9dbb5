"""Sign-in, sessions, CSRF, API tokens and the login rate limit."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from sqlmodel import Session, select

from tests.conftest import csrf_for, login
from tests.factories import DEFAULT_PASSWORD, make_user
from webapp.auth import service
from webapp.auth.models import ApiToken, User, WebSession

EMAIL = "pm@example.test"


@pytest.fixture
def pm(session: Session) -> User:
    user = make_user(session, email=EMAIL, roles=["pm"])
    session.commit()
    return user


def post_login(client: TestClient, password: str = DEFAULT_PASSWORD, **extra: str) -> Response:
    data = {"email": EMAIL, "password": password, "csrf_token": csrf_for(client), **extra}
    return client.post("/login", data=data, follow_redirects=False)


class TestLogin:
    def test_good_password_signs_in_home_loads_logout_ends_it(self, client: TestClient, pm: User) -> None:
        login(client, EMAIL)
        r = client.get("/")
        assert r.status_code == 200 and EMAIL in r.text
        assert client.post("/logout", follow_redirects=False).status_code == 303
        assert client.get("/", follow_redirects=False).status_code == 303

    def test_password_is_stored_as_argon2(self, session: Session, pm: User) -> None:
        user = session.exec(select(User)).one()
        assert user.password_hash.startswith("$argon2id$")
        assert DEFAULT_PASSWORD not in user.password_hash

    def test_session_cookie_is_httponly_and_samesite(
        self, client: TestClient, session: Session, pm: User
    ) -> None:
        r = post_login(client)
        cookie = [v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith("dd_session=")][0]
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie
        raw = cookie.split(";")[0].split("=", 1)[1]
        stored = session.exec(select(WebSession)).one()
        assert stored.token_hash == service.sha256_hex(raw) and raw not in stored.token_hash

    def test_no_csrf_is_refused_and_next_cannot_leave_the_site(self, client: TestClient, pm: User) -> None:
        client.get("/login")
        assert client.post("/login", data={"email": EMAIL, "password": DEFAULT_PASSWORD}).status_code == 403
        assert post_login(client, next="//evil.example").headers["location"] == "/"


class TestRateLimit:
    def test_wrong_password_is_refused_and_sixth_attempt_blocked(self, client: TestClient, pm: User) -> None:
        for _ in range(5):
            r = post_login(client, "nope-nope")
            assert r.status_code == 401 and "Wrong email or password" in r.text
            assert client.get("/", follow_redirects=False).status_code == 303  # not signed in
        r = post_login(client)
        assert r.status_code == 429
        assert "Too many failed sign-ins" in r.text


class TestTokens:
    def test_token_is_stored_hashed_and_authenticates(self, client: TestClient, session: Session) -> None:
        user = make_user(session, email="h@example.test", roles=["pm", "lead"])
        row, plain = service.create_token(session=session, user=user, name="ci", scopes=["pm"])
        session.commit()
        assert plain not in row.token_hash and row.token_hash == service.sha256_hex(plain)
        assert service.principal_from_api_token(session=session, token=plain).roles == frozenset({"pm"})
        assert client.get("/api/v1/whoami", headers={"Authorization": f"Bearer {plain}"}).json()["roles"] == ["pm"]

    def test_revoked_and_unknown_tokens_get_401(self, client: TestClient, session: Session, pm: User) -> None:
        row, plain = service.create_token(session=session, user=pm, name="ci")
        service.revoke_token(session=session, token_id=row.id)
        session.commit()
        assert client.get("/api/v1/whoami", headers={"Authorization": f"Bearer {plain}"}).status_code == 401
        assert client.get("/api/v1/whoami", headers={"Authorization": "Bearer dd_nonsense"}).status_code == 401

    def test_scope_must_be_a_role_the_user_holds_or_ingest(self, session: Session) -> None:
        user = make_user(session, email="j@example.test", roles=["labeler"])
        with pytest.raises(service.AuthError, match="does not hold the role lead"):
            service.create_token(session=session, user=user, name="x", scopes=["lead"])
        with pytest.raises(service.AuthError, match="is not one of"):
            service.create_token(session=session, user=user, name="x", scopes=["root"])
        row, _ = service.create_token(session=session, user=user, name="agent tool", scopes=["ingest"])
        assert row.scopes == "ingest"
        assert session.exec(select(ApiToken)).one().prefix.startswith("dd_")
