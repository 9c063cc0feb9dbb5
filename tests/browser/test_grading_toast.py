"""Grading at 1440x900: the draft's first lines and the whole rubric are on screen; the post-save message
is a toast that moves nothing ("Save and next" stays on screen); X with nothing selected marks Fail without
capturing the next score keys. At 390x844 nothing is wider than the screen and score buttons are >= 44 px."""

from __future__ import annotations

from tests.browser.test_grading_keyboard import MARK, shown, wait_for_other_draft
from tests.browser_support import sign_in, wait_until
from tests.grading.conftest import build_world

# Is the button's centre the topmost thing there (on screen, not clipped by the sticky rubric, not covered)?
SAVE_NEXT_VISIBLE = """(() => {
  const b = document.querySelector('#grading-form button[name=next][value="1"]');
  if (!b) return false;
  const r = b.getBoundingClientRect();
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  if (y < 0 || y > window.innerHeight || x < 0 || x > window.innerWidth) return false;
  const hit = document.elementFromPoint(x, y);
  return hit !== null && b.contains(hit);
})()"""
RUBRIC_TOP = "document.querySelector('.grading-layout').getBoundingClientRect().top"
BOXES = """() => {
  const r = (sel) => document.querySelector(sel).getBoundingClientRect();
  const buttons = [...document.querySelectorAll('.grading-rubric .grading-choice')]
    .map(e => e.getBoundingClientRect().height);
  return {draftTop: r('#grading-draft-text').top, rubricBottom: r('.grading-rubric').bottom,
          saveBottom: r('#grading-form button.primary').bottom,
          scrollWidth: document.documentElement.scrollWidth, minButton: Math.min(...buttons)};
}"""
CHECKED = (
    "Object.fromEntries(['factual_accuracy', 'citation_relevance', 'tone', 'completeness'].map("
    "n => [n, (document.querySelector('#grading-form input[name=' + n + ']:checked') || {}).value || null]))"
)
CLAIM = "#grading-form textarea[name=unsupported_claim]"


def _open_next_draft(page, base: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{base}/grading")
    page.get_by_text("Grade next in run-1").first.click()
    page.wait_for_url("**/grading/drafts/*")
    page.evaluate(f"{MARK} = true")


def test_grading_layout_toast_and_x_key(live_server, new_page) -> None:  # type: ignore[no-untyped-def]
    live_server.seed(lambda s: build_world(s, n_drafts=4))
    page = new_page()
    page.set_viewport_size({"width": 1440, "height": 900})
    sign_in(page, live_server.url, "alice@example.test")
    _open_next_draft(page, live_server.url)
    box = page.evaluate(BOXES)
    assert box["draftTop"] < 300 and box["rubricBottom"] <= 900 and box["saveBottom"] <= 900, box

    # X without a selection marks Fail and leaves the score keys scoring
    page.evaluate("window.getSelection().removeAllRanges()")
    for key in ["x", "4", "r", "f"]:
        page.keyboard.press(key)
    assert page.evaluate(CHECKED) == {
        "factual_accuracy": "fail", "citation_relevance": "4", "tone": "4", "completeness": "4"
    }
    assert page.input_value(CLAIM) == ""
    assert page.evaluate("document.activeElement && document.activeElement.name") != "unsupported_claim"
    # the claim box is marked as needed; C goes into it to type the quote
    assert page.locator(".grading-claim-needed textarea[name=unsupported_claim]").count() == 1
    page.keyboard.press("c")
    assert page.evaluate("document.activeElement.name") == "unsupported_claim"
    page.keyboard.type("a claim")
    assert page.input_value(CLAIM) == "a claim"
    assert page.locator(".grading-claim-needed").count() == 0

    _open_next_draft(page, live_server.url)  # the same reserved draft, a fresh form
    assert page.evaluate(SAVE_NEXT_VISIBLE), "Save and next is not on screen before any save"
    layout_top = page.evaluate(RUBRIC_TOP)
    first = shown(page)
    for key in ["p", "4", "r", "f"]:
        page.keyboard.press(key)
    page.keyboard.press("Control+Enter")
    second = wait_for_other_draft(page, first)
    assert second != first
    toast = page.locator("#grading-flash")
    assert f"(draft {first})" in toast.inner_text()
    assert page.evaluate(SAVE_NEXT_VISIBLE), "Save and next went below the fold (or under the message)"
    assert page.evaluate(RUBRIC_TOP) == layout_top, "the message moved the page down"
    assert toast.get_attribute("aria-live") == "polite"
    assert page.evaluate("getComputedStyle(document.getElementById('grading-flash')).position") == "fixed"
    # a plain Save (same draft again, with the message) keeps it on screen too
    for key in ["p", "5", "t", "g"]:
        page.keyboard.press(key)
    page.keyboard.press("Control+s")
    wait_until(page, "(() => { const t = document.getElementById('grading-flash');"
                     " return t && t.textContent.trim() === 'Grade saved.'; })()")
    assert shown(page) == second
    assert page.evaluate(RUBRIC_TOP) == layout_top
    assert page.evaluate(SAVE_NEXT_VISIBLE)

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(page.url)
    box = page.evaluate(BOXES)
    assert box["scrollWidth"] <= 390 and box["minButton"] >= 44, box
    assert page.console_errors == []
