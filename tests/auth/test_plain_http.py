"""Production mode opened over plain HTTP: the pages say why signing in cannot work (issue #33)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.conftest import SPEC_PATH, TEST_SECRET
from tests.factories import DEFAULT_PASSWORD, make_user
from webapp.app.main import create_app
from webapp.core import security
from webapp.core.config import Settings
from webapp.core.security import CSRF_COOKIE, csrf_token_for

ADVICE = "open it over HTTPS or set DRAFTDESK_SECURE_COOKIES=0"


@pytest.fixture
def production(db_url: str, session: Session, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """Production settings (Secure cookies by default) and a user."""
    monkeypatch.delenv("DRAFTDESK_SECURE_COOKIES", raising=False)
    make_user(session, email="pm@example.test", roles=["pm"])
    session.commit()
    yield Settings(database_url=db_url, mode="production", secret_key=TEST_SECRET, spec=SPEC_PATH)


def sign_in_over(settings: Settings, base_url: str, caplog: pytest.LogCaptureFixture) -> tuple[str, int, str]:
    """Open the login page and sign in like a browser at base_url; return the page, the status and its text."""
    app = create_app(settings)
    try:
        with TestClient(app, base_url=base_url) as c:
            page = c.get("/login").text
            # a browser on plain HTTP drops a Secure cookie: httpx's cookie jar does not send it either
            seed = c.cookies.get(CSRF_COOKIE) or "none"
            data = {"email": "pm@example.test", "password": DEFAULT_PASSWORD, "csrf_token": csrf_token_for(TEST_SECRET, seed)}
            r = c.post("/login", data=data, follow_redirects=False)
            c.post("/login", data=data, follow_redirects=False)  # a second failure logs nothing more
    finally:
        app.state.engine.dispose()
    return page, r.status_code, r.text


def test_plain_http_with_secure_cookies_says_what_is_wrong(
    production: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    security._warn_plain_http.cache_clear()
    with caplog.at_level(logging.WARNING, logger="webapp.core.security"):
        page, status, text = sign_in_over(production, "http://192.0.2.10:8000", caplog)
    assert ADVICE in page and 'id="plain-http-notice"' in page
    assert status == 403 and ADVICE in text and "marks cookies Secure" in text
    warnings = [r for r in caplog.records if r.name == "webapp.core.security" and ADVICE in r.getMessage()]
    assert len(warnings) == 1


def test_https_signs_in_without_the_notice(production: Settings, caplog: pytest.LogCaptureFixture) -> None:
    page, status, _ = sign_in_over(production, "https://draftdesk.example", caplog)
    assert ADVICE not in page and status == 303


def test_plain_http_with_secure_cookies_off_signs_in(
    production: Settings, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAFTDESK_SECURE_COOKIES", "0")
    settings = Settings(database_url=production.database_url, mode="production", secret_key=TEST_SECRET, spec=SPEC_PATH)
    page, status, _ = sign_in_over(settings, "http://192.0.2.10:8000", caplog)
    assert ADVICE not in page and status == 303


def test_a_stale_token_over_https_keeps_the_plain_message(production: Settings) -> None:
    """The HTTPS advice is only for a missing cookie over plain HTTP: a bad token elsewhere reads as before."""
    app = create_app(production)
    try:
        with TestClient(app, base_url="https://draftdesk.example") as c:
            c.get("/login")
            assert CSRF_COOKIE in c.cookies
            r = c.post("/login", data={"email": "pm@example.test", "password": "x", "csrf_token": "stale"})
    finally:
        app.state.engine.dispose()
    assert r.status_code == 403 and security.CSRF_INVALID in r.text and ADVICE not in r.text
