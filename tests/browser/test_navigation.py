"""Sign in as each demo role in Chromium and open every navigation entry that role sees."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in
from webapp.demo import content as c
from webapp.navigation import NAV

pytestmark = pytest.mark.browser

_ALL = {"labeler", "lead", "pm", "support_lead", "ml_lead", "admin"}
# Who should see each entry, written out here (the app derives it from the routes' role checks).
EXPECTED_ROLES = {
    "/": _ALL,
    "/grading": {"labeler", "lead"},
    "/grading/adjudication": {"lead"},
    "/grading/agreement": {"lead", "pm"},
    "/runs": _ALL,
    "/regression": {"lead", "pm", "admin", "support_lead", "ml_lead", "labeler"},
    "/evaluator/runs": {"lead", "pm", "ml_lead", "admin"},
    "/datasets": {"lead", "pm", "admin", "labeler"},
    "/kb": _ALL,
    "/metrics": {"support_lead", "pm", "lead", "admin"},
    "/metrics/hallucinations": {"lead", "support_lead"},
    "/reviews": {"pm", "support_lead"},
    "/gates": {"pm", "support_lead", "lead", "ml_lead", "admin"},
    "/survey": {"support_lead", "pm", "lead", "ml_lead", "admin"},
    "/admin": {"admin"},
}


def test_every_role_opens_every_navigation_entry(demo_server, new_page) -> None:  # type: ignore[no-untyped-def]
    problems: list[str] = []
    visited = 0
    for key, email, _name, roles in c.DEMO_USERS:
        page = new_page()
        sign_in(page, demo_server.url, email, c.DEMO_PASSWORD)
        hrefs = [a.get_attribute("href") for a in page.locator("nav.mainnav a").all()]
        expected = [item.href for item in NAV if set(roles) & EXPECTED_ROLES[item.href]]
        if hrefs != expected:
            problems.append(f"{key}: navigation shows {hrefs}, expected {expected}")
        for href in hrefs:
            page.console_errors.clear()
            response = page.goto(f"{demo_server.url}{href}")
            page.wait_for_load_state("networkidle")
            status = response.status if response else 0
            if status >= 400:
                problems.append(f"{key} {href}: HTTP {status}")
            if page.console_errors:
                problems.append(f"{key} {href}: console errors {page.console_errors}")
            visited += 1
        page.context.close()
    assert visited >= len(c.DEMO_USERS) * 3
    assert problems == [], "\n".join(problems)
