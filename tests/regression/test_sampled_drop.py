"""The pass-rate drop alert read from two runs' PPI samples: the difference, its interval, the three readings.

Runs are built here over one dataset: the baseline and the new run draft replies to the same
cases, the judge scores every draft, a sample is drawn before any grade, and final grades are
stored for the drawn drafts. With `budget=N` every draft is drawn (pi = 1), which makes the
figures workable by hand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy import stats
from sqlmodel import Session, col, select

from tests.factories import make_dataset, make_run
from tests.reactions_support import after_grading, after_run_checked
from webapp.core.spec import EvalSpec
from webapp.datasets.models import Dataset, EvalCase
from webapp.grading.models import FinalGrade
from webapp.ppi.estimator import Difference, Sample, all_pass, estimate_difference, make_sample
from webapp.ppi.models import PpiDraw, PpiJudgeScore
from webapp.ppi.report import pass_rate_difference
from webapp.ppi.service import JudgeScoreIn, draw_sample, record_judge_scores
from webapp.regression import alerts, service
from webapp.regression import hooks as regression_hooks
from webapp.regression.models import RegressionAlert
from webapp.runs.models import Draft, Run

JUDGE = "judge-v1"
TOL = 1e-12


def _grade(passes: bool) -> tuple[str, float, float, float]:
    """Four criteria that pass all (factual pass, scales 5) or fail on factual accuracy only."""
    return ("pass" if passes else "fail", 5.0, 5.0, 5.0)


def dataset(session: Session, n: int, *, name: str = "eval", version: int = 1, category: str = "routine") -> Dataset:
    return make_dataset(session, [{"case_id": f"c{i}", "category": category} for i in range(n)], name=name, version=version)


def sampled_run(
    session: Session,
    ds: Dataset,
    name: str,
    *,
    judge: Sequence[bool],
    human: Sequence[bool | None],
    budget: float | None = None,
    seed: int = 5,
) -> Run:
    """A run with one draft per case of `ds`, the judge's pass/fail per draft, a sample, and final grades of the drawn.

    `human[k]` is the final grade's pass of draft k when drawn (None: no final grade yet).
    """
    cases = session.exec(select(EvalCase).where(EvalCase.dataset_id == ds.id).order_by(col(EvalCase.position))).all()
    run = make_run(session, ds, [{"case_id": c.case_id, "draft_text": "Hello"} for c in cases], name=name)
    drafts = session.exec(select(Draft).where(Draft.run_id == run.id).order_by(col(Draft.id))).all()
    record_judge_scores(
        session=session,
        run_id=run.id,  # type: ignore[arg-type]
        judge_version=JUDGE,
        scores=[JudgeScoreIn(d.id, *_grade(j)) for d, j in zip(drafts, judge, strict=True)],  # type: ignore[arg-type]
    )
    draw_sample(session=session, run_id=run.id, budget=budget or len(drafts), judge_version=JUDGE, seed=seed)  # type: ignore[arg-type]
    drawn = {r.draft_id for r in session.exec(select(PpiDraw).where(PpiDraw.run_id == run.id, col(PpiDraw.drawn).is_(True)))}
    for d, h in zip(drafts, human, strict=True):
        if d.id in drawn and h is not None:
            fa, cr, tone, comp = _grade(h)
            session.add(FinalGrade(draft_id=d.id, factual_accuracy=fa, citation_relevance=cr, tone=tone, completeness=comp, source="agreement"))
    session.flush()
    return run


def baseline_and_run(
    session: Session, n: int, base_pass: Sequence[bool], run_pass: Sequence[bool | None]
) -> tuple[Run, Run]:
    """Baseline and run over the same n cases, everything drawn, the judge agreeing with the humans."""
    ds = dataset(session, n)
    base = sampled_run(session, ds, "base", judge=base_pass, human=base_pass, seed=3)
    service.mark_baseline(session=session, run_id=base.id)  # type: ignore[arg-type]
    run = sampled_run(session, ds, "new", judge=[bool(p) for p in run_pass], human=run_pass, seed=4)
    session.commit()
    return base, run


def difference_from_rows(session: Session, spec: EvalSpec, run_id: int, baseline_id: int) -> Difference:
    """Recompute the difference from the stored rows with the estimator directly (not through the report)."""
    thresholds = [float(c.pass_threshold or 0) for c in spec.rubric.criteria if c.key in ("citation_relevance", "tone", "completeness")]

    def side(run_id: int) -> tuple[Sample, list[str], int]:
        draws = session.exec(select(PpiDraw).where(PpiDraw.run_id == run_id).order_by(col(PpiDraw.draft_id))).all()
        judges = {j.draft_id: j for j in session.exec(select(PpiJudgeScore).where(PpiJudgeScore.run_id == run_id))}
        finals = {f.draft_id: f for f in session.exec(select(FinalGrade))}
        ticket = dict(session.exec(select(Draft.id, EvalCase.case_id).join(EvalCase, col(EvalCase.id) == Draft.case_pk)).all())
        ids = [d.draft_id for d in draws]

        def passes(rows: Sequence[PpiJudgeScore | FinalGrade]) -> np.ndarray:
            return all_pass([r.factual_accuracy == "pass" for r in rows], [[r.citation_relevance, r.tone, r.completeness] for r in rows], thresholds)

        labelled = np.array([d.drawn and d.draft_id in finals for d in draws])
        human = np.full(len(ids), np.nan)
        human[labelled] = passes([finals[i] for i, k in zip(ids, labelled, strict=True) if k])
        sample = make_sample(judge=passes([judges[i] for i in ids]), human=human, drawn=labelled, pi=[d.combined_pi for d in draws], cluster=[ticket[i] for i in ids])
        return sample, [ticket[i] for i in ids], draws[0].seed

    a, ka, seed_a = side(run_id)
    b, kb, seed_b = side(baseline_id)
    return estimate_difference(a, b, a_cluster_keys=ka, b_cluster_keys=kb, seed=seed_a, b_seed=seed_b)


class TestDifference:
    def test_equals_estimate_difference_on_a_real_sample(self, session: Session, spec: EvalSpec) -> None:
        """A sample of 50 of 150 drafts per run, a judge that disagrees with people: the reading is estimate_difference's."""
        n = 150
        rng = np.random.default_rng(7)
        ds = dataset(session, n)
        judge_b = list(rng.random(n) < 0.85)
        human_b = [j if rng.random() < 0.85 else not j for j in judge_b]
        base = sampled_run(session, ds, "base", judge=judge_b, human=human_b, budget=50, seed=11)
        service.mark_baseline(session=session, run_id=base.id)  # type: ignore[arg-type]
        judge_a = list(rng.random(n) < 0.75)
        human_a = [j if rng.random() < 0.8 else not j for j in judge_a]
        run = sampled_run(session, ds, "new", judge=judge_a, human=human_a, budget=50, seed=12)
        session.commit()
        reading = pass_rate_difference(session=session, spec=spec, run_id=run.id, baseline_id=base.id)  # type: ignore[arg-type]
        expected = difference_from_rows(session, spec, run.id, base.id)  # type: ignore[arg-type]
        assert reading is not None and reading.estimate is not None and reading.low is not None and reading.high is not None
        assert abs(reading.estimate - expected.estimate) < TOL
        assert abs(reading.low - expected.low) < TOL and abs(reading.high - expected.high) < TOL
        assert reading.cases == n and reading.pending == 0
        assert 0 < reading.graded < n and 0 < reading.baseline_graded < n
        assert reading.text == (
            f"pass rate {expected.estimate * 100:+.1f} points [{expected.low * 100:+.1f}, {expected.high * 100:+.1f}]"
        )

    def test_hand_worked_small_case(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        """Ten cases, all drawn (pi = 1), the judge agreeing with people: baseline 10/10 pass, run 8/10.

        lambda = 1 (under 60 grades) and judge = human, so each run's estimate is its human pass rate
        and per ticket the influence is (D_i - mean D)/N with D = run - baseline = 0 x8, -1 x2. The
        residuals are all 0, so the rectifier's variance is the guard's alone, 2 / (n (n + 2)):
        var = ((8 x 0.2^2 + 2 x 0.8^2) / 10^2) + 2 / (10 x 12) = 0.016 + 1/60,
        interval = -0.2 +- t(0.975, 9) x sqrt(var).
        """
        base, run = baseline_and_run(session, 10, [True] * 10, [True] * 8 + [False] * 2)
        reading = pass_rate_difference(session=session, spec=spec, run_id=run.id, baseline_id=base.id)  # type: ignore[arg-type]
        assert reading is not None and reading.estimate is not None and reading.low is not None and reading.high is not None
        se = math.sqrt(0.016 + 1 / 60)
        half = stats.t.ppf(0.975, 9) * se
        assert abs(reading.estimate - (-0.2)) < TOL
        assert abs(reading.low - (-0.2 - half)) < TOL and abs(reading.high - (-0.2 + half)) < TOL
        assert reading.text == "pass rate -20.0 points [-60.9, +20.9]"
        assert reading.verdict == "undecided"
        # Undecided raises nothing but is listed, and the alerts page shows it with the PPI link.
        assert after_run_checked(session, spec, run.id) == []  # type: ignore[arg-type]
        assert _alerts(session) == []
        (listed,) = regression_hooks.pass_rate_readings(session=session, spec=spec)
        assert (listed.run_id, listed.baseline_id, listed.verdict) == (run.id, base.id, "undecided")
        page = client_as("lead").get("/regression/alerts")
        assert page.status_code == 200
        assert "pass rate -20.0 points [-60.9, +20.9]" in page.text
        assert "undecided" in page.text and f'href="/ppi/runs/{run.id}"' in page.text
        assert "more human grades would decide" in page.text

    def test_only_the_cases_both_ran_are_compared(self, session: Session, spec: EvalSpec) -> None:
        """The baseline ran 10 cases of version 1; the run 14 of version 2: the four new cases are left out."""
        v1, v2 = dataset(session, 10), dataset(session, 14, version=2)
        base = sampled_run(session, v1, "base", judge=[True] * 10, human=[True] * 10)
        service.mark_baseline(session=session, run_id=base.id)  # type: ignore[arg-type]
        # The four extra cases all fail: compared on the shared ten, the run equals the baseline.
        run = sampled_run(session, v2, "new", judge=[True] * 10 + [False] * 4, human=[True] * 10 + [False] * 4)
        session.commit()
        reading = pass_rate_difference(session=session, spec=spec, run_id=run.id, baseline_id=base.id)  # type: ignore[arg-type]
        assert reading is not None and reading.cases == 10 and reading.graded == 10
        assert reading.estimate is not None and abs(reading.estimate) < TOL

    def test_no_sample_on_either_side_gives_none(self, session: Session, spec: EvalSpec) -> None:
        """A run without a sample keeps the checks' rule: no reading, nothing listed."""
        ds = dataset(session, 4)
        base = sampled_run(session, ds, "base", judge=[True] * 4, human=[True] * 4)
        service.mark_baseline(session=session, run_id=base.id)  # type: ignore[arg-type]
        plain = make_run(session, ds, [{"case_id": f"c{i}", "draft_text": "Hi"} for i in range(4)], name="plain")
        session.commit()
        assert pass_rate_difference(session=session, spec=spec, run_id=plain.id, baseline_id=base.id) is None  # type: ignore[arg-type]
        assert pass_rate_difference(session=session, spec=spec, run_id=base.id, baseline_id=plain.id) is None  # type: ignore[arg-type]
        assert regression_hooks.pass_rate_readings(session=session, spec=spec) == []


def _reading(estimate: float, low: float, high: float, pending: int = 0) -> alerts.PassRateDifference:
    return alerts.PassRateDifference(1, "new", 2, "base", estimate, low, high, 0.05, 100, 50, 50, pending)


class TestVerdict:
    # A drop needs the upper bound below -5 points; no drop needs the lower bound at or above -5 points.
    @pytest.mark.parametrize(
        ("bounds", "verdict"),
        [
            ((-0.072, -0.110, -0.034), "undecided"),
            ((-0.09, -0.12, -0.0501), "drop"),
            ((-0.01, -0.05, 0.03), "no_drop"),
            ((-0.01, -0.0501, 0.03), "undecided"),
        ],
    )
    def test_verdict_from_the_interval(self, bounds: tuple[float, float, float], verdict: str) -> None:
        assert _reading(*bounds).verdict == verdict

    def test_pending_grades_keep_it_undecided_and_the_text(self) -> None:
        reading = _reading(-0.3, -0.4, -0.2, pending=3)
        assert reading.verdict == "undecided" and "3 drawn drafts" in reading.hint
        assert _reading(-0.072, -0.110, -0.034).text == "pass rate -7.2 points [-11.0, -3.4]"


def _alerts(session: Session) -> list[RegressionAlert]:
    return list(session.exec(select(RegressionAlert).where(RegressionAlert.kind == "pass_rate_drop")).all())



class TestAlert:
    def test_confirmed_drop_raises_the_alert_with_the_interval(
        self, session: Session, spec: EvalSpec, api_as: Callable[..., TestClient]
    ) -> None:
        # 50 cases: baseline all pass, run 70%: -30 points, interval well below -5.
        base, run = baseline_and_run(session, 50, [True] * 50, [k % 10 >= 3 for k in range(50)])
        reading = pass_rate_difference(session=session, spec=spec, run_id=run.id, baseline_id=base.id)  # type: ignore[arg-type]
        assert reading is not None and reading.verdict == "drop"
        # Hand-worked as in the ten-case example (lambda = 1 under 60 grades, judge = human):
        # var = 50 x 0.3 x 0.7 / 50^2 + 2 / (50 x 52), t with 49 df: [-44.2, -15.8] points.
        half = stats.t.ppf(0.975, 49) * math.sqrt(50 * 0.21 / 50**2 + 2 / (50 * 52))
        assert reading.high is not None and abs(reading.high - (-0.3 + half)) < TOL
        assert reading.text == "pass rate -30.0 points [-44.2, -15.8]"
        new = after_run_checked(session, spec, run.id)  # type: ignore[arg-type]
        assert [a.kind for a in new] == ["pass_rate_drop"]
        alert = new[0]
        assert reading.text in alert.message and alert.evidence["interval_text"] == reading.text
        assert alert.evidence["difference"] == reading.estimate and alert.evidence["high"] == reading.high
        assert alert.evidence["drop"] == pytest.approx(0.3)
        # Raised once: checking again, or a further grade, raises nothing new.
        assert after_run_checked(session, spec, run.id) == []  # type: ignore[arg-type]
        assert len(_alerts(session)) == 1
        # The API lists the reading and the alert.
        session.commit()
        answer = api_as("pm").get("/api/v1/regression/alerts")
        assert answer.status_code == 200
        (listed,) = answer.json()["pass_rate_readings"]
        assert listed["text"] == reading.text and listed["verdict"] == "drop"
        assert (listed["estimate"], listed["low"], listed["high"]) == (reading.estimate, reading.low, reading.high)
        assert listed["ppi_page"] == f"/ppi/runs/{run.id}"
        (api_alert,) = answer.json()["alerts"]
        assert reading.text in api_alert["message"]

    def test_no_drop_raises_nothing(self, session: Session, spec: EvalSpec) -> None:
        passes = [k % 10 != 0 for k in range(200)]
        base, run = baseline_and_run(session, 200, passes, passes)
        reading = pass_rate_difference(session=session, spec=spec, run_id=run.id, baseline_id=base.id)  # type: ignore[arg-type]
        assert reading is not None and reading.verdict == "no_drop" and reading.estimate is not None
        # 200 grades a side: lambda is cross-fitted, so the interval is checked against the estimator.
        expected = difference_from_rows(session, spec, run.id, base.id)  # type: ignore[arg-type]
        assert abs(reading.estimate) < TOL and (reading.low, reading.high) == (expected.low, expected.high)
        assert reading.low is not None and reading.low > -0.05
        assert after_run_checked(session, spec, run.id) == []  # type: ignore[arg-type]
        assert _alerts(session) == []

    def test_the_last_final_grade_confirms_the_drop(self, session: Session, spec: EvalSpec) -> None:
        # One drawn draft of the run waits for its grade: undecided; its final grade confirms the drop.
        run_pass: list[bool | None] = [k % 10 >= 3 for k in range(50)]
        run_pass[-1] = None
        base, run = baseline_and_run(session, 50, [True] * 50, run_pass)
        assert after_run_checked(session, spec, run.id) == []  # type: ignore[arg-type]
        (reading,) = regression_hooks.pass_rate_readings(session=session, spec=spec)
        assert reading.verdict == "undecided" and reading.pending == 1
        last = session.exec(select(Draft.id).where(Draft.run_id == run.id).order_by(col(Draft.id).desc())).first()
        assert last is not None
        session.add(FinalGrade(draft_id=last, factual_accuracy="pass", citation_relevance=5, tone=5, completeness=5, source="agreement"))
        session.flush()
        after_grading(session, spec, last)
        (alert,) = _alerts(session)
        assert alert.run_id == run.id and alert.evidence["method"] == "sample"

    def test_a_final_grade_in_the_baseline_rereads_the_runs_it_is_the_baseline_of(self, session: Session, spec: EvalSpec) -> None:
        base_pass: list[bool | None] = [True] * 50
        base_pass[0] = None  # the baseline's first drawn draft waits for its grade
        ds = dataset(session, 50)
        base = sampled_run(session, ds, "base", judge=[True] * 50, human=base_pass, seed=3)
        service.mark_baseline(session=session, run_id=base.id)  # type: ignore[arg-type]
        run = sampled_run(session, ds, "new", judge=[k % 10 >= 3 for k in range(50)], human=[k % 10 >= 3 for k in range(50)], seed=4)
        session.commit()
        assert after_run_checked(session, spec, run.id) == []  # type: ignore[arg-type]
        first = session.exec(select(Draft.id).where(Draft.run_id == base.id).order_by(col(Draft.id))).first()
        assert first is not None
        session.add(FinalGrade(draft_id=first, factual_accuracy="pass", citation_relevance=5, tone=5, completeness=5, source="agreement"))
        session.flush()
        after_grading(session, spec, first)
        (alert,) = _alerts(session)
        assert alert.run_id == run.id and alert.evidence["interval_text"] == "pass rate -30.0 points [-44.2, -15.8]"


class TestPageAndApi:
    @pytest.mark.parametrize("path", ["/api/v1/regression/alerts", "/regression/alerts"])
    def test_wrong_role_gets_403(self, path: str, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]) -> None:
        client = api_as("labeler") if path.startswith("/api") else client_as("labeler")
        assert client.get(path).status_code == 403


