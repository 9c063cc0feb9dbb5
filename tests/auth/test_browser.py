"""Production mode over plain HTTP in Chromium: the pages say why signing in cannot work (issue #33)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session

from tests.browser_support import CHROMIUM, CHROMIUM_ARGS, serve
from tests.factories import DEFAULT_PASSWORD, make_user
from webapp.core.db import make_engine

ADVICE = "open it over HTTPS or set DRAFTDESK_SECURE_COOKIES=0"
# a name that is not loopback to the browser (which drops Secure cookies over plain HTTP) but reaches this host
HOST = "draftdesk.test"


@pytest.fixture
def production_server(tmp_path: Path, sqlite_template: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """Serve the app in production mode (Secure cookies) on a free loopback port; yield the port."""
    monkeypatch.delenv("DRAFTDESK_SECURE_COOKIES", raising=False)
    db = tmp_path / "prod.db"
    shutil.copyfile(sqlite_template, db)
    db_url = f"sqlite:///{db}"
    engine = make_engine(db_url)
    with Session(engine) as session:
        make_user(session, email="pm@example.test", roles=["pm"])
        session.commit()
    engine.dispose()
    with serve(db_url, mode="production") as server:
        yield int(server.url.rsplit(":", 1)[1])


def sign_in_text(port: int, host: str) -> tuple[str, str, str]:
    """Sign in with Chromium at http://host:port; return the login page's text, then the answer's URL and text."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        args = [*CHROMIUM_ARGS, f"--host-resolver-rules=MAP {HOST} 127.0.0.1"]
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        try:
            page = browser.new_page()
            page.goto(f"http://{host}:{port}/login")
            login_text = page.inner_text("main")
            page.fill("input[name=email]", "pm@example.test")
            page.fill("input[name=password]", DEFAULT_PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_load_state()
            return login_text, page.url, page.inner_text("main")
        finally:
            browser.close()


def test_plain_http_to_a_server_name_says_to_use_https(production_server: int) -> None:
    login_text, url, answer = sign_in_text(production_server, HOST)
    assert ADVICE in login_text
    assert url.endswith("/login") and "Error 403" in answer and ADVICE in answer


def test_loopback_keeps_secure_cookies_so_no_notice_and_sign_in_works(production_server: int) -> None:
    login_text, url, answer = sign_in_text(production_server, "127.0.0.1")
    assert ADVICE not in login_text
    assert url == f"http://127.0.0.1:{production_server}/" and "Error" not in answer
