"""Chromium, keyboard only: grade five drafts, skip one with a reason, go back to revise one; after
every save the next draft is swapped in by htmx (no full page load) and the URL follows; back,
reload and htmx's history restore still show the right draft."""

from __future__ import annotations

from sqlmodel import select

from tests.browser_support import sign_in, wait_until
from tests.conftest import SPEC_PATH
from tests.grading.conftest import GradingWorld, build_world, grade
from webapp.core.spec import load_spec
from webapp.grading.models import Grade, GradingSkip

MARK = "window.__ddNoReload"


def shown(page) -> int:  # type: ignore[no-untyped-def]
    """Return the id of the draft on screen (the swapped item carries it)."""
    return int(page.get_attribute("#grading-item", "data-draft"))


def wait_for_other_draft(page, before: int) -> int:  # type: ignore[no-untyped-def]
    # Polled through the DevTools protocol: the page's CSP forbids the eval page.wait_for_function needs.
    wait_until(page, f"(() => {{ const el = document.getElementById('grading-item'); return el && el.dataset.draft !== '{before}'; }})()")
    now = shown(page)
    assert page.url.split("?")[0].endswith(f"/grading/drafts/{now}")  # hx-push-url followed the swap
    assert page.evaluate(MARK) is True, "a full page load happened"
    return now


def grade_by_keys(page, keys: list[str], rationale: str) -> int:  # type: ignore[no-untyped-def]
    """Score the draft on screen with shortcuts, type a rationale, save and next; return the new draft's id."""
    before = shown(page)
    for key in keys:
        page.keyboard.press(key)
    page.keyboard.press("n")  # into the rationale
    page.keyboard.type(rationale)
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Enter")
    after = wait_for_other_draft(page, before)
    assert f"(draft {before})" in page.inner_text("#grading-flash")
    return after


def test_keyboard_only_grading_with_skip_and_previous(live_server, new_page) -> None:  # type: ignore[no-untyped-def]
    world: GradingWorld = live_server.seed(lambda s: build_world(s, n_drafts=8))  # type: ignore[assignment]
    d = [x.id for x in world.drafts]
    base = live_server.url
    page = new_page()
    sign_in(page, base, "alice@example.test")
    page.goto(f"{base}/grading")
    # "Grade next in run-1" has the focus (autofocus is applied a moment after load)
    wait_until(page, "document.activeElement && document.activeElement.textContent.includes('Grade next in run-1')")
    page.keyboard.press("Enter")
    page.wait_for_url("**/grading/drafts/*")
    assert shown(page) == d[0]
    # The next draft is already reserved while the grader reads this one.
    assert page.get_attribute("#grading-upcoming", "data-draft") == str(d[1])
    page.evaluate(f"{MARK} = true")

    assert grade_by_keys(page, ["p", "4", "r", "f"], "first") == d[1]
    assert grade_by_keys(page, ["p", "5", "t", "g"], "second") == d[2]

    # Skip d2 with a reason, by keyboard: K opens the reasons, arrow down picks "KB missing".
    page.keyboard.press("k")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Control+Enter")
    assert wait_for_other_draft(page, d[2]) == d[3]
    assert f"Skipped draft {d[2]} (KB missing)" in page.inner_text("#grading-flash")

    assert grade_by_keys(page, ["p", "3", "e", "d"], "third") == d[4]
    # "Fail" without a quote is refused: the same draft comes back with the error and the scores kept.
    for key in ["3", "e", "d", "x"]:
        page.keyboard.press(key)
    page.keyboard.press("Escape")  # harmless: X without a selection leaves the focus on the page
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#grading-error")
    assert shown(page) == d[4] and page.evaluate(MARK) is True
    assert "Unsupported claim" in page.inner_text("#grading-error")
    assert page.is_checked("input[name=tone][value='3']")
    page.keyboard.press("p")
    assert grade_by_keys(page, [], "fourth, after the error") == d[5]

    # Previous (B): back to d4, the last grade, still waiting for its second grade; revise tone to 2 (W).
    page.keyboard.press("b")
    assert wait_for_other_draft(page, d[5]) == d[4]
    assert page.input_value("#g-rationale") == "fourth, after the error"
    page.keyboard.press("w")
    page.keyboard.press("Control+Enter")
    assert wait_for_other_draft(page, d[4]) == d[5]  # the reserved next draft, not a new one
    assert "Grade revised (draft" in page.inner_text("#grading-flash")

    assert grade_by_keys(page, ["p", "2", "w", "s"], "fifth") == d[6]

    by_alice = select(Grade).where(Grade.grader_id == world.alice.id)
    grades = live_server.seed(lambda s: list(s.exec(by_alice)))
    mine = {g.draft_id: g for g in grades}  # type: ignore[attr-defined]
    assert sorted(mine) == [d[0], d[1], d[3], d[4], d[5]]
    assert (mine[d[0]].citation_relevance, mine[d[0]].tone, mine[d[0]].completeness) == (4, 4, 4)
    assert mine[d[4]].tone == 2 and mine[d[4]].rationale == "fourth, after the error"
    skip = live_server.seed(lambda s: s.exec(select(GradingSkip)).one())
    assert (skip.draft_id, skip.grader_id, skip.reason) == (d[2], world.alice.id, "kb_missing")

    # Back button: htmx asks the server (HX-History-Restore-Request) and shows d5 with my grade.
    page.go_back()
    wait_until(page, f"document.getElementById('grading-item') && document.getElementById('grading-item').dataset.draft === '{d[5]}'")
    assert page.input_value("#g-rationale") == "fifth"
    assert "Your grade" in page.inner_text(".grading-rubric")
    # Reload: the full page of whatever the URL says.
    page.reload()
    assert shown(page) == d[5] and page.evaluate(MARK) is None
    assert page.console_errors == []


