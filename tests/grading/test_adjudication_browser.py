"""Chromium: after "Take A's scores" the prefilled final-grade form is on screen, focused and marked."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from tests.browser_support import sign_in, wait_until
from tests.conftest import SPEC_PATH
from tests.grading.conftest import GradingWorld, build_world, grade
from webapp.core.spec import load_spec

pytestmark = pytest.mark.browser

IN_VIEW = (
    "(() => { const r = document.querySelector(%r).getBoundingClientRect();"
    " return r.top >= 0 && r.top < window.innerHeight; })()"
)


def _seed(session: Session) -> GradingWorld:
    spec = load_spec(SPEC_PATH)
    w = build_world(session, n_drafts=2)
    grade(session, spec, w, w.alice, factual="fail")  # A quotes the refund promise
    grade(session, spec, w, w.bob, factual="pass", tone=1)
    return w


def test_take_a_scores_brings_the_prefilled_form_into_view(live_server, new_page) -> None:  # type: ignore[no-untyped-def]
    live_server.seed(_seed)
    page = new_page()
    page.set_viewport_size({"width": 1360, "height": 700})
    sign_in(page, live_server.url, "lead@example.test")
    page.goto(f"{live_server.url}/grading/adjudication")
    page.locator("a.button", has_text="Take A’s scores").first.click()
    page.wait_for_url("**take=**")
    form = "details.grading-resolve.grading-taken"
    wait_until(page, IN_VIEW % form)
    assert page.locator(form).get_attribute("open") is not None
    assert page.evaluate(f"document.querySelector({form!r}).contains(document.activeElement)")
    assert page.evaluate("[document.activeElement.name, document.activeElement.value]") == ["factual_accuracy", "fail"]
    assert "grading-taken-cue" in (page.locator(form).get_attribute("class") or "")
    assert "Prefilled with A’s scores" in page.locator(form).inner_text()
    assert page.is_checked(f"{form} input[name=factual_accuracy][value=fail]")
    assert page.input_value(f"{form} textarea[name=unsupported_claim]") == "We will refund you 200 dollars."
    page.screenshot(path="/tmp/i5_adjudication_take.png")
    assert page.console_errors == []
