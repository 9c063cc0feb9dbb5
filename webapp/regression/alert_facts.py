"""What regression's reactions and ppi's share: the fact a new regression alert records, and the golden-fail query.

Both domains react to "run_checked" and "draft_finalised" by raising a run's regression alerts
(webapp/regression/reactions.py: golden and checks drop; webapp/ppi/reactions.py: the sampled
drop); a reactions module is imported by nobody but the registry, so what both read lives here.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import JsonValue
from sqlalchemy import bindparam
from sqlalchemy import select as core_select
from sqlmodel import Session

from webapp.core.db import stored_id, table_of
from webapp.core.facts import record_fact
from webapp.datasets.models import EvalCase
from webapp.grading.models import FinalGrade
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
