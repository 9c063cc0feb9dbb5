"""The spec's `gates.human_grading` setting: the plan's reading by default, the intervals where a team chooses them.

The same graded data, hand-worked (threshold "> 3.5"; factual accuracy pass = 5, fail = 1):
four drawn drafts graded (pass, 4, 4, 4), (pass, 4, 3, 4), (pass, 3, 4, 4), (fail, 4, 4, 3) in
(factual, citation, tone, completeness); two more drafts were not drawn (nobody grades them).
- the plan's reading: factual (5 + 5 + 5 + 1) / 4 = 4.00, citation (4 + 4 + 3 + 4) / 4 = 3.75,
  tone 3.75, completeness 3.75: every average is above 3.5 -> pass;
- the intervals (the run's PPI reading): tone 3.75 [3.30, 4.20] straddles 3.5 -> undecided,
  so the criterion is incomplete.
With tone graded 3, 3, 4, 4 instead, the plan's tone average is exactly 3.50, not above 3.5 ->
fail, while the interval 3.50 [3.10, 3.90] is undecided.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlmodel import Session, col, select

from tests.conftest import SPEC_PATH
from tests.ppi.conftest import JUDGE, build_run
from webapp.core.spec import EvalSpec, load_spec
from webapp.gates import service as gates_service
from webapp.gates.criteria import human_grading
from webapp.gates.facts import ppi_criterion
from webapp.gates.pilot_facts import DraftFacts, FinalGradeFacts, PilotFacts, PpiGradingFacts
from webapp.grading.models import FinalGrade
from webapp.ppi.estimator import Estimate
from webapp.ppi.models import PpiDraw
from webapp.ppi.service import draw_sample


def with_reading(spec: EvalSpec, reading: str) -> EvalSpec:
    return spec.model_copy(update={"gates": spec.gates.model_copy(update={"human_grading": reading})})


def est(estimate: float, low: float, high: float) -> Estimate:
    return Estimate(
        estimate=estimate, low=low, high=high, se=(high - low) / 3.92, df=3, confidence=0.95,
        lambdas=(1.0, 1.0), judge_alone=estimate, human_only_se=0.1, n_labels=4, n_drafts=6,
    )


GRADES = [("pass", 4, 4, 4), ("pass", 4, 3, 4), ("pass", 3, 4, 4), ("fail", 4, 4, 3)]


def facts(grades: list[tuple[str, int, int, int]], tone: Estimate, *, pending: int = 0) -> PilotFacts:
    drafts = [DraftFacts(k, f"c{k}", final_grade=FinalGradeFacts(*g)) for k, g in enumerate(grades)]
    drafts += [DraftFacts(10 + k, f"u{k}") for k in range(2)]  # not drawn: nobody grades them
    readings = {
        "factual_accuracy": (est(0.75, 0.50, 1.00), 0.625),
        "citation_relevance": (est(3.75, 3.30, 4.20), 3.5),
        "tone": (tone, 3.5),
        "completeness": (est(3.75, 3.30, 4.20), 3.5),
    }
    criteria = tuple(ppi_criterion(k, e, t, pending=pending) for k, (e, t) in readings.items())
    ppi = PpiGradingFacts(7, len(grades), pending, criteria, drafts=6, drawn=len(grades) + pending)
    return PilotFacts(7, "run", 6, drafts, ppi=ppi)


class TestTheSettingReadsTheSameGrades:
    def test_the_spec_file_chooses_the_plans_reading(self) -> None:
        assert load_spec(SPEC_PATH).gates.human_grading == "plan"

    def test_the_plan_passes_what_the_intervals_leave_undecided(self, spec: EvalSpec) -> None:
        data = facts(GRADES, est(3.75, 3.30, 4.20))
        plan = human_grading(data, spec)
        assert plan.status == "pass"
        assert {p.key: p.value for p in plan.parts} == {
            "factual_accuracy": 4.0, "citation_relevance": 3.75, "tone": 3.75, "completeness": 3.75,
        }
        assert [p.status for p in plan.parts] == ["pass"] * 4
        assert "the plan's reading" in plan.title
        # Issue 41: the run's drafts and the undrawn ones are said (it read "4 graded drafts of 6").
        assert plan.summary.endswith("; 4 graded of 4 drawn; the run has 6 drafts, 2 not drawn; every graded draft counts")
        intervals = human_grading(data, with_reading(spec, "intervals"))
        assert intervals.status == "incomplete" and "confidence sequence" in intervals.title
        assert {p.key: p.status for p in intervals.parts}["tone"] == "incomplete"

    def test_exactly_the_threshold_fails_the_plan_and_is_undecided_by_interval(self, spec: EvalSpec) -> None:
        grades = [("pass", 4, 3, 4), ("pass", 4, 3, 4), ("pass", 3, 4, 4), ("fail", 4, 4, 3)]
        data = facts(grades, est(3.50, 3.10, 3.90))
        plan = human_grading(data, spec)
        assert plan.status == "fail" and {p.key: p.status for p in plan.parts}["tone"] == "fail"
        assert "not above 3.5: Tone appropriateness" in plan.summary
        assert human_grading(data, with_reading(spec, "intervals")).status == "incomplete"

    def test_drawn_drafts_without_a_final_grade_leave_the_plans_reading_incomplete(self, spec: EvalSpec) -> None:
        plan = human_grading(facts(GRADES, est(3.75, 3.30, 4.20), pending=2), spec)
        assert plan.status == "incomplete" and plan.summary.startswith("2 sampled drafts have no final grade yet")

    def test_a_bad_value_is_refused_naming_the_key(self, tmp_path: Path) -> None:
        from webapp.core.spec import SpecError

        bad = tmp_path / "spec.yaml"
        bad.write_text(SPEC_PATH.read_text().replace("human_grading: plan", "human_grading: bounds"))
        with pytest.raises(SpecError, match=r"key 'gates.human_grading'"):
            load_spec(bad)


class TestOnASampledRun:
    def test_the_gate_page_reads_the_plans_way_by_default_and_intervals_when_set(
        self, session: Session, spec: EvalSpec, app: FastAPI, client_as: Callable[..., TestClient]
    ) -> None:
        run, _ = build_run(session, n=60, golden=0)
        draw_sample(session=session, run_id=run.id, budget=10, judge_version=JUDGE, seed=3)  # type: ignore[arg-type]
        drawn = session.exec(
            select(PpiDraw.draft_id).where(PpiDraw.run_id == run.id, col(PpiDraw.drawn).is_(True)).order_by(col(PpiDraw.draft_id))
        ).all()
        # Every drawn draft graded tone 4 and citation 4, completeness alternately 4 and 3, factual pass.
        for k, d in enumerate(drawn):
            session.add(FinalGrade(draft_id=d, factual_accuracy="pass", citation_relevance=4, tone=4, completeness=4 - k % 2, source="agreement"))
        session.commit()
        n = len(drawn)
        completeness = (4 * ((n + 1) // 2) + 3 * (n // 2)) / n
        rep = gates_service.pilot_report(session=session, spec=spec, run=run)
        c = next(c for c in rep.criteria if c.key == "human_grading")
        parts = {p.key: p for p in c.parts}
        assert parts["tone"].value == 4.0 and parts["factual_accuracy"].value == 5.0
        assert parts["completeness"].value == pytest.approx(completeness)
        assert c.status == ("pass" if completeness > 3.5 else "fail")
        assert c.title == "Human grading (the plan's reading: averages of the graded drafts)"
        # Issue 41: how many drafts the run has, and that the others were not drawn (60 drafts, n drawn).
        assert f"; {n} graded of {n} drawn; the run has 60 drafts, {60 - n} not drawn; every graded draft counts" in c.summary
        page = client_as("pm").get(f"/gates/pilot?run={run.name}").text
        assert "the plan&#39;s reading" in page and "95% intervals" not in page
        # the intervals page says it uses intervals and that the gate does not
        ppi_page = client_as("lead").get(f"/ppi/runs/{run.name}").text
        assert "This page uses 95% intervals; the pilot gate does not." in ppi_page
        app.state.spec = with_reading(spec, "intervals")
        page = client_as("pm").get(f"/gates/pilot?run={run.name}").text
        assert "Human grading (PPI, confidence sequence)" in page
        ppi_page = client_as("lead").get(f"/ppi/runs/{run.name}").text
        assert "This page uses 95% intervals, and the pilot gate's human-grading criterion reads their confidence sequences" in ppi_page
        rep = gates_service.pilot_report(session=session, spec=with_reading(spec, "intervals"), run=run)
        assert next(c for c in rep.criteria if c.key == "human_grading").title.startswith("Human grading (PPI")