class TestThePlansAlertIsAlwaysEvaluated:
    """Issue 34: the checks' pass-rate drop (the plan's alert) fires whatever the human sample's interval says."""

    @staticmethod
    def _checked_sampled_run(session: Session, ds: Dataset, name: str, *, failing: int, seed: int) -> Run:
        """A run of one draft per case, the first `failing` too short to pass the checks; all drawn, every grade a pass."""
        from tests.checks.conftest import good
        from tests.factories import words

        cases = session.exec(select(EvalCase).where(EvalCase.dataset_id == ds.id).order_by(col(EvalCase.position))).all()
        run = make_run(
            session, ds,
            [{**good(c.case_id, "billing_charge"), "draft_text": words(10 if k < failing else 60)} for k, c in enumerate(cases)],
            name=name,
        )
        drafts = session.exec(select(Draft).where(Draft.run_id == run.id).order_by(col(Draft.id))).all()
        record_judge_scores(
            session=session, run_id=run.id, judge_version=JUDGE,  # type: ignore[arg-type]
            scores=[JudgeScoreIn(d.id, *_grade(True)) for d in drafts],  # type: ignore[arg-type]
        )
        draw_sample(session=session, run_id=run.id, budget=len(drafts), judge_version=JUDGE, seed=seed)  # type: ignore[arg-type]
        for d in drafts:
            assert d.id is not None
            session.add(FinalGrade(draft_id=d.id, factual_accuracy="pass", citation_relevance=5, tone=5, completeness=5, source="agreement"))
        session.flush()
        return run

    def test_a_six_point_checks_drop_fires_though_the_interval_sees_no_drop(self, session: Session, spec: EvalSpec) -> None:
        from tests.factories import make_article
        from webapp.checks import service as checks_service

        make_article(session, "KB-1042", ((1, "current"),))
        ds = dataset(session, 50)
        # Checks: baseline 45/50 = 90%, run 42/50 = 84%: 6 points down, more than the plan's 5.
        base = self._checked_sampled_run(session, ds, "base", failing=5, seed=3)
        run = self._checked_sampled_run(session, ds, "new", failing=8, seed=4)
        service.mark_baseline(session=session, run_id=base.id)  # type: ignore[arg-type]
        session.commit()
        checks_service.check_run(session=session, spec=spec, run_id=base.id)  # type: ignore[arg-type]
        checks_service.check_run(session=session, spec=spec, run_id=run.id)  # type: ignore[arg-type]
        assert checks_service.run_summary(session=session, run_id=run.id).overall.rate == pytest.approx(0.84)  # type: ignore[arg-type]
        # Every human grade passes in both runs: the sample sees no drop at all.
        reading = pass_rate_difference(session=session, spec=spec, run_id=run.id, baseline_id=base.id)  # type: ignore[arg-type]
        assert reading is not None and reading.estimate is not None and abs(reading.estimate) < TOL
        assert reading.verdict != "drop"
        new = after_run_checked(session, spec, run.id)  # type: ignore[arg-type]
        (alert,) = new
        assert alert.kind == "pass_rate_drop" and alert.evidence.get("method") != "sample"
        assert alert.evidence["drop"] == pytest.approx(0.06)
        assert "down 6.0 points" in alert.message

    def test_both_alerts_fire_when_both_readings_drop(self, session: Session, spec: EvalSpec) -> None:
        from tests.factories import make_article
        from webapp.checks import service as checks_service

        make_article(session, "KB-1042", ((1, "current"),))
        ds = dataset(session, 50)
        base = self._checked_sampled_run(session, ds, "base", failing=0, seed=3)
        run = self._checked_sampled_run(session, ds, "new", failing=15, seed=4)
        # The run's human grades fail factual accuracy on 15 drafts too: -30 points in the sample.
        for d in session.exec(select(Draft).where(Draft.run_id == run.id).order_by(col(Draft.id))).all()[:15]:
            grade = session.exec(select(FinalGrade).where(FinalGrade.draft_id == d.id)).one()
            grade.factual_accuracy = "fail"
            session.add(grade)
        service.mark_baseline(session=session, run_id=base.id)  # type: ignore[arg-type]
        session.commit()
        checks_service.check_run(session=session, spec=spec, run_id=base.id)  # type: ignore[arg-type]
        checks_service.check_run(session=session, spec=spec, run_id=run.id)  # type: ignore[arg-type]
        new = after_run_checked(session, spec, run.id)  # type: ignore[arg-type]
        methods = sorted(str(a.evidence.get("method", "checks")) for a in new)
        assert [a.kind for a in new] == ["pass_rate_drop", "pass_rate_drop"] and methods == ["checks", "sample"]

    def test_the_alerts_page_says_the_interval_alert_is_additional(self, client_as: Callable[..., TestClient]) -> None:
        page = client_as("lead").get("/regression/alerts").text
        assert "(the plan&#39;s alert, always evaluated)" in page or "(the plan's alert, always evaluated)" in page
        assert "never replaces the plan" in page
