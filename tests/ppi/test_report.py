"""The run report: recomputed from stored rows exactly, gate calls, figure ranges, API and page, roles."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, col, select

from tests.ppi.conftest import JUDGE, build_run
from webapp.core.spec import EvalSpec
from webapp.datasets.models import EvalCase
from webapp.grading.models import FinalGrade
from webapp.ppi.estimator import Estimate, estimate_mean, make_sample
from webapp.ppi.models import PpiDraw, PpiJudgeScore
from webapp.ppi.report import (
    FIGURE_RANGE,
    GateCall,
    decide,
    judge_gap,
    run_report,
    within_range,
)
from webapp.ppi.service import draw_sample
from webapp.runs.models import Draft, Run

Clients = Callable[..., TestClient]


def graded_run(session: Session, *, n: int = 300, budget: float = 80, offset: float = 0.6) -> Run:
    """A run with a sample whose drawn drafts all have final grades: the judge is `offset` kinder on tone."""
    run, _ = build_run(session, n=n, golden=0)
    draw_sample(session=session, run_id=run.id, budget=budget, judge_version=JUDGE, seed=21)  # type: ignore[arg-type]
    rng = np.random.default_rng(1)
    judge = {j.draft_id: j for j in session.exec(select(PpiJudgeScore).where(PpiJudgeScore.run_id == run.id))}
    for row in session.exec(select(PpiDraw).where(PpiDraw.run_id == run.id, col(PpiDraw.drawn).is_(True))):
        j = judge[row.draft_id]
        session.add(
            FinalGrade(
                draft_id=row.draft_id,
                factual_accuracy=j.factual_accuracy if rng.random() < 0.9 else "fail",
                citation_relevance=float(np.clip(j.citation_relevance + rng.integers(-1, 2), 1, 5)),
                tone=float(np.clip(j.tone - offset + rng.normal(0, 0.5), 1, 5)),
                completeness=float(np.clip(j.completeness - 1 + rng.integers(0, 2), 1, 5)),
                source="agreement",
            )
        )
    session.commit()
    return run


def tone_from_rows(session: Session, run_id: int) -> Estimate:
    """Recompute the tone interval from the stored rows with the estimator directly (not through the report)."""
    draws = session.exec(select(PpiDraw).where(PpiDraw.run_id == run_id).order_by(col(PpiDraw.draft_id))).all()
    judge = {j.draft_id: j.tone for j in session.exec(select(PpiJudgeScore).where(PpiJudgeScore.run_id == run_id))}
    finals = {f.draft_id: f.tone for f in session.exec(select(FinalGrade))}
    ticket = dict(session.exec(select(Draft.id, EvalCase.case_id).join(EvalCase, col(EvalCase.id) == Draft.case_pk)).all())
    ids = [d.draft_id for d in draws]
    drawn = np.array([d.drawn for d in draws])
    sample = make_sample(
        judge=[judge[i] for i in ids],
        human=[finals.get(i, np.nan) for i in ids],
        drawn=drawn,
        pi=[d.pi for d in draws],
        cluster=[ticket[i] for i in ids],
    )
    return estimate_mean(sample, seed=draws[0].seed)


class TestRunReport:
    def test_report_api_and_page_give_the_interval_recomputed_from_stored_rows(
        self, session: Session, spec: EvalSpec, api_as: Clients, client_as: Clients
    ) -> None:
        run = graded_run(session)
        report = run_report(session=session, spec=spec, run_id=run.id)  # type: ignore[arg-type]
        assert report is not None and report.pending == 0 and report.graded == report.drawn
        tone = report.figures["tone"].estimate
        assert tone is not None
        again = tone_from_rows(session, run.id)  # type: ignore[arg-type]
        assert (tone.estimate, tone.low, tone.high) == (again.estimate, again.low, again.high)
        # The judge's +0.6 on tone is removed: the judge alone is above the estimate by about that much.
        assert 0.4 < tone.bias < 0.8
        assert tone.n_labels == report.graded
        answer = api_as("pm").get(f"/api/v1/ppi/runs/{run.name}")
        assert answer.status_code == 200
        api_tone = next(f for f in answer.json()["figures"] if f["key"] == "tone")
        assert api_tone["interval"]["low"] == again.low and api_tone["interval"]["high"] == again.high
        assert api_tone["gate"]["threshold"] == spec.gates.pilot.human_mean_above
        page = client_as("lead").get(f"/ppi/runs/{run.name}")
        assert page.status_code == 200
        assert f"<strong>{again.estimate:.2f}</strong> [{again.low:.2f}, {again.high:.2f}]" in page.text
        assert f"{again.judge_alone:.2f}" in page.text
        assert "human-only grades" in page.text
        # pending grades are left out and counted
        one = session.exec(select(FinalGrade)).first()
        assert one is not None
        session.delete(one)
        session.commit()
        report = run_report(session=session, spec=spec, run_id=run.id)  # type: ignore[arg-type]
        assert report is not None and report.pending == 1 and report.graded == report.drawn - 1


class TestAboutThisRun:
    """Issue 34: a run's figures are about its own drafts, and the page and the API say so."""

    def test_a_run_graded_whole_reads_its_exact_mean_and_the_gate_decides(
        self, session: Session, spec: EvalSpec, api_as: Clients, client_as: Clients
    ) -> None:
        run, drafts = build_run(session, n=20, golden=0)
        # budget 20 of 20: every draft gets pi = 1 and is drawn
        draw_sample(session=session, run_id=run.id, budget=20, judge_version=JUDGE, seed=4)  # type: ignore[arg-type]
        assert all(d.pi == 1.0 and d.drawn for d in session.exec(select(PpiDraw).where(PpiDraw.run_id == run.id)))
        for k, d in enumerate(drafts):  # tone: 14 fours and 6 threes, (56 + 18) / 20 = 3.70
            tone = 3.0 if k % 10 in (1, 4, 7) else 4.0
            session.add(FinalGrade(draft_id=d.id, factual_accuracy="pass", citation_relevance=4, tone=tone, completeness=4, source="agreement"))  # type: ignore[arg-type]
        session.commit()
        report = run_report(session=session, spec=spec, run_id=run.id)  # type: ignore[arg-type]
        assert report is not None
        tone = report.figures["tone"].estimate
        assert tone is not None and tone.estimand == "run"
        assert tone.estimate == pytest.approx(3.70, abs=1e-12) and tone.low == tone.high == tone.estimate
        assert decide(tone, spec.gates.pilot.human_mean_above).verdict == "pass"  # 3.70 > 3.5: decided
        answer = api_as("pm").get(f"/api/v1/ppi/runs/{run.name}")
        api_tone = next(f for f in answer.json()["figures"] if f["key"] == "tone")
        assert api_tone["interval"]["estimand"] == "run" and api_tone["interval"]["about"] == "about this run's 20 drafts"
        assert api_tone["gate"]["verdict"] == "pass"
        page = client_as("lead").get(f"/ppi/runs/{run.name}")
        assert page.status_code == 200
        assert "<strong>3.70</strong> [3.70, 3.70]" in page.text
        assert "about this run's 20 drafts" in page.text


