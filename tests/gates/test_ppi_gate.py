"""The pilot gate's human-grading criterion on a run with a PPI sample, read from the confidence sequences (the spec's
`gates.human_grading: intervals`, a team's choice; the plan's reading is tests/gates/test_human_grading_reading.py).

Hand-worked values (threshold "> 3.5", factual accuracy as a pass share: (3.5 - 1)/(5 - 1) = 0.625):
Each estimate's se = (high - low)/3.92 from 100 graded of 1,000 drafts; the confidence sequence's half-width at
100 grades is 2.9261 se (tests/ppi/test_report.py::TestGateCall works it out): se 0.10204 -> +-0.2986.
- tone 4.00 [3.80, 4.20] -> sequence [3.70, 4.30]: lower bound clears 3.5 -> pass.
- factual accuracy 80% [70%, 90%], se 0.05102 -> sequence [65%, 95%] against 62.5% -> pass.
- citation relevance 3.00 [2.80, 3.20] -> [2.70, 3.30]: upper bound below 3.5 -> fail.
- completeness 3.60 [3.40, 3.80]: undecided (the sequence straddles 3.5). S^2 = se^2 / (1/100 - 1/1000) = 1.15692;
  at m graded drafts the half-width is S sqrt(1/m - 1/N) c(m/(1 - m/N)) t(m - 1)/z, first below the distance 0.1 at
  m = 634 (0.09990; worked with numpy and scipy.stats, the multiplier solved as in tests/ppi/test_anytime.py): about
  534 more drafts to draw (webapp.ppi.report.decide; the PPI page shows the same count), 529 while 5 drawn drafts wait.
- with 5 sampled drafts still ungraded, tone 4.00 [3.80, 4.20] is a provisional pass, not "undecided";
  the criterion stays incomplete until they are graded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.ppi.conftest import JUDGE, build_run
from webapp.core.spec import EvalSpec
from webapp.gates import service as gates_service
from webapp.gates.criteria import human_grading
from webapp.gates.facts import ppi_criterion
from webapp.gates.pilot_facts import PilotFacts, PpiGradingFacts
from webapp.gates.report import CriterionResult, GateReport, to_markdown
from webapp.ppi.estimator import Estimate
from webapp.ppi.service import draw_sample


@pytest.fixture
def spec(spec: EvalSpec) -> EvalSpec:
    """The project's spec with the interval reading chosen (`gates.human_grading: intervals`)."""
    return spec.model_copy(update={"gates": spec.gates.model_copy(update={"human_grading": "intervals"})})


def est(estimate: float, low: float, high: float, n: int = 100) -> Estimate:
    return Estimate(
        estimate=estimate, low=low, high=high, se=(high - low) / 3.92, df=n - 1, confidence=0.95,
        lambdas=(1.0, 1.0), judge_alone=estimate + 0.3, human_only_se=0.1, n_labels=n, n_drafts=1000,
    )


def ppi(
    readings: Mapping[str, Estimate | None], *, pending: int = 0, run_id: int = 7, in_draw_order: bool = False
) -> PpiGradingFacts:
    thresholds = {"factual_accuracy": 0.625, "citation_relevance": 3.5, "tone": 3.5, "completeness": 3.5}
    return PpiGradingFacts(
        run_id, 100, pending,
        tuple(ppi_criterion(k, readings[k], thresholds[k], pending=pending, in_draw_order=in_draw_order) for k in thresholds),
        in_draw_order=in_draw_order,
    )


GOOD = {
    "factual_accuracy": est(0.80, 0.70, 0.90),
    "citation_relevance": est(4.0, 3.8, 4.2),
    "tone": est(4.0, 3.8, 4.2),
    "completeness": est(4.0, 3.8, 4.2),
}


