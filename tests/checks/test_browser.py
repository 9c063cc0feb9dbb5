"""In Chromium: Re-check refreshes the results in place (htmx), and the draft page loads the checks fragment."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in
from tests.checks.conftest import build_world

pytestmark = pytest.mark.browser


def test_recheck_then_draft_fragment(live_server, new_page) -> None:  # type: ignore[no-untyped-def]
    world = live_server.seed(build_world)
    page = new_page()
    sign_in(page, live_server.url, "lead@example.test")
    page.goto(f"{live_server.url}/runs/run-a/checks")
    assert "has not been checked yet" in page.inner_text("#checks-results")
    page.click("button:has-text('Re-check')")
    page.wait_for_selector("#checks-results >> text=Per check")
    text = page.inner_text("#checks-results")
    assert "75.0%" in text
    assert "cites KB-3001 revision 2, which is deprecated; current is revision 4" in text
    assert page.url.endswith("/runs/run-a/checks")  # refreshed in place, no navigation
    page.click("#checks-results tr:has(td:text-is('e1')) a[href^='/drafts/'] >> nth=0")
    page.wait_for_selector("#draft-checks")
    assert "confidence 0.42 is below 0.6" in page.inner_text("#draft-checks")
    assert page.console_errors == []
    assert world.a.name == "run-a"
