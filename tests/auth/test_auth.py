"""Sign-in, sessions, CSRF, API tokens and the login rate limit."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.conftest import csrf_for, login
from tests.factories import DEFAULT_PASSWORD, make_user
from webapp.auth import service
from webapp.auth.models import ApiToken, User, WebSession


class TestLogin:
    def test_good_password_signs_in_and_home_loads(self, client: TestClient, session: Session) -> None:
        make_user(session, email="lead@example.test", roles=["lead"])
        session.commit()
        login(client, "lead@example.test")
        r = client.get("/")
        assert r.status_code == 200
        assert "lead@example.test" in r.text

    def test_bad_password_is_refused(self, client: TestClient, session: Session) -> None:
        make_user(session, email="a@example.test", roles=["pm"])
        session.commit()
        r = client.post(
            "/login",
            data={"email": "a@example.test", "password": "wrong-password", "csrf_token": csrf_for(client)},
        )
        assert r.status_code == 401
        assert "Wrong email or password" in r.text
        assert client.get("/", follow_redirects=False).status_code == 303

    def test_password_is_stored_as_argon2(self, session: Session) -> None:
        make_user(session, email="b@example.test", roles=["pm"])
        user = session.exec(select(User)).one()
        assert user.password_hash.startswith("$argon2id$")
        assert DEFAULT_PASSWORD not in user.password_hash

    def test_session_cookie_is_httponly_and_samesite(self, client: TestClient, session: Session) -> None:
        make_user(session, email="c@example.test", roles=["pm"])
        session.commit()
        client.get("/login")
        r = client.post(
            "/login",
            data={"email": "c@example.test", "password": DEFAULT_PASSWORD, "csrf_token": csrf_for(client)},
            follow_redirects=False,
        )
        cookie = [v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith("dd_session=")][0]
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie
        raw = cookie.split(";")[0].split("=", 1)[1]
        stored = session.exec(select(WebSession)).one()
        assert stored.token_hash == service.sha256_hex(raw) and raw not in stored.token_hash

    def test_login_without_csrf_is_refused(self, client: TestClient, session: Session) -> None:
        make_user(session, email="d@example.test", roles=["pm"])
        session.commit()
        client.get("/login")
        r = client.post("/login", data={"email": "d@example.test", "password": DEFAULT_PASSWORD})
        assert r.status_code == 403

    def test_logout_ends_the_session(self, client: TestClient, session: Session) -> None:
        make_user(session, email="e@example.test", roles=["pm"])
        session.commit()
        login(client, "e@example.test")
        assert client.post("/logout", follow_redirects=False).status_code == 303
        assert client.get("/", follow_redirects=False).status_code == 303

    def test_next_parameter_cannot_leave_the_site(self, client: TestClient, session: Session) -> None:
        make_user(session, email="f@example.test", roles=["pm"])
        session.commit()
        client.get("/login")
        r = client.post(
            "/login",
            data={"email": "f@example.test", "password": DEFAULT_PASSWORD, "csrf_token": csrf_for(client), "next": "//evil.example"},
            follow_redirects=False,
        )
        assert r.headers["location"] == "/"


class TestRateLimit:
    def test_sixth_attempt_within_the_window_is_blocked(self, client: TestClient, session: Session) -> None:
        make_user(session, email="g@example.test", roles=["pm"])
        session.commit()
        for _ in range(5):
            r = client.post("/login", data={"email": "g@example.test", "password": "nope-nope", "csrf_token": csrf_for(client)})
            assert r.status_code == 401
        r = client.post(
            "/login", data={"email": "g@example.test", "password": DEFAULT_PASSWORD, "csrf_token": csrf_for(client)}
        )
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

    def test_revoked_and_unknown_tokens_get_401(self, client: TestClient, session: Session) -> None:
        user = make_user(session, email="i@example.test", roles=["pm"])
        row, plain = service.create_token(session=session, user=user, name="ci")
        service.revoke_token(session=session, token_id=row.id)
        session.commit()
        assert client.get("/api/v1/whoami", headers={"Authorization": f"Bearer {plain}"}).status_code == 401
        assert client.get("/api/v1/whoami", headers={"Authorization": "Bearer dd_nonsense"}).status_code == 401

    def test_scope_must_be_a_role_the_user_holds_or_ingest(self, session: Session) -> None:
        user = make_user(session, email="j@example.test", roles=["labeler"])
        import pytest

        with pytest.raises(service.AuthError, match="does not hold the role lead"):
            service.create_token(session=session, user=user, name="x", scopes=["lead"])
        with pytest.raises(service.AuthError, match="is not one of"):
            service.create_token(session=session, user=user, name="x", scopes=["root"])
        row, _ = service.create_token(session=session, user=user, name="agent tool", scopes=["ingest"])
        assert row.scopes == "ingest"
        assert session.exec(select(ApiToken)).one().prefix.startswith("dd_")
