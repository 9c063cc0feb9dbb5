"""Cross-domain reactions: what one domain's event sets off in another, wired here so domains import one way.

Routes, pages and commands call these after the service call that caused the event, in the same
transaction. A domain never imports a domain above it; this module may import all of them.
"""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlmodel import Session

from webapp.datasets.models import EvalCase
from webapp.evaluator.models import EvaluatorJudgeScore
from webapp.grading.evidence import JudgeVerdict
from webapp.grading.models import FinalGrade
from webapp.grading.tables import table_of
from webapp.regression.service import raise_alerts_for_run
from webapp.runs.models import Draft
from webapp.spec import EvalSpec

# ---------------------------------------------------------------------------------------------
# Grading (written by the grading helper; the lead merges this section with the other flows)

_DRAFTS = table_of(Draft)
_FINALS = table_of(FinalGrade)
_CASES = table_of(EvalCase)

# The run of a draft whose final grade is factual "fail" on a golden case (no row otherwise).
_GOLDEN_FAIL = (
    select(_DRAFTS.c.run_id)
    .join(_FINALS, _FINALS.c.draft_id == _DRAFTS.c.id)
    .join(_CASES, _CASES.c.id == _DRAFTS.c.case_pk)
    .where(_DRAFTS.c.id == bindparam("draft_id"), _FINALS.c.factual_accuracy == "fail", _CASES.c.golden.is_(True))
)


def after_grading(*, session: Session, spec: EvalSpec, draft_id: int) -> None:
    """React to a grade, revision or adjudication of a draft: a golden case graded factual fail raises its run's alerts now."""
    run_id = session.connection().execute(_GOLDEN_FAIL, {"draft_id": draft_id}).scalar()
    if run_id is not None:
        raise_alerts_for_run(session=session, spec=spec, run_id=int(run_id))


_JUDGE = select(table_of(EvaluatorJudgeScore).c.scores, table_of(EvaluatorJudgeScore).c.rationale).where(
    table_of(EvaluatorJudgeScore).c.draft_id == bindparam("draft_id")
)


def judge_verdict(session: Session, draft_id: int) -> JudgeVerdict | None:
    """Return the evaluator's judge verdict on a draft for the grading pages (None when no judge ran on it)."""
    row = session.connection().execute(_JUDGE, {"draft_id": draft_id}).first()
    return JudgeVerdict(scores=row.scores, rationale=row.rationale) if row is not None else None
