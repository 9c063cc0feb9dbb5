"""Sessions: the CSRF token bound to the session, the idle timeout, signing out everywhere (issue #33)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.conftest import TEST_SECRET, login
from tests.factories import make_user
from webapp.auth.models import WebSession
from webapp.core.security import CSRF_COOKIE, SESSION_COOKIE, csrf_token_for
from webapp.core.timeutil import as_utc, utcnow

PM = "pm@example.test"


def browser_with(app: FastAPI, cookies: dict[str, str], token: str) -> TestClient:
    """A browser holding exactly these cookies and sending this CSRF header."""
    return TestClient(app, cookies=cookies, headers={"X-CSRF-Token": token})


class TestCsrfBoundToSession:
    def test_a_token_and_cookie_from_another_session_are_refused(
        self, app: FastAPI, client_as: Callable[..., TestClient]
    ) -> None:
        """A CSRF cookie planted into a signed-in browser, with the planter's own valid token, does not pass."""
        victim = client_as("pm", email=PM)
        attacker = client_as("labeler")
        planted = browser_with(
            app,
            {SESSION_COOKIE: victim.cookies[SESSION_COOKIE], CSRF_COOKIE: attacker.cookies[CSRF_COOKIE]},
            attacker.headers["X-CSRF-Token"],
        )
        r = planted.post("/logout", follow_redirects=False)
        assert r.status_code == 403 and "CSRF token missing or invalid" in r.text
        assert victim.get("/", follow_redirects=False).status_code == 200  # still signed in
        # the victim's own cookie and token still work
        assert victim.post("/logout", follow_redirects=False).status_code == 303

    def test_a_token_from_before_sign_in_is_refused_after_it(self, app: FastAPI, session: Session) -> None:
        make_user(session, email=PM, roles=["pm"])
        session.commit()
        with TestClient(app) as c:
            c.get("/login")
            seed_before = c.cookies[CSRF_COOKIE]
            token_before = csrf_token_for(TEST_SECRET, seed_before)
            login(c, PM)
            replay = browser_with(app, {SESSION_COOKIE: c.cookies[SESSION_COOKIE], CSRF_COOKIE: seed_before}, token_before)
            assert replay.post("/logout", follow_redirects=False).status_code == 403
            assert c.get("/", follow_redirects=False).status_code == 200

    def test_pages_and_htmx_carry_the_bound_token(self, client_as: Callable[..., TestClient]) -> None:
        pm = client_as("pm", email=PM)
        expected = csrf_token_for(TEST_SECRET, pm.cookies[CSRF_COOKIE], pm.cookies[SESSION_COOKIE])
        page = pm.get("/")
        assert page.status_code == 200
        assert f'name="csrf_token" value="{expected}"' in page.text  # forms
        assert expected in page.text.split("<body", 1)[1].split(">", 1)[0]  # <body hx-headers>


class TestIdleTimeout:
    def test_a_session_idle_past_the_timeout_is_refused_and_activity_keeps_it(
        self, app: FastAPI, client_as: Callable[..., TestClient], session: Session
    ) -> None:
        assert app.state.settings.session_idle_minutes == 60
        pm = client_as("pm", email=PM)
        start = utcnow()

        def at(minutes: float) -> int:
            app.state.clock = lambda: start + dt.timedelta(minutes=minutes)
            return pm.get("/", follow_redirects=False).status_code

        assert at(50) == 200  # 50 minutes idle: fine, and it counts as activity
        assert at(109) == 200  # 59 minutes after the last request
        session.expire_all()
        seen = as_utc(session.exec(select(WebSession)).one().last_seen_at)
        assert seen == start + dt.timedelta(minutes=109)
        app.state.clock = lambda: start + dt.timedelta(minutes=169.5)  # 60.5 minutes idle
        r = pm.get("/", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/login")

    def test_the_timeout_is_a_setting(self, app: FastAPI, client_as: Callable[..., TestClient]) -> None:
        app.state.settings.session_idle_minutes = 5
        pm = client_as("pm", email=PM)
        app.state.clock = lambda: utcnow() + dt.timedelta(minutes=6)
        assert pm.get("/", follow_redirects=False).status_code == 303


class TestSignOutEverywhere:
    def test_it_ends_every_session_of_the_user_and_only_theirs(
        self, client_as: Callable[..., TestClient], session: Session
    ) -> None:
        laptop = client_as("pm", email=PM)
        phone = client_as("pm", email=PM)
        colleague = client_as("lead")
        page = laptop.get("/")
        assert 'action="/logout/everywhere"' in page.text
        r = laptop.post("/logout/everywhere", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/login"
        assert phone.get("/", follow_redirects=False).status_code == 303
        assert laptop.get("/", follow_redirects=False).status_code == 303
        assert colleague.get("/", follow_redirects=False).status_code == 200
        session.expire_all()
        assert len(session.exec(select(WebSession)).all()) == 1  # the colleague's

    def test_it_needs_the_csrf_token_and_a_session(self, client: TestClient, client_as: Callable[..., TestClient]) -> None:
        pm = client_as("pm", email=PM)
        assert pm.post("/logout/everywhere", headers={"X-CSRF-Token": "forged"}, follow_redirects=False).status_code == 403
        assert pm.get("/", follow_redirects=False).status_code == 200
        client.get("/login")
        anonymous = client.post(
            "/logout/everywhere",
            headers={"X-CSRF-Token": csrf_token_for(TEST_SECRET, client.cookies[CSRF_COOKIE])},
            follow_redirects=False,
        )
        assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/login?next=")


@pytest.fixture(autouse=True)
def _no_clock(app: FastAPI) -> Iterator[None]:
    """Leave the app's clock as it was (a test may set app.state.clock)."""
    yield
    if hasattr(app.state, "clock"):
        del app.state.clock
