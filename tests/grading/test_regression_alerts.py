"""A golden example graded factual "fail" raises a regression alert at once, not at the next check."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from tests.grading.conftest import GradingWorld, grade
from tests.reactions_support import after_grading
from webapp.core.spec import EvalSpec
from webapp.regression.models import RegressionAlert


@pytest.mark.parametrize(("draft_index", "alerts"), [(0, 1), (1, 0)], ids=["golden", "not golden"])
def test_only_a_golden_factual_fail_raises_an_alert(
    session: Session, spec: EvalSpec, world: GradingWorld, draft_index: int, alerts: int
) -> None:
    # case-0 is golden, case-1 is not; both graders fail the draft's invented refund.
    for user in (world.alice, world.bob):
        grade(session, spec, world, user, draft_index, factual="fail")
        after_grading(session, spec, world.drafts[draft_index].id)  # as routes call it
    raised = session.exec(select(RegressionAlert)).all()
    assert len(raised) == alerts
    if alerts:
        assert raised[0].kind == "golden_factual" and f"case-{draft_index}" in raised[0].message
