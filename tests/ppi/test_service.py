"""The judge pass's storage and the stored sample: forced strata, floor, budget, seeds, append-only, before grading."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlmodel import Session, col, select

from tests.factories import make_user
from tests.ppi.conftest import JUDGE, build_run, category_of
from webapp.grading.models import FinalGrade, Grade
from webapp.ppi.models import PpiDraw, PpiErrorModel, PpiJudgeScore
from webapp.ppi.sampler import draw
from webapp.ppi.service import (
    JudgeScoreIn,
    PpiError,
    draw_further_sample,
    draw_sample,
    drawn_draft_ids,
    judge_scores,
    overall_score,
    record_judge_scores,
    redraw_from_rows,
    run_sample,
)


def rows_of(session: Session, run_id: int, round_no: int = 1) -> list[PpiDraw]:
    query = select(PpiDraw).where(PpiDraw.run_id == run_id, PpiDraw.round == round_no)
    return list(session.exec(query.order_by(col(PpiDraw.draft_id))))


class TestJudgeScores:
    def test_scores_are_stored_with_version_and_raw_calls(self, session: Session) -> None:
        run, drafts = build_run(session, n=20)
        stored = judge_scores(session=session, run_id=run.id, judge_version=JUDGE)  # type: ignore[arg-type]
        assert set(stored) == {d.id for d in drafts}
        first = stored[drafts[0].id]  # type: ignore[index]
        assert first.factual_accuracy == "fail" and first.citation_relevance == 1.0
        assert first.raw_calls == [{"request": {"draft": drafts[0].id}, "response": "{}"}]

    def test_bad_scores_or_other_runs_drafts_store_nothing(self, session: Session) -> None:
        run, drafts = build_run(session, n=5)
        good = JudgeScoreIn(drafts[0].id, "pass", 4, 4, 4)  # type: ignore[arg-type]
        bad = JudgeScoreIn(drafts[1].id, "pass", 4, 9, 4)  # type: ignore[arg-type]
        with pytest.raises(PpiError, match=r"^scores\[1\]\.tone: 9.0 is outside 1-5"):
            record_judge_scores(session=session, run_id=run.id, judge_version="judge-v2", scores=[good, bad])  # type: ignore[arg-type]
        assert session.exec(select(PpiJudgeScore).where(PpiJudgeScore.judge_version == "judge-v2")).first() is None
        _, other = build_run(session, n=5, name="run-2", dataset_name="other")
        with pytest.raises(PpiError, match=r"^scores\[0\]\.draft_id: draft \d+ is not in run"):
            record_judge_scores(session=session, run_id=run.id, judge_version="v2", scores=[JudgeScoreIn(other[0].id, "pass", 3, 3, 3)])  # type: ignore[arg-type]

    def test_overall_score(self) -> None:
        assert overall_score("pass", 4, 3, 5) == 4.25
        assert overall_score("fail", 4, 3, 5) == 3.25


class TestDrawSample:
    def test_pi_forced_floor_budget_and_no_zero(self, session: Session) -> None:
        run, drafts = build_run(session, n=200)
        summary = draw_sample(session=session, run_id=run.id, budget=40, judge_version=JUDGE, seed=11)  # type: ignore[arg-type]
        rows = rows_of(session, run.id)  # type: ignore[arg-type]
        assert len(rows) == 200 and summary.round == 1
        forced = [r for r in rows if r.forced]
        # 20 safety + 20 adversarial + 2 golden cases
        assert len(forced) == 42 and summary.forced == 42
        assert all(r.pi == 1.0 and r.drawn for r in forced)
        assert {r.stratum for r in forced} >= {"safety", "adversarial"}
        free = [r for r in rows if not r.forced]
        assert abs(sum(r.pi for r in free) - 40) < 1e-9
        assert min(r.pi for r in free) >= 0.5 * 40 / 200 - 1e-12
        assert all(r.pi > 0 for r in rows)
        assert all(r.seed == 11 and r.judge_version == JUDGE and r.budget == 40 for r in rows)
        assert summary.error_model_id is None  # no earlier grades: uniform
        assert len({round(r.pi, 12) for r in free}) == 1

    def test_the_stored_seed_reproduces_the_draws_and_draws_are_append_only(self, session: Session) -> None:
        run, _ = build_run(session, n=100)
        draw_sample(session=session, run_id=run.id, budget=30, judge_version=JUDGE)  # type: ignore[arg-type]
        session.commit()
        rows = rows_of(session, run.id)  # type: ignore[arg-type]
        again = draw([r.pi for r in rows], rows[0].seed)
        assert [r.drawn for r in rows] == again.tolist()
        assert redraw_from_rows(session=session, run_id=run.id) == {r.draft_id: r.drawn for r in rows}  # type: ignore[arg-type]
        for sql in ("UPDATE ppi_draw SET pi = 0.5", "DELETE FROM ppi_draw"):
            with pytest.raises((DBAPIError, IntegrityError), match="ppi draws are append-only"):
                session.exec(text(sql))  # type: ignore[call-overload]
            session.rollback()
        assert len(rows_of(session, run.id)) == 100  # type: ignore[arg-type]

    def test_regression_cases_are_forced(self, session: Session) -> None:
        from webapp.regression.models import RegressionCase

        lead = make_user(session, email="lead@example.test", roles=["lead"])
        run, drafts = build_run(session, n=30)
        session.add(RegressionCase(case_id="eval-case-25", input="x", note="n", source="run", created_by=lead.id))  # type: ignore[arg-type]
        session.flush()
        draw_sample(session=session, run_id=run.id, budget=5, judge_version=JUDGE, seed=1)  # type: ignore[arg-type]
        row = next(r for r in rows_of(session, run.id) if r.draft_id == drafts[25].id)  # type: ignore[arg-type]
        assert row.forced and row.pi == 1.0 and row.drawn

    def test_refused_once_anyone_has_graded(self, session: Session) -> None:
        run, drafts = build_run(session, n=20)
        grader = make_user(session, email="g@example.test", roles=["labeler"])
        session.add(Grade(draft_id=drafts[0].id, grader_id=grader.id, factual_accuracy="pass", citation_relevance=3, tone=3, completeness=3))  # type: ignore[arg-type]
        session.flush()
        with pytest.raises(PpiError, match="^run: 1 grades already exist"):
            draw_sample(session=session, run_id=run.id, budget=5, judge_version=JUDGE)  # type: ignore[arg-type]
        assert rows_of(session, run.id) == []  # type: ignore[arg-type]

    def test_refused_without_judge_scores_for_every_draft_or_a_second_time(self, session: Session) -> None:
        run, _ = build_run(session, n=20)
        # no sample yet: no filter on the queue, and no further sample
        assert drawn_draft_ids(session=session, run_id=run.id) is None  # type: ignore[arg-type]
        with pytest.raises(PpiError, match="^run: this run has no sample yet"):
            draw_further_sample(session=session, run_id=run.id, budget=2)  # type: ignore[arg-type]
        with pytest.raises(PpiError, match="^judge_version: 20 of 20 drafts have no score from judge 'judge-v9'"):
            draw_sample(session=session, run_id=run.id, budget=5, judge_version="judge-v9")  # type: ignore[arg-type]
        draw_sample(session=session, run_id=run.id, budget=5, judge_version=JUDGE)  # type: ignore[arg-type]
        with pytest.raises(PpiError, match="^run: this run already has a sample"):
            draw_sample(session=session, run_id=run.id, budget=5, judge_version=JUDGE)  # type: ignore[arg-type]

    def test_error_model_from_earlier_runs_is_frozen_and_steers_pi(self, session: Session) -> None:
        earlier, old_drafts = build_run(session, n=100, name="earlier", dataset_name="old")
        # Humans agree with the judge on routine drafts, and are far below it on edge drafts.
        scores = judge_scores(session=session, run_id=earlier.id, judge_version=JUDGE)  # type: ignore[arg-type]
        for k, d in enumerate(old_drafts):  # one draft per case, in case order
            s = scores[d.id]  # type: ignore[index]
            gap = 2.0 if category_of(k) == "edge" else 0.0
            fa = s.factual_accuracy
            session.add(FinalGrade(
                draft_id=s.draft_id, factual_accuracy=fa, source="agreement",
                citation_relevance=max(1.0, s.citation_relevance - gap), tone=max(1.0, s.tone - gap),
                completeness=max(1.0, s.completeness - gap),
            ))
        session.flush()
        run, _ = build_run(session, n=200, name="now", dataset_name="new")
        summary = draw_sample(session=session, run_id=run.id, budget=40, judge_version=JUDGE, seed=3)  # type: ignore[arg-type]
        model = session.get(PpiErrorModel, summary.error_model_id)
        assert model is not None and model.source_runs == [earlier.id] and model.params["grades"] == 100
        rows = [r for r in rows_of(session, run.id) if not r.forced]  # type: ignore[arg-type]
        edge = np.mean([r.pi for r in rows if r.stratum == "edge"])
        routine = np.mean([r.pi for r in rows if r.stratum == "routine"])
        assert edge > 2 * routine
        assert min(r.pi for r in rows) >= 0.5 * 40 / 200 - 1e-12
        assert abs(sum(r.pi for r in rows) - 40) < 1e-9


class TestFurtherSample:
    def test_combined_pi_and_union_of_draws(self, session: Session) -> None:
        run, _ = build_run(session, n=200)
        draw_sample(session=session, run_id=run.id, budget=30, judge_version=JUDGE, seed=5)  # type: ignore[arg-type]
        first = {r.draft_id: r for r in rows_of(session, run.id)}  # type: ignore[arg-type]
        summary = draw_further_sample(session=session, run_id=run.id, budget=20, seed=6)  # type: ignore[arg-type]
        assert summary.round == 2
        second = {r.draft_id: r for r in rows_of(session, run.id, 2)}  # type: ignore[arg-type]
        for d, r in second.items():
            assert abs(r.combined_pi - (1 - (1 - first[d].pi) * (1 - r.pi))) < 1e-12
        sample = {s.draft_id: s for s in run_sample(session=session, run_id=run.id) or []}  # type: ignore[arg-type]
        assert all(sample[d].drawn == (first[d].drawn or second[d].drawn) for d in first)
        assert all(sample[d].pi == second[d].combined_pi for d in first)
        assert drawn_draft_ids(session=session, run_id=run.id) == {d for d, s in sample.items() if s.drawn}  # type: ignore[arg-type]



class TestLaterRoundsKeepRoundOnesDesign:
    def test_a_suite_changed_after_round_one_does_not_change_round_two(self, session: Session) -> None:
        from webapp.datasets.models import EvalCase
        from webapp.regression.models import RegressionCase

        run, drafts = build_run(session, n=100)
        draw_sample(session=session, run_id=run.id, budget=20, judge_version=JUDGE, seed=5)  # type: ignore[arg-type]
        first = {r.draft_id: (r.stratum, r.forced) for r in rows_of(session, run.id)}  # type: ignore[arg-type]
        # After reading round one's grades, people add five routine cases to the regression suite
        # and re-label one routine case as safety: recomputed, all six would now be forced.
        user = make_user(session, email="lead@example.com", roles=["lead"])
        routine = [d for d in drafts if category_of(int(_case_id(session, d.id).rsplit("-", 1)[1])) == "routine"][:6]  # type: ignore[arg-type]
        for d in routine[:5]:
            session.add(RegressionCase(case_id=_case_id(session, d.id), input="x", note="from round one", source="grading", created_by=user.id))  # type: ignore[arg-type]
        relabelled = session.get(EvalCase, routine[5].case_pk)
        assert relabelled is not None
        relabelled.category = "safety"
        session.add(relabelled)
        session.flush()
        assert all(not first[d.id][1] and first[d.id][0] == "routine" for d in routine)  # type: ignore[index]
        summary = draw_further_sample(session=session, run_id=run.id, budget=10, seed=6)  # type: ignore[arg-type]
        second = {r.draft_id: (r.stratum, r.forced) for r in rows_of(session, run.id, 2)}  # type: ignore[arg-type]
        assert second == first
        assert summary.forced == sum(f for _, f in first.values()) == 22
        # Round two's pi of the six stays below 1: they are not forced in the second round either.
        pis = {r.draft_id: r.pi for r in rows_of(session, run.id, 2)}  # type: ignore[arg-type]
        assert all(pis[d.id] < 1 for d in routine)  # type: ignore[index]


def _case_id(session: Session, draft_id: int) -> str:
    from webapp.datasets.models import EvalCase
    from webapp.runs.models import Draft

    draft = session.get(Draft, draft_id)
    assert draft is not None
    case = session.get(EvalCase, draft.case_pk)
    assert case is not None
    return case.case_id