class TestPpiHumanGrading:
    @staticmethod
    def _grade(spec: EvalSpec, pending: int = 0, **readings: Estimate) -> CriterionResult:
        return human_grading(PilotFacts(7, "run", 0, ppi=ppi({**GOOD, **readings}, pending=pending)), spec)

    def test_passes_when_every_lower_bound_clears(self, spec: EvalSpec) -> None:
        c = self._grade(spec)
        assert c.status == "pass" and not c.link
        assert [p.status for p in c.parts] == ["pass"] * 4
        assert "Factual accuracy 80% [65%, 95%]" in c.measured and "Tone appropriateness 4.00 [3.70, 4.30]" in c.measured

    def test_fails_when_an_upper_bound_is_below(self, spec: EvalSpec) -> None:
        c = self._grade(spec, citation_relevance=est(3.0, 2.8, 3.2))
        assert c.status == "fail" and "Citation relevance" in c.summary
        assert {p.key: p.status for p in c.parts}["citation_relevance"] == "fail"

    def test_undecided_says_about_how_many_more_grades_and_links_the_ppi_page(self, spec: EvalSpec) -> None:
        c = self._grade(spec, completeness=est(3.6, 3.4, 3.8))
        assert c.status == "incomplete"
        assert c.summary.startswith("Completeness undecided: about 534 more drafts to draw would decide;")
        assert {p.key: p.summary for p in c.parts}["completeness"] == (
            "undecided: the confidence sequence straddles the threshold; about 534 more drafts to draw would decide"
        )
        assert {p.key: p.status for p in c.parts}["tone"] == "pass"
        assert c.link == "/ppi/runs/7" and "further sample" in c.action
        assert "/ppi/runs/7" in to_markdown(GateReport("pilot", 7, "run", [c], dt.datetime(2026, 11, 27, tzinfo=dt.UTC)))

    def test_a_fail_wins_over_undecided(self, spec: EvalSpec) -> None:
        assert self._grade(spec, completeness=est(3.6, 3.4, 3.8), tone=est(3.0, 2.8, 3.2)).status == "fail"

    def test_pending_sampled_drafts_make_it_provisional_not_undecided(self, spec: EvalSpec) -> None:
        c = self._grade(spec, pending=5)
        assert c.status == "incomplete" and "undecided" not in c.summary
        assert c.summary.startswith("provisional, 5 sampled drafts still without a final grade; each interval lies on one side")
        assert all(p.status == "pass" and "(provisional" in p.summary for p in c.parts)
        assert "Grade the sampled drafts" in c.action
        c = self._grade(spec, pending=5, completeness=est(3.6, 3.4, 3.8))
        assert "Completeness undecided: about 529 more drafts to draw would decide" in c.summary
        # a provisional fail does not fail the gate: the 5 grades to come may lift it
        assert self._grade(spec, pending=5, tone=est(3.0, 2.8, 3.2)).status == "incomplete"

    def test_graded_until_decided_in_draw_order_the_calls_hold_while_drafts_wait(self, spec: EvalSpec) -> None:
        """Issue 43: graded in the sample's random draw order, waiting drafts neither hold back a pass nor a fail."""

        def grade(**readings: Estimate) -> CriterionResult:
            return human_grading(PilotFacts(7, "run", 0, ppi=ppi({**GOOD, **readings}, pending=5, in_draw_order=True)), spec)

        c = grade()
        assert c.status == "pass" and all(p.status == "pass" and "provisional" not in p.summary for p in c.parts)
        assert grade(tone=est(3.0, 2.8, 3.2)).status == "fail"
        c = grade(completeness=est(3.6, 3.4, 3.8))
        assert c.status == "incomplete"
        # K counts beyond the drawn drafts, as without the order: the 5 waiting are counted as to be graded
        assert c.summary.startswith(
            "graded until decided in draw order, the calls hold while 5 drawn drafts wait; "
            "Completeness undecided: about 529 more drafts to draw would decide"
        )
        assert c.action.startswith("Grade the drawn drafts in the run's queue")

    def test_factual_share_threshold_is_strictly_read_from_the_bounds(self, spec: EvalSpec) -> None:
        # lower bound 0.60 < 0.625 < upper bound 0.70: undecided even though the estimate 0.65 is above
        c = self._grade(spec, factual_accuracy=est(0.65, 0.60, 0.70))
        assert {p.key: p.status for p in c.parts}["factual_accuracy"] == "incomplete"

    def test_without_a_ppi_sample_the_final_grades_decide_as_before(self, spec: EvalSpec) -> None:
        c = human_grading(PilotFacts(7, "run", 0), spec)
        assert c.title == "Human grading" and c.status == "incomplete" and c.summary == "no drafts to grade"


class TestPilotReportReadsThePpiSample:
    def test_a_sampled_run_is_read_from_its_sample(
        self, session: Session, spec: EvalSpec, app: FastAPI, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]
    ) -> None:
        app.state.spec = spec
        run, _ = build_run(session, n=60, golden=0)
        plain, _ = build_run(session, n=5, name="run-2", dataset_name="other")
        draw_sample(session=session, run_id=run.id, budget=10, judge_version=JUDGE, seed=3)  # type: ignore[arg-type]
        session.commit()
        sampled = gates_service.pilot_report(session=session, spec=spec, run=run)
        c = next(c for c in sampled.criteria if c.key == "human_grading")
        assert c.title.startswith("Human grading (PPI") and c.status == "incomplete"
        assert c.link == f"/ppi/runs/{run.id}" and "still without a final grade" in c.summary
        other = gates_service.pilot_report(session=session, spec=spec, run=plain)
        c2 = next(c for c in other.criteria if c.key == "human_grading")
        assert c2.title == "Human grading" and "have no final grade yet" in c2.summary
        page = client_as("pm").get(f"/gates/pilot?run={run.name}").text
        assert f'href="/ppi/runs/{run.id}"' in page and "Human grading (PPI, confidence sequence)" in page
        data = api_as("pm").get(f"/api/v1/gates/pilot?run={run.name}").json()
        assert {c["key"]: c["link"] for c in data["criteria"]}["human_grading"] == f"/ppi/runs/{run.id}"
