"""Final human grades (from the grading domain) in alerts, the suite report and the comparison."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from tests.checks.conftest import World
from webapp.checks import service as checks_service
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.grading.models import FinalGrade
from webapp.regression import alerts as regression_alerts
from webapp.regression import comparison, service


def _ids(session: Session, run_id: int) -> dict[str, int]:
    return {o.case_id: o.draft_id for o in checks_service.run_summary(session=session, run_id=run_id).outcomes}


def _grade(session: Session, draft_id: int, factual: str, cit: float, tone: float, comp: float) -> None:
    session.add(
        FinalGrade(draft_id=draft_id, factual_accuracy=factual, citation_relevance=cit, tone=tone, completeness=comp, source="agreement")
    )


def test_golden_factual_fail_grade_alerts_and_fails_the_suite_case(session: Session, spec: EvalSpec, world: World) -> None:
    checks_service.check_run(session=session, spec=spec, run_id=world.a_id)
    ids = _ids(session, world.a_id)
    service.seed_golden(session=session, created_by=world.user_id)
    assert service.suite_report(session=session, run_id=world.a_id).results[0].status == "pass"
    # g1 passes every automated check in run A, but the graders found a fabricated claim.
    _grade(session, ids["g1"], "fail", 3, 4, 5)
    session.flush()
    alerts = regression_alerts.raise_alerts_for_run(session=session, spec=spec, run_id=world.a_id)
    assert [a.kind for a in alerts] == ["golden_factual"]
    assert "the final human grade is fail" in alerts[0].message
    (g1,) = service.suite_report(session=session, run_id=world.a_id).results
    assert g1.status == "fail" and g1.reason == "Factual accuracy (final human grade): the final grade is fail"
    # Raising again adds nothing.
    assert regression_alerts.raise_alerts_for_run(session=session, spec=spec, run_id=world.a_id) == []


def test_rubric_means_in_the_comparison(session: Session, spec: EvalSpec, world: World) -> None:
    for run in (world.a, world.b):
        checks_service.check_run(session=session, spec=spec, run_id=stored_id(run.id))
    a, b = _ids(session, world.a_id), _ids(session, world.b_id)
    _grade(session, a["g1"], "fail", 3, 4, 5)
    _grade(session, a["r1"], "pass", 5, 4, 3)
    _grade(session, b["r1"], "pass", 4, 2, 4)
    session.flush()
    cmp = comparison.compare_runs(session=session, spec=spec, a_id=world.a_id, b_id=world.b_id)
    assert cmp.rubric is not None
    means = {r.key: (r.a, r.b, r.delta) for r in cmp.rubric}
    # A: factual 1 pass of 2 = 0.5, citation (3+5)/2 = 4, tone (4+4)/2 = 4, completeness (5+3)/2 = 4.
    # B: one grade: factual 1.0, citation 4, tone 2, completeness 4.
    assert means["factual_accuracy"] == pytest.approx((0.5, 1.0, 0.5))
    assert means["citation_relevance"] == pytest.approx((4.0, 4.0, 0.0))
    assert means["tone"] == pytest.approx((4.0, 2.0, -2.0))
    assert means["completeness"] == pytest.approx((4.0, 4.0, 0.0))
