"""On a phone (390 px) the pages of the daily loops do not scroll sideways: wide tables scroll in their card."""

from __future__ import annotations

import pytest

from tests.browser_support import sign_in
from webapp.demo import content as c

pytestmark = pytest.mark.browser

PAGES = {
    "pm.novak@demo.draftdesk": [
        "/runs/compare?a=demo-run-1&b=demo-run-1",
        "/runs/compare/cases/golden-regression-2fa?a=demo-run-1&b=demo-run-1",
        "/runs/demo-run-1/checks",
        "/reviews",
        "/gates/pilot?run=demo-run-1",
        "/metrics",
    ],
    "lead.chen@demo.draftdesk": ["/metrics/hallucinations?status=all", "/grading", "/regression"],
}


def test_no_horizontal_scroll_at_390px(demo_server, browser) -> None:  # type: ignore[no-untyped-def]
    problems = []
    for email, paths in PAGES.items():
        ctx = browser.new_context(viewport={"width": 390, "height": 844})
        page = ctx.new_page()
        sign_in(page, demo_server.url, email, c.DEMO_PASSWORD)
        for path in paths:
            response = page.goto(f"{demo_server.url}{path}")
            assert response is not None and response.status == 200, path
            page.wait_for_load_state("networkidle")
            overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            if overflow > 0:
                problems.append(f"{path} ({email}): {overflow} px wider than the screen")
        ctx.close()
    assert problems == []
