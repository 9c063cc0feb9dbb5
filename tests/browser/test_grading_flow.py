"""Chromium: two labelers grade the same draft differently with the keyboard, the disagreeing grader
sees the lock, the lead adjudicates, and the final grade and the agreement page follow; a third labeler
grades another draft with JavaScript off."""

from __future__ import annotations

from tests.browser_support import sign_in
from tests.grading.conftest import GradingWorld, build_world


def grade_next_with_keys(page, base: str, keys: list[str]) -> str:  # type: ignore[no-untyped-def]
    """Take the next item from the queue, score it with shortcuts, save-and-next; return the graded draft's URL."""
    page.goto(f"{base}/grading")
    page.click("text=Grade next in run-1")
    page.wait_for_url("**/grading/drafts/*")
    url = page.url.split("?")[0]
    page.locator("h1").click()  # focus the page, not a text box
    for key in keys:
        page.keyboard.press(key)
    page.fill("textarea[name=rationale]", "graded in the browser")
    page.keyboard.press("Control+Enter")
    page.wait_for_url(lambda u: u.split("?")[0] != url)
    return url


def test_two_labelers_disagree_and_lead_resolves(live_server, new_page, browser) -> None:  # type: ignore[no-untyped-def]
    world: GradingWorld = live_server.seed(lambda s: build_world(s))  # type: ignore[assignment]
    base = live_server.url
    draft_id = world.drafts[0].id

    alice = new_page()
    sign_in(alice, base, "alice@example.test")
    # Factual pass (P), citation relevance 4, tone 4 (R), completeness 4 (F).
    assert grade_next_with_keys(alice, base, ["p", "4", "r", "f"]).endswith(f"/grading/drafts/{draft_id}")

    bob = new_page()
    sign_in(bob, base, "bob@example.test")
    bob.goto(f"{base}/grading/drafts/{draft_id}")
    assert "graded in the browser" not in bob.content()  # blind until Bob has graded
    # Same draft (the oldest with a free place); tone 1 (Q) against Alice's 4.
    assert grade_next_with_keys(bob, base, ["p", "4", "q", "f"]).endswith(f"/grading/drafts/{draft_id}")
    bob.goto(f"{base}/grading/drafts/{draft_id}")  # disagreeing: the lock, not the form
    assert "the lead decides or returns" in bob.inner_text("#grading-locked")
    assert bob.locator("#grading-form").count() == 0

    lead = new_page()
    sign_in(lead, base, "lead@example.test")
    lead.goto(f"{base}/grading/agreement")
    assert lead.inner_text("#agreement-pairs") == "1"
    assert lead.inner_text("#agreement-disagreement") == "100.0%"
    assert "+1.00" not in lead.content()  # no final grade yet, so no bias

    lead.goto(f"{base}/grading/adjudication")
    card = lead.locator(".grading-adjudication").filter(has_text=f"Draft {draft_id}")
    assert "tone: 4 vs 1" in card.inner_text()
    form = card.locator(".grading-resolve form")
    form.locator("label.grading-choice:has(input[name=factual_accuracy][value=pass])").click()
    for name, value in (("citation_relevance", 4), ("tone", 3), ("completeness", 4)):
        form.locator(f"label.grading-choice:has(input[name={name}][value='{value}'])").click()
    form.locator("textarea[name=note]").fill("Tone is stiff but acceptable.")
    with lead.expect_navigation(url="**/grading/adjudication"):
        form.locator("button[type=submit]").click()
    assert "No open disagreements." in lead.content()
    assert f"Draft {draft_id}: final grade set." in lead.content()  # the signed one-time message, not the URL

    lead.goto(f"{base}/grading/drafts/{draft_id}")
    lead.click("summary:has-text('Other grades and outcome')")  # folded for a lead who has not graded it
    outcome = lead.inner_text(".grading-others")
    assert "Final grade" in outcome and "adjudication" in outcome
    assert "Tone appropriateness 3.0" in lead.content()
    assert "Tone is stiff but acceptable." in lead.content()

    lead.goto(f"{base}/grading/agreement")
    html = lead.content()
    assert "+1.00" in html and "-2.00" in html  # Alice 4 and Bob 1 against the final 3
    for page in (alice, bob, lead):
        assert page.console_errors == []

    ctx = browser.new_context(java_script_enabled=False)  # the grading page works without JavaScript
    carol = ctx.new_page()
    sign_in(carol, base, "carol@example.test")
    carol.goto(f"{base}/grading/drafts/{world.drafts[-1].id}")  # one nobody holds
    scores = (("factual_accuracy", "pass"), ("citation_relevance", "5"), ("tone", "5"), ("completeness", "5"))
    for name, value in scores:
        carol.locator(f"label.grading-choice:has(input[name={name}][value='{value}'])").click()
    with carol.expect_navigation():
        carol.click("button[name=next][value='0']")
    assert "Your grade" in carol.content() and "Grade saved." in carol.content()
    ctx.close()