IN_VIEW = (
    "(() => { const r = document.querySelector(%r).getBoundingClientRect();"
    " return r.top >= 0 && r.bottom <= window.innerHeight; })()"
)


def test_n_continues_the_rationale_k_shows_skip_and_next_and_every_score_has_its_key(  # type: ignore[no-untyped-def]
    live_server, new_page
) -> None:
    """N puts the caret after the rationale already written; after K, "Skip and next" is on screen;
    citation relevance shows its key badges like the other criteria."""
    def seed(session):  # type: ignore[no-untyped-def]
        w = build_world(session, n_drafts=3)
        grade(session, load_spec(SPEC_PATH), w, w.alice, rationale="The refund")  # her grade, to revise
        return w

    world: GradingWorld = live_server.seed(seed)  # type: ignore[assignment]
    page = new_page()
    page.set_viewport_size({"width": 1360, "height": 700})
    sign_in(page, live_server.url, "alice@example.test")
    page.goto(f"{live_server.url}/grading/drafts/{world.drafts[0].id}")
    page.wait_for_selector("#grading-form")

    # every score of every scale carries its key, citation relevance (keys 1-5) included
    for key in ("citation_relevance", "tone", "completeness"):
        assert page.locator(f"#grading-form input[name={key}] + .grading-score kbd").count() == 5, key
    assert page.locator("#grading-form input[name=citation_relevance] + .grading-score kbd").all_inner_texts() == [
        "1", "2", "3", "4", "5"
    ]

    assert page.input_value("#grading-form textarea[name=rationale]") == "The refund"
    page.keyboard.press("n")  # into the saved rationale: carry on where it ends
    page.keyboard.type(" is not in the KB.")
    assert page.input_value("#grading-form textarea[name=rationale]") == "The refund is not in the KB."
    page.keyboard.press("Escape")

    page.goto(f"{live_server.url}/grading/drafts/{world.drafts[1].id}")  # one she has not graded: it can be skipped
    page.wait_for_selector("#grading-skip")
    page.keyboard.press("k")
    wait_until(page, "document.getElementById('grading-skip').open")
    wait_until(page, IN_VIEW % "#grading-skip-form button[type=submit]")
    assert page.evaluate("document.activeElement.name") == "reason"
    page.screenshot(path="/tmp/i5_grading_skip.png")
    assert page.console_errors == []
