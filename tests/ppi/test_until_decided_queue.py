"""Grade until decided (issue 43) in the grading queue: served in draw order, closed with the reason, a later save refused."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.conftest import csrf_for
from tests.factories import make_user
from tests.ppi.test_until_decided import T0, grade, sampled_run
from webapp.core.spec import EvalSpec
from webapp.grading.models import Grade, GradingSlot
from webapp.grading.queue import BatchFilter, next_item
from webapp.ppi.until_decided import draw_order, on_final_grade, set_until_decided

GRADE = {"factual_accuracy": "pass", "citation_relevance": 4, "tone": 4, "completeness": 4, "rationale": "ok"}


def served(session: Session, spec: EvalSpec, run_id: int, grader_id: int) -> list[int]:
    """Every draft the queue hands one grader, in the order it hands them."""
    offered: list[int] = []
    batch = BatchFilter(run_id=run_id)
    while (d := next_item(session=session, spec=spec, grader_id=grader_id, batch=batch, exclude=offered)) is not None:
        assert d.id is not None
        offered.append(d.id)
    return offered


def test_the_queue_serves_a_run_grading_until_decided_in_draw_order(session: Session, spec: EvalSpec) -> None:
    run, order = sampled_run(session)
    assert run.id is not None
    set_until_decided(session=session, run_id=run.id, now=T0)
    grader = make_user(session, email="order@example.test", roles=["labeler"])
    assert grader.id is not None
    assert served(session, spec, run.id, grader.id) == order == draw_order(session=session, run_id=run.id)


def test_once_closed_the_queue_serves_none_of_the_rest_says_why_and_a_save_is_refused(
    session: Session, spec: EvalSpec, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]
) -> None:
    run, order = sampled_run(session)
    assert run.id is not None
    set_until_decided(session=session, run_id=run.id, cap=3, now=T0)
    out = None
    graders = [make_user(session, email=f"g{k}@example.test", roles=["labeler"]) for k in range(spec.grading.graders_per_draft)]
    for draft_id in order[:3]:
        grade(session, draft_id)
        # a final grade comes with its graders' places taken: the finally graded drafts stay open to corrections
        # (which may re-open a decision) but need no grader
        for k, g in enumerate(graders):
            assert g.id is not None
            session.add(GradingSlot(draft_id=draft_id, slot=k, grader_id=g.id, reserved_at=T0, expires_at=T0 + dt.timedelta(days=3650)))
        out = on_final_grade(session=session, spec=spec, draft_id=draft_id, now=T0)
    assert out is not None and out.closed_reason == "the cap of 3 grades reached, 4 criteria undecided"
    session.commit()
    reason = out.closed_reason
    grader = make_user(session, email="late@example.test", roles=["labeler"])
    assert grader.id is not None
    assert served(session, spec, run.id, grader.id) == []
    labeler = client_as("labeler", email="page@example.test")
    page = labeler.get(f"/grading/runs/{run.id}").text
    assert 'id="grading-closed"' in page and reason in page
    assert f"{run.name}: grading closed, {reason}." in labeler.get("/grading").text
    taken = labeler.post(f"/grading/runs/{run.id}/next", data={"csrf_token": csrf_for(labeler)}, follow_redirects=True)
    assert f"Grading closed: {reason}." in taken.text
    remaining = order[3]
    answer = api_as("labeler", email="api@example.test").post("/api/v1/grades", json={"draft_id": remaining, **GRADE})
    assert answer.status_code == 409
    assert answer.json()["detail"] == f"draft {remaining} is no longer graded: run {run.id} graded until decided and closed ({reason})"
    assert session.exec(select(Grade).where(Grade.draft_id == remaining)).first() is None  # nothing half-written
    # set again (the lead lifts the cap): the rest is served again, still in draw order
    set_until_decided(session=session, run_id=run.id, cap=None, now=T0)
    session.commit()
    assert served(session, spec, run.id, grader.id) == order[3:]
