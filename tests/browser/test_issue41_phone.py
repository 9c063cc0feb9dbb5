"""Issue 41, item 7 in Chromium: a long run name does not widen the pages at 390 px; Re-check says "Checking…"."""

from __future__ import annotations

import uuid
from typing import Any

from sqlmodel import Session, select

from tests.browser_support import sign_in
from webapp.demo import content as c
from webapp.runs.models import Run

LONG = f"evaluator-{uuid.UUID(int=41)}"


def _rename(session: Session) -> None:
    run = session.exec(select(Run).where(Run.name == "demo-run-1")).one()
    run.name = LONG
    session.add(run)


def _page(browser: Any, server: Any, email: str) -> Any:
    page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    sign_in(page, server.url, email, c.DEMO_PASSWORD)
    return page


def test_a_long_run_name_does_not_scroll_the_page_sideways(demo_server: Any, browser: Any) -> None:
    demo_server.seed(_rename)
    page = _page(browser, demo_server, "lead.chen@demo.draftdesk")
    for path in ("/grading", f"/regression?run={LONG}", "/grading/agreement"):
        response = page.goto(f"{demo_server.url}{path}")
        assert response is not None and response.status == 200, path
        page.wait_for_load_state("networkidle")
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, (path, overflow)


def test_recheck_shows_checking_while_it_runs(demo_server: Any, browser: Any) -> None:
    page = _page(browser, demo_server, "pm.novak@demo.draftdesk")
    held: list[Any] = []
    page.route("**/runs/*/checks", lambda route: held.append(route) if route.request.method == "POST" else route.continue_())
    page.goto(f"{demo_server.url}/runs/demo-run-1/checks")
    assert not page.is_visible("#recheck-indicator")
    page.click("button:has-text('Re-check')")
    page.wait_for_selector("#recheck-indicator", state="visible")
    assert page.is_disabled("button:has-text('Re-check')")
    page.wait_for_function("() => true")  # let the route callback run
    assert held, "the re-check request was not sent"
    held[0].continue_()
    page.wait_for_selector("#recheck-indicator", state="hidden")
    assert page.is_enabled("button:has-text('Re-check')")