def estimate(value: float, low: float, high: float, n: int = 100) -> Estimate:
    return Estimate(value, low, high, (high - value) / 2, n - 1, 0.95, (1.0,), value, 1.0, n, 1000)


class TestGateCall:
    """The call from the confidence sequence (webapp/ppi/anytime.py; its formula is checked in tests/ppi/test_anytime.py).

    estimate(value, low, high) has se = (high - value)/2 from n = 100 graded of N = 1,000 drafts. The sequence's
    half-width at 100 grades is se x c(100/0.9) x t(99)/z: c(111.11) = 2.85841 (g = 2.85841 x sqrt(111.11) = 30.1304 solves
    0.9 exp(0.35 g - 0.35^2 x 111.11/2) + 0.1 x the one-sided mixture = 40; tests/ppi/test_anytime.py solves it on its own),
    read as Student's t with 99 degrees of freedom at the same one-sided tail (1 - Phi(2.85841) = 0.0021288):
    t_99^-1(1 - 0.0021288) = 2.9261 standard errors.
    """

    HALF = 2.9261

    def test_pass_and_fail_need_the_sequence_to_clear_the_threshold(self) -> None:
        def at(v: float) -> Estimate:
            return estimate(v, v - 0.2, v + 0.2)  # se 0.1

        assert decide(at(3.5 + self.HALF * 0.1 + 0.01), 3.5).verdict == "pass"
        assert decide(at(3.5 + self.HALF * 0.1 - 0.01), 3.5).verdict == "undecided"  # one look's interval clears it
        assert decide(at(3.5 - self.HALF * 0.1 - 0.001), 3.5).verdict == "fail"
        assert decide(None, 3.5) == GateCall("undecided", None)  # no estimate

    def test_the_bounds_are_reported_with_the_grades(self) -> None:
        call = decide(estimate(4.0, 3.8, 4.2), 3.5)
        assert call.low == pytest.approx(4.0 - self.HALF * 0.1, abs=1e-4) and call.high == pytest.approx(4.0 + self.HALF * 0.1, abs=1e-4)
        assert call.grades == 100 and call.verdict == "pass"

    def test_pending_grades_make_it_provisional_not_undecided(self) -> None:
        assert decide(estimate(4.0, 3.8, 4.2), 3.5, pending=3).provisional
        assert decide(estimate(3.0, 2.8, 3.2), 3.5, pending=3).verdict == "fail"

    def test_k_counts_the_drafts_already_drawn_and_never_passes_what_is_left(self) -> None:
        near = decide(estimate(3.6, 3.4, 3.8), 3.5)
        assert near.verdict == "undecided" and near.more_grades is not None
        assert decide(estimate(3.6, 3.4, 3.8), 3.5, pending=7).more_grades == near.more_grades - 7
        assert decide(estimate(3.6, 3.4, 3.8), 3.5, undrawn=50).more_grades == 50
        # an estimate on the threshold: only grading every draft decides: 1,000 - 100 = 900
        assert decide(estimate(3.5, 3.3, 3.7), 3.5).more_grades == 900

    def test_judge_gap_is_the_bias_over_the_run_in_the_units_of_the_bias_removed(self) -> None:
        # three drafts: A graded, drawn for sure (pi = 1), judge 4, human 3 (judge - human = +1); B graded, drawn at
        # pi = 0.25, judge 2, human 3 (-1); C not drawn, judge 4. B stands for v = 0.75/0.25 = 3 undrawn drafts and A for
        # none, so the undrawn C gets judge + B's residual: 4 + 1 = 5. Estimate (3 + 3 + 5)/3 = 11/3, judge alone
        # (4 + 2 + 4)/3 = 10/3: the bias is 10/3 - 11/3 = -1/3 (the plain mean of the graded gaps would say 0)
        sample = make_sample(judge=[4.0, 2.0, 4.0], human=[3.0, 3.0, np.nan], drawn=[True, True, False], pi=[1.0, 0.25, 0.25])
        assert judge_gap(sample) == pytest.approx(-1 / 3, abs=1e-12)

    def test_intervals_are_cut_to_what_the_figure_can_be(self) -> None:
        # the demo's factual accuracy read "97% [79%, 116%]"
        cut = within_range(estimate(0.97, 0.79, 1.16), *FIGURE_RANGE["factual_accuracy"])
        assert (cut.estimate, cut.low, cut.high) == (0.97, 0.79, 1.0)
        cut = within_range(estimate(0.02, -0.05, 0.09), *FIGURE_RANGE["pass_rate"])
        assert (cut.low, cut.high) == (0.0, 0.09)
        cut = within_range(estimate(4.9, 4.7, 5.1), *FIGURE_RANGE["tone"])  # scores: 1 to 5
        assert (cut.low, cut.high) == (4.7, 5.0)
        inside = within_range(estimate(4.09, 3.95, 4.23), *FIGURE_RANGE["completeness"])
        assert (inside.low, inside.high) == (3.95, 4.23)


