"""Production mode marks the session and CSRF cookies Secure unless DRAFTDESK_SECURE_COOKIES=0."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.conftest import SPEC_PATH, TEST_SECRET
from tests.factories import DEFAULT_PASSWORD, make_user
from webapp.app.main import create_app
from webapp.core.config import Settings
from webapp.core.security import CSRF_COOKIE, csrf_token_for
from webapp.web.deps import SESSION_COOKIE


def set_cookies(settings: Settings) -> dict[str, str]:
    """Sign in over HTTPS; return each Set-Cookie header (CSRF from the login page, session from the sign-in) by name."""
    app = create_app(settings)
    try:
        with TestClient(app, base_url="https://testserver") as c:
            page = c.get("/login")
            token = csrf_token_for(TEST_SECRET, c.cookies[CSRF_COOKIE])
            r = c.post(
                "/login",
                data={"email": "ops@example.test", "password": DEFAULT_PASSWORD, "csrf_token": token},
                follow_redirects=False,
            )
            assert r.status_code == 303, r.text
            headers = page.headers.get_list("set-cookie") + r.headers.get_list("set-cookie")
    finally:
        app.state.engine.dispose()
    return {h.split("=", 1)[0]: h for h in headers}


@pytest.mark.parametrize(("environ", "secure"), [(None, True), ("0", False), ("1", True)])
def test_production_cookies_are_secure_unless_turned_off(
    db_url: str, session: Session, monkeypatch: pytest.MonkeyPatch, environ: str | None, secure: bool
) -> None:
    make_user(session, email="ops@example.test", roles=["admin"])
    session.commit()
    if environ is not None:
        monkeypatch.setenv("DRAFTDESK_SECURE_COOKIES", environ)
    settings = Settings(database_url=db_url, mode="production", secret_key=TEST_SECRET, spec=SPEC_PATH)
    cookies = set_cookies(settings)
    assert set(cookies) >= {CSRF_COOKIE, SESSION_COOKIE}, cookies
    for name in (CSRF_COOKIE, SESSION_COOKIE):
        assert ("; secure" in cookies[name].lower()) is secure, cookies[name]


@pytest.mark.parametrize("mode", ["dev", "demo"])
def test_dev_and_demo_serve_plain_http_cookies_by_default(mode: str) -> None:
    assert Settings(mode=mode).cookie_secure is False  # type: ignore[arg-type]
    assert Settings(mode=mode, secure_cookies=True).cookie_secure is True  # type: ignore[arg-type]
