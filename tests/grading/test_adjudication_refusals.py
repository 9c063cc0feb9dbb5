"""A refused adjudication keeps the lead's scores and note; a returned grade names its draft, case and grader (issue 41, item 7)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.grading.conftest import FORM, GradingWorld, disagree, post_form
from webapp.core.spec import EvalSpec
from webapp.datasets.models import EvalCase
from webapp.grading.adjudication import list_adjudications


def test_a_refused_decision_keeps_the_scores_and_the_note(
    session: Session, spec: EvalSpec, world: GradingWorld, client_as: Callable[..., TestClient]
) -> None:
    disagree(session, spec, world)
    session.commit()
    (adj,) = list_adjudications(session=session)
    lead = client_as("lead", email="lead@example.test")
    data = {**FORM, "tone": "2", "completeness": "5", "unsupported_claim": "5 days", "note": "Bob read the KB right"}
    r = post_form(lead, f"/grading/adjudication/{adj.id}/resolve", data)
    assert r.status_code == 422
    form = r.text.split(f'action="/grading/adjudication/{adj.id}/resolve"')[1].split("</form>")[0]
    assert ">Bob read the KB right</textarea>" in form
    assert 'name="tone" value="2" checked' in form and 'name="completeness" value="5" checked' in form
    assert ">5 days</textarea>" in form
    assert f"Adjudication {adj.id}:" in r.text and 'class="flash error"' in r.text


def test_a_returned_grade_names_the_draft_the_case_and_the_grader(
    session: Session, spec: EvalSpec, world: GradingWorld, client_as: Callable[..., TestClient]
) -> None:
    a, _ = disagree(session, spec, world)
    session.commit()
    (adj,) = list_adjudications(session=session)
    lead = client_as("lead", email="lead@example.test")
    r = post_form(lead, f"/grading/adjudication/{adj.id}/return", {"grade_id": str(a.id), "comment": "check the tone"})
    assert r.status_code == 303
    case = session.get(EvalCase, world.drafts[0].case_pk)
    assert case is not None
    said = f"Alice’s grade of draft {world.drafts[0].id} (case {case.case_id}) returned to Alice for another look."
    page = lead.get("/grading/adjudication").text
    assert said in page and f"Grade {a.id} returned" not in page


def test_a_refused_claim_is_said_under_save_not_above_the_page(
    session: Session, world: GradingWorld, client_as: Callable[..., TestClient]
) -> None:
    # issue 41: the refusal's banner above the page pushed Save below the fold on a phone.
    alice = client_as("labeler", email="alice@example.test")
    data = {**FORM, "factual_accuracy": "fail", "unsupported_claim": "words that are not in the draft"}
    r = post_form(alice, f"/grading/drafts/{world.drafts[0].id}", data)
    page = r.text
    assert 'id="grading-error"' in page and "Unsupported claim" in page
    assert page.index('id="grading-error"') > page.index('name="next" value="0"')  # below the Save button
