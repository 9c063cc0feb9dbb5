"""Regression's reactions: a checked run, or a golden case's final grade, raises the run's regression alerts.

The sampled pass-rate drop is the PPI domain's reaction to the same facts (webapp/ppi/reactions.py),
and notifying the new alerts the alerts domain's (webapp/alerts/reactions.py, on the fact
"regression_alerts_raised" recorded here when any alert is new).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import JsonValue
from sqlalchemy import bindparam
from sqlalchemy import select as core_select
from sqlmodel import Session

from webapp.core.db import stored_id, table_of
from webapp.core.facts import record_fact
from webapp.core.reactions import FactPublic, Reaction
from webapp.core.spec import EvalSpec
from webapp.datasets.models import EvalCase
from webapp.grading.models import FinalGrade
from webapp.regression import alerts as regression_alerts
from webapp.regression.models import RegressionAlert
from webapp.runs.models import Draft

_DRAFTS = table_of(Draft)
_FINALS = table_of(FinalGrade)
_CASES = table_of(EvalCase)

# The run of a draft whose final grade is factual "fail" on a golden case (no row otherwise).
_GOLDEN_FAIL = (
    core_select(_DRAFTS.c.run_id)
    .join(_FINALS, _FINALS.c.draft_id == _DRAFTS.c.id)
    .join(_CASES, _CASES.c.id == _DRAFTS.c.case_pk)
    .where(_DRAFTS.c.id == bindparam("draft_id"), _FINALS.c.factual_accuracy == "fail", _CASES.c.golden.is_(True))
)


def golden_fail_run(session: Session, draft_id: int) -> int | None:
    """Return the run of the draft when its final grade fails factual accuracy on a golden case, else None."""
    run_id = session.connection().execute(_GOLDEN_FAIL, {"draft_id": draft_id}).scalar()
    return None if run_id is None else int(run_id)


def raised(session: Session, run_id: int, new: Sequence[RegressionAlert]) -> JsonValue:
    """Record "regression_alerts_raised" when any alert is new; return the new alerts as the reaction's result."""
    if new:
        record_fact(session, "regression_alerts_raised", run_id=run_id)
    return [{"id": stored_id(a.id), "kind": a.kind, "message": a.message} for a in new]


def alerts_after_check(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
    """React to "run_checked": raise the run's golden and checks-drop alerts (the sampled drop is ppi's)."""
    run_id = int(fact.subject["run_id"])
    return raised(session, run_id, regression_alerts.raise_alerts_for_run(session=session, spec=spec, run_id=run_id))


def alerts_after_grade(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
    """React to "draft_finalised": a golden case graded factual fail raises its run's alerts."""
    run_id = golden_fail_run(session, int(fact.subject["draft_id"]))
    if run_id is None:
        return []
    return raised(session, run_id, regression_alerts.raise_alerts_for_run(session=session, spec=spec, run_id=run_id))


REACTIONS: tuple[Reaction, ...] = (
    Reaction(name="regression.alerts_after_check", fact="run_checked", handle=alerts_after_check),
    Reaction(name="regression.alerts_after_grade", fact="draft_finalised", handle=alerts_after_grade),
)
