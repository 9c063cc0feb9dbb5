"""The login page in Chromium."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in
from tests.factories import make_user

pytestmark = pytest.mark.browser


def test_sign_in_and_out(live_server, new_page) -> None:  # type: ignore[no-untyped-def]
    live_server.seed(lambda s: make_user(s, email="pm@example.test", roles=["pm"]))
    page = new_page()
    sign_in(page, live_server.url, "pm@example.test")
    assert page.locator("h1").inner_text().startswith("Good to see you")
    page.click("text=Sign out")
    page.wait_for_url("**/login")
    assert page.console_errors == []
