"""The lead works the hallucination queue in Chromium: evidence beside the draft, a note, undo."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from tests.browser_support import sign_in
from tests.factories import make_article, make_user
from tests.metrics.conftest import ev, load
from webapp.core.spec import EvalSpec
from webapp.metrics import reports

pytestmark = pytest.mark.browser


def _seed(session: Session, spec: EvalSpec) -> None:
    make_user(session, email="lead@example.test", roles=["lead"])
    make_article(session, "KB-7")
    texts = {"draft_text": "Refunds take 10 days", "sent_text": "Refunds take 5 days"}
    load(session, spec, [ev("2026-11-02", event_id="h", **texts)])
    reports.report_hallucination(
        session=session, event_id="h", note="wrong window", reported_by=None,
        citations=[{"article_id": "KB-7", "revision": 1}],
    )


def test_lead_confirms_with_a_note_then_undoes(live_server, new_page, spec: EvalSpec) -> None:  # type: ignore[no-untyped-def]
    live_server.seed(lambda s: _seed(s, spec))
    page = new_page()
    sign_in(page, live_server.url, "lead@example.test")
    page.goto(f"{live_server.url}/metrics/hallucinations")
    report = page.locator(".metrics-report").first
    assert "KB-7 revision 1" in report.inner_text()
    assert report.locator(".compare-diff del").inner_text() == "10" and report.locator(".compare-diff ins").inner_text() == "5"
    # The note is required: the browser will not send the form without it.
    report.locator("button[value=confirmed]").click()
    assert page.locator(".metrics-report .badge").first.inner_text() == "pending"
    report.locator("input[name=note]").fill("KB-7 says 5 days")
    report.locator("button[value=confirmed]").click()
    page.wait_for_selector("text=Report 1 confirmed.")
    page.goto(f"{live_server.url}/metrics/hallucinations?status=all")
    page.click("button:has-text('Undo “confirmed”')")
    page.wait_for_selector("text=decision undone, now pending")
    assert "undo: back to pending" in page.inner_text(".metrics-report-history")
    assert page.console_errors == []
