"""Review pages: periods list, a finished week drawn on first view, verdicts via htmx, escaping."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.metrics.conftest import ev, load
from webapp.core.spec import EvalSpec
from webapp.regression import service as regression_service
from webapp.reviews import service


def _first_item(session: Session):  # type: ignore[no-untyped-def]
    """The first pair of week 45's sample, read afresh (the page drew it)."""
    session.expire_all()
    sample = service.get_sample(session=session, period="2026-W45")
    assert sample is not None
    return service.sample_items(session=session, sample=sample)[0][0]


def test_review_flow(session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
    load(session, spec, [ev("2026-11-03", action="edit", draft_text="Refunds take <b>5</b> days", sent_text="Refunds take 3 days") for _ in range(3)])
    pm = client_as("pm")
    index = pm.get("/reviews")
    assert "2026-W45" in index.text and "not drawn yet" in index.text
    page = pm.get("/reviews/2026-W45")  # a past week: drawn on first view
    assert "0/3 reviewed" in page.text
    assert "<del>&lt;b&gt;5&lt;/b&gt;</del>" in page.text and "<ins>3</ins>" in page.text
    item = _first_item(session)
    r = pm.post(f"/reviews/items/{item.id}/verdict", data={"verdict": "minor_issue", "notes": "tone"}, headers={"HX-Request": "true"})
    assert r.status_code == 200 and r.headers["HX-Trigger"] == "review-updated"
    assert f'id="item-{item.id}"' in r.text and "<html" not in r.text
    assert "1/3 reviewed" in pm.get("/reviews/2026-W45/progress", headers={"HX-Request": "true"}).text
    assert pm.post(f"/reviews/items/{item.id}/verdict", data={"verdict": "bogus"}).status_code == 422
    assert "Weekly review" in pm.get("/").text
    added = pm.post(f"/reviews/items/{item.id}/regression", data={"input": "Where is my refund?", "reference": "Refunds take 3 days"}, headers={"HX-Request": "true"})
    assert added.status_code == 200 and f"Added to the regression suite as review-{item.event_id}" in added.text
    # Said at the moment of adding: no dataset holds the case, so the next run must include it.
    assert f"The next run must include review-{item.event_id}: no dataset holds it yet" in added.text
    assert "draftdesk regression export regression-suite.jsonl" in added.text
    assert pm.post(f"/reviews/items/{item.id}/regression", data={"input": " "}, follow_redirects=False).status_code == 303  # already added: kept


def test_unknown_period_is_404_and_a_labeler_is_turned_away(client_as: Callable[..., TestClient]) -> None:
    assert client_as("pm").get("/reviews/2026-W99").status_code == 404
    assert client_as("labeler").get("/reviews").status_code == 403


def test_regression_form_asks_for_an_editable_reference(session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
    load(session, spec, [ev("2026-11-03", action="edit", draft_text="Draft", sent_text="Full <refund> today, promised") for _ in range(2)])
    pm = client_as("pm")
    page = pm.get("/reviews/2026-W45")
    # The reference is a field of the form, prefilled with the sent text (escaped) and editable.
    assert '<textarea name="reference" rows="4" required>Full &lt;refund&gt; today, promised</textarea>' in page.text
    item = _first_item(session)
    url = f"/reviews/items/{item.id}/regression"
    empty = pm.post(url, data={"input": "Can I get a refund?", "reference": "  "}, follow_redirects=False)
    assert empty.status_code == 422 and "reference" in empty.text
    assert client_as("labeler").post(url, data={"input": "x", "reference": "y"}).status_code == 403
    no_csrf = TestClient(pm.app, base_url=str(pm.base_url), cookies=dict(pm.cookies))
    assert no_csrf.post(url, data={"input": "x", "reference": "y"}, follow_redirects=False).status_code == 403
    assert regression_service.list_cases(session=session) == []
    ok = pm.post(url, data={"input": "Can I get a refund?", "reference": "We cannot promise a refund."}, follow_redirects=False)
    assert ok.status_code == 303
    session.expire_all()
    (case,) = regression_service.list_cases(session=session)
    assert (case.input, case.reference) == ("Can I get a refund?", "We cannot promise a refund.")


def test_drawing_a_future_week_is_refused_naming_it(session: Session, client_as: Callable[..., TestClient]) -> None:
    pm = client_as("pm")
    r = pm.post("/reviews/2099-W01/draw", follow_redirects=False)
    assert r.status_code == 422 and "2099-W01 has not begun" in r.text
    assert pm.post("/reviews/1999-W01/draw", follow_redirects=False).status_code == 422
    assert service.get_sample(session=session, period="2099-W01") is None
    assert service.get_sample(session=session, period="1999-W01") is None


def test_the_home_card_names_the_newest_week_with_drafts(
    session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
) -> None:
    # issue 41: W46 drawn, W47 the newest week with sent drafts, the week just ended empty: the card showed W46.
    load(session, spec, [ev("2026-11-10", action="edit", draft_text="a", sent_text="b"), ev("2026-11-17", action="edit", draft_text="c", sent_text="d")])
    service.draw_sample(session=session, spec=spec, period="2026-W46", today=service.period_bounds("2026-W47")[1])
    session.commit()
    home = client_as("pm").get("/").text
    assert "Weekly review 2026-W47 is ready" in home and 'href="/reviews/2026-W47"' in home
