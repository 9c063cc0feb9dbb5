"""With a PPI sample, the grading queue offers only the drawn drafts, in random order, still blind."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session, col, select

from tests.factories import make_user
from tests.ppi.conftest import JUDGE, build_run
from webapp.core.spec import EvalSpec
from webapp.grading.plan import planned_drafts
from webapp.grading.queue import BatchFilter, batch_counts, batch_drafts_stmt, next_item
from webapp.ppi.models import PpiDraw
from webapp.ppi.service import draw_further_sample, draw_sample
from webapp.runs.models import Draft

GRADE = {"factual_accuracy": "pass", "citation_relevance": 4, "tone": 4, "completeness": 4, "rationale": "ok"}


def drawn_ids(session: Session, run_id: int) -> list[int]:
    rows = session.exec(select(PpiDraw).where(PpiDraw.run_id == run_id).order_by(col(PpiDraw.draft_id))).all()
    return sorted({r.draft_id for r in rows if r.drawn})


class TestQueueFilter:
    def test_only_drawn_drafts_in_random_order(self, session: Session, spec: EvalSpec) -> None:
        run, drafts = build_run(session, n=120, golden=0)
        draw_sample(session=session, run_id=run.id, budget=20, judge_version=JUDGE, seed=4)  # type: ignore[arg-type]
        session.commit()
        drawn = drawn_ids(session, run.id)  # type: ignore[arg-type]
        assert 24 + 5 < len(drawn) < len(drafts)  # 24 forced (safety, adversarial) plus about 20
        grader = make_user(session, email="g@example.test", roles=["labeler"])
        batch = BatchFilter(run_id=run.id)  # type: ignore[arg-type]
        offered = []
        while (d := next_item(session=session, spec=spec, grader_id=grader.id, batch=batch, exclude=offered)) is not None:  # type: ignore[arg-type]
            offered.append(d.id)
        assert sorted(offered) == drawn
        assert offered == planned_drafts(session=session, run_id=run.id)  # type: ignore[arg-type]
        assert offered != sorted(offered)  # not case order
        listed = [d.id for d, _ in session.exec(batch_drafts_stmt(batch)).all()]
        assert listed == offered  # the batch list shows the plan's order too
        counts = batch_counts(session=session, spec=spec, batch=batch)
        assert counts.drafts == len(drawn)  # progress counts only the drawn drafts
        # a further sample adds its drafts after the first
        first = planned_drafts(session=session, run_id=run.id) or []  # type: ignore[arg-type]
        draw_further_sample(session=session, run_id=run.id, budget=20, seed=9)  # type: ignore[arg-type]
        both = planned_drafts(session=session, run_id=run.id) or []  # type: ignore[arg-type]
        assert both[: len(first)] == first
        assert sorted(both) == drawn_ids(session, run.id)  # type: ignore[arg-type]

    def test_a_run_without_sample_is_graded_whole(self, session: Session) -> None:
        run, drafts = build_run(session, n=10)
        assert planned_drafts(session=session, run_id=run.id) is None  # type: ignore[arg-type]
        listed = [d.id for d, _ in session.exec(batch_drafts_stmt(BatchFilter(run_id=run.id))).all()]  # type: ignore[arg-type]
        assert sorted(listed) == sorted(d.id for d in drafts)  # type: ignore[misc]


class TestBlind:
    def test_no_judge_score_or_pi_reaches_the_grader_before_grading(
        self, session: Session, api_as: Callable[..., TestClient], client_as: Callable[..., TestClient]
    ) -> None:
        run, _ = build_run(session, n=40, golden=0)
        draw_sample(session=session, run_id=run.id, budget=10, judge_version=JUDGE, seed=2)  # type: ignore[arg-type]
        session.commit()
        rows = {r.draft_id: r for r in session.exec(select(PpiDraw).where(PpiDraw.run_id == run.id))}
        api = api_as("labeler", email="alice@example.test")
        answer = api.post(f"/api/v1/grading/runs/{run.id}/next")
        assert answer.status_code == 200
        draft_id = answer.json()["draft_id"]
        assert rows[draft_id].drawn
        assert set(answer.json()) == {"draft_id", "reserved_minutes"}
        page = client_as("labeler", email="alice@example.test").get(f"/grading/drafts/{draft_id}")
        assert page.status_code == 200
        row = rows[draft_id]
        for leak in ("judge-v1", "inclusion", f"{row.pi:.4f}", f"{row.judge_score:g}", '"request"'):
            assert leak not in page.text, leak
        grades = api.get(f"/api/v1/drafts/{draft_id}/grades")
        assert "judge" not in grades.text and "pi" not in grades.json()


class TestSavingByIdFollowsTheQueue:
    """Issue 41: a save by draft id applies the queue's rule (drawn, not a fallback, not escalated), API and page alike."""

    def test_a_draft_the_sample_did_not_draw_is_refused_with_the_reason(
        self, session: Session, api_as: Callable[..., TestClient], client_as: Callable[..., TestClient]
    ) -> None:
        from tests.grading.conftest import post_form
        from webapp.grading.models import Grade

        run, drafts = build_run(session, n=40, golden=0)
        draw_sample(session=session, run_id=run.id, budget=10, judge_version=JUDGE, seed=2)  # type: ignore[arg-type]
        session.commit()
        drawn = set(drawn_ids(session, run.id))  # type: ignore[arg-type]
        undrawn = next(d.id for d in drafts if d.id not in drawn)
        api = api_as("labeler", email="outside@example.test")
        answer = api.post("/api/v1/grades", json={"draft_id": undrawn, **GRADE})
        assert answer.status_code == 409  # 201 on 3c27e1d
        assert answer.json()["detail"] == (
            f"draft {undrawn} was not drawn in run {run.id}'s sample: only the drafts the sample drew are graded, as the "
            "grading queue offers them (a team lead can draw a further sample on the run's intervals page)"
        )
        page = post_form(client_as("labeler", email="outside-page@example.test"), f"/grading/drafts/{undrawn}", {**GRADE, "factual_accuracy": "pass"})
        assert page.status_code == 409 and "was not drawn in run" in page.text
        assert session.exec(select(Grade).where(Grade.draft_id == undrawn)).first() is None  # nothing half-written
        # A drawn draft is graded as before.
        ok = api.post("/api/v1/grades", json={"draft_id": min(drawn), **GRADE})
        assert ok.status_code == 201, ok.text

    def test_an_escalation_and_a_fallback_are_refused(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        from tests.factories import make_dataset, make_run

        ds = make_dataset(session, [{"case_id": "esc"}, {"case_id": "fb"}], name="outside")
        run = make_run(session, ds, [{"case_id": "esc", "draft_text": None, "escalated": True}, {"case_id": "fb", "draft_text": None, "confidence": 0.3}], name="outside")
        session.commit()
        esc, fb = sorted(d.id for d in session.exec(select(Draft).where(Draft.run_id == run.id)))  # type: ignore[type-var]
        api = api_as("labeler", email="outside2@example.test")
        a = api.post("/api/v1/grades", json={"draft_id": esc, **GRADE})
        assert (a.status_code, a.json()["detail"]) == (409, f"draft {esc} is an escalation: there is no draft text to grade")
        b = api.post("/api/v1/grades", json={"draft_id": fb, **GRADE})
        assert b.status_code == 409
        assert b.json()["detail"] == f"draft {fb} is a fallback (no draft was shown, the confidence was too low): there is nothing to grade"


def test_a_further_sample_says_about_how_many_it_asked_for_and_how_many_it_drew(
    session: Session, client_as: Callable[..., TestClient]
) -> None:
    # issue 41: a further sample of "25" added 16 drafts with no word (Bernoulli draws).
    run, _ = build_run(session, n=120, golden=0)
    draw_sample(session=session, run_id=run.id, budget=20, judge_version=JUDGE, seed=4)  # type: ignore[arg-type]
    session.commit()
    before = len(session.exec(select(PpiDraw).where(PpiDraw.run_id == run.id, PpiDraw.drawn)).all())
    lead = client_as("lead")
    r = lead.post(f"/ppi/runs/{run.name}/further-sample", data={"budget": "25"}, follow_redirects=False)
    assert r.status_code == 303
    session.expire_all()
    rows = session.exec(select(PpiDraw).where(PpiDraw.run_id == run.id, PpiDraw.round == 2, PpiDraw.drawn)).all()
    assert before > 0 and rows
    page = lead.get(r.headers["location"]).text
    assert f"about 25 (Bernoulli draws: each draft drawn on its own with its probability, so the count varies), drew {len(rows)};" in page
