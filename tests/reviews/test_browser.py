"""The PM reviews a week in Chromium: customer message above each pair, keys, one at a time, filter."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from tests.browser_support import sign_in, wait_until
from tests.factories import make_user
from tests.metrics.conftest import ev, settle
from tests.waiting import wait_for
from webapp.core.spec import EvalSpec
from webapp.metrics.ingest import ingest_events
from webapp.reviews import service

pytestmark = pytest.mark.browser


def _seed(session: Session, spec: EvalSpec) -> None:
    make_user(session, email="pm@example.test", roles=["pm"])
    events = [
        ev("2026-11-03", action="edit", customer_message=f"Question <{i}> about my bill",
           draft_text=f"Draft answer {i}", sent_text=f"Sent answer {i}")
        for i in range(3)
    ]
    ingest_events(session=session, spec=spec, items=events)
    settle(session, spec)


def test_review_by_keyboard_without_reloads(live_server, new_page, spec: EvalSpec) -> None:  # type: ignore[no-untyped-def]
    live_server.seed(lambda s: _seed(s, spec))
    page = new_page()
    sign_in(page, live_server.url, "pm@example.test")
    page.goto(f"{live_server.url}/reviews/2026-W45")
    items = page.locator("#reviews-pairs .reviews-item")
    assert items.count() == 3
    # The customer's message stands above each pair, escaped.
    first = items.nth(0)
    customer = first.locator(".reviews-customer").inner_text()
    assert "Question <" in customer and "> about my bill" in customer
    assert first.locator(".reviews-customer").bounding_box()["y"] < first.locator(".reviews-pair").bounding_box()["y"]
    page.evaluate("window.__noReload = true")
    assert "reviews-current" in (first.get_attribute("class") or "")

    page.keyboard.press("1")  # Good: saved, and the pair stays current
    page.wait_for_selector("#reviews-pairs .reviews-item.reviews-verdict-good")
    wait_until(page, "document.querySelector('#review-progress').innerText.includes('1/3 reviewed')")
    assert "reviews-current" in (items.nth(0).get_attribute("class") or "")
    page.keyboard.press("j")
    assert "reviews-current" in (items.nth(1).get_attribute("class") or "")
    page.keyboard.press("k")
    assert "reviews-current" in (items.nth(0).get_attribute("class") or "")
    page.keyboard.press("j")
    page.keyboard.press("n")
    assert page.evaluate("document.activeElement.name") == "notes"
    page.keyboard.type("tone is off")
    page.keyboard.press("Escape")
    page.keyboard.press("2")  # Minor issue, with the typed note
    wait_until(page, "document.querySelector('#review-progress').innerText.includes('2/3 reviewed')")
    assert page.evaluate("window.__noReload") is True, "a verdict reloaded the page"

    # One pair at a time: only the current pair is visible.
    page.click("#reviews-one-at-a-time")
    visible = [items.nth(i).is_visible() for i in range(items.count())]
    assert visible.count(True) == 1 and visible[1]  # the pair just judged stays current

    # The filter leaves the one unreviewed pair, and it survives a reload.
    page.goto(f"{live_server.url}/reviews/2026-W45?show=unreviewed")
    assert page.locator("#reviews-pairs .reviews-item").count() == 1
    page.reload()
    assert page.locator("#reviews-pairs .reviews-item").count() == 1
    assert page.console_errors == []


def _notes(session: Session, period: str) -> list[tuple[str | None, str]]:
    sample = service.get_sample(session=session, period=period)
    assert sample is not None
    return [(i.verdict, i.notes or "") for i, _ in service.sample_items(session=session, sample=sample)]


def test_verdict_key_then_n_puts_the_note_on_the_judged_pair(live_server, new_page, spec: EvalSpec) -> None:  # type: ignore[no-untyped-def]
    """"3, then n to say why": the note is typed into, and saved on, the pair that got the verdict,
    even when n and the typing come while the verdict's save is still in flight."""
    live_server.seed(lambda s: _seed(s, spec))
    page = new_page()
    sign_in(page, live_server.url, "pm@example.test")
    page.goto(f"{live_server.url}/reviews/2026-W45")
    items = page.locator("#reviews-pairs .reviews-item")
    page.keyboard.press("3")  # Major issue on pair 1 ...
    page.keyboard.press("n")  # ... and at once: say why
    wait_until(page, "document.activeElement && document.activeElement.name === 'notes'")
    assert page.evaluate("document.activeElement.closest('.reviews-item').id") == items.nth(0).get_attribute("id")
    page.keyboard.type("promises a refund")
    page.wait_for_selector("#reviews-pairs .reviews-item.reviews-verdict-major_issue")
    wait_until(page, "document.querySelector('#review-progress').innerText.includes('1/3 reviewed')")
    # the typing survived the swap of the saved pair, in its notes field
    assert page.evaluate("document.activeElement.closest('.reviews-item').id") == items.nth(0).get_attribute("id")
    assert items.nth(0).locator("input[name=notes]").input_value() == "promises a refund"
    page.keyboard.press("Enter")  # saves the note with the pair's verdict
    wait_for(lambda: live_server.seed(lambda s: _notes(s, "2026-W45"))[0][1] == "promises a refund", timeout=10,
             what="the note saved on pair 1", interval=0.1)
    saved = live_server.seed(lambda s: _notes(s, "2026-W45"))
    assert saved == [("major_issue", "promises a refund"), (None, ""), (None, "")]
    assert "reviews-current" in (items.nth(0).get_attribute("class") or "")
    assert page.console_errors == []