class TestApiAndPage:
    def test_labelers_may_not_read_the_judge_figures(self, session: Session, client_as: Clients) -> None:
        run = graded_run(session, n=40, budget=10)
        labeler = client_as("labeler")
        for path in (f"/ppi/runs/{run.name}", f"/api/v1/ppi/runs/{run.name}"):
            assert labeler.get(path).status_code == 403, path

    def test_sampling_through_the_api(self, session: Session, spec: EvalSpec, api_as: Clients) -> None:
        run, _ = build_run(session, n=50, golden=0)
        session.commit()
        # no sample, no report
        assert run_report(session=session, spec=spec, run_id=run.id) is None  # type: ignore[arg-type]
        lead = api_as("lead")
        made = lead.post(f"/api/v1/ppi/runs/{run.name}/sample", json={"budget": 10, "judge_version": JUDGE, "seed": 3})
        assert made.status_code == 201 and made.json()["round"] == 1 and made.json()["forced"] == 10
        again = lead.post(f"/api/v1/ppi/runs/{run.name}/sample", json={"budget": 10, "judge_version": JUDGE})
        assert again.status_code == 422 and again.json()["detail"].startswith("run: this run already has a sample")
        more = lead.post(f"/api/v1/ppi/runs/{run.name}/further-sample", json={"budget": 5, "seed": 4})
        assert more.status_code == 201 and more.json()["round"] == 2
        assert api_as("pm").post(f"/api/v1/ppi/runs/{run.name}/sample", json={"budget": 1, "judge_version": JUDGE}).status_code == 403
