"""Pages of the checks: the run page, the Re-check button, the draft fragment and page."""

from __future__ import annotations

import re
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.checks.conftest import World
from webapp.checks import service
from webapp.core.spec import EvalSpec


def test_unchecked_run_page_offers_recheck_to_lead_only(world: World, client_as: Callable[..., TestClient]) -> None:
    lead = client_as("lead").get("/runs/run-a/checks")
    assert lead.status_code == 200
    assert "has not been checked yet" in lead.text
    assert 'action="/runs/' in lead.text and "Re-check" in lead.text
    labeler = client_as("labeler")
    page = labeler.get("/runs/run-a/checks")
    assert page.status_code == 200 and "Re-check</button>" not in page.text
    # ... and refuses a re-check to the labeler, and to the lead without the CSRF token.
    assert labeler.post(f"/runs/{world.a.id}/checks").status_code == 403
    lead = client_as("lead")
    lead.headers.pop("X-CSRF-Token")
    assert lead.post(f"/runs/{world.a.id}/checks").status_code == 403


def test_recheck_form_post_then_results_shown(world: World, client_as: Callable[..., TestClient]) -> None:
    lead = client_as("lead")
    r = lead.post(f"/runs/{world.a.id}/checks", follow_redirects=False)
    assert r.status_code == 303
    page = lead.get(r.headers["location"])
    assert "Re-checked 8 drafts" in page.text
    assert "75.0%" in page.text  # 6/8 overall
    assert "cites KB-3001 revision 2, which is deprecated; current is revision 4" in page.text
    assert "Fails the CI gate" in page.text
    # htmx: 204 with an event the results block listens for.
    hx = lead.post(f"/runs/{world.a.id}/checks", headers={"HX-Request": "true"})
    assert hx.status_code == 204 and hx.headers["HX-Trigger"] == "checks-updated"
    fragment = lead.get(f"/runs/{world.a.id}/checks", headers={"HX-Request": "true"})
    assert "<html" not in fragment.text and "Per check" in fragment.text


def test_draft_checks_fragment_and_page(session: Session, spec: EvalSpec, world: World, client_as: Callable[..., TestClient]) -> None:
    result = service.check_run(session=session, spec=spec, run_id=world.a.id)
    session.commit()
    r2 = next(o for o in result.summary.outcomes if o.case_id == "r2")
    c = client_as("pm")
    page = c.get(f"/drafts/{r2.draft_id}/checks")
    assert page.status_code == 200 and "<html" in page.text
    fragment = c.get(f"/drafts/{r2.draft_id}/checks", headers={"HX-Request": "true"})
    assert fragment.text.lstrip().startswith("<section")
    assert "Citations current" in fragment.text and "not applicable" in fragment.text
    assert len(re.findall(r'class="badge fail"', fragment.text)) >= 1
    assert f"/regression/cases/from-draft/{r2.draft_id}" in fragment.text
    assert c.get("/drafts/99999/checks").status_code == 404


def test_user_text_is_escaped(session: Session, spec: EvalSpec, world: World, client_as: Callable[..., TestClient]) -> None:
    from tests.factories import make_dataset, make_run

    ds = make_dataset(session, [{"case_id": "<b>x</b>", "category": "routine"}], name="xss")
    make_run(session, ds, [{"case_id": "<b>x</b>", "draft_text": "short", "intent": "<script>alert(1)</script>"}], name="xss-run")
    session.commit()
    lead = client_as("lead")
    lead.post("/runs/xss-run/checks")
    page = lead.get("/runs/xss-run/checks").text
    assert "<script>alert(1)</script>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
