"""The judge's scores on the run comparison, hidden from a blind grader until they graded the draft.

The judge belongs to the evaluator, beside the chain: regression reads its verdicts through
grading's hook (webapp/grading/hooks.py, answered by the evaluator) and hides them with
grading's blind rule (`signals_view`).
"""

from __future__ import annotations

from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.blind import SignalsView
from webapp.core.spec import EvalSpec
from webapp.grading import evidence as grading_evidence
from webapp.grading import hooks as grading_hooks
from webapp.regression.case_pair import JudgeLookup


def judge_scores(*, session: Session, spec: EvalSpec, principal: Principal | None) -> JudgeLookup:
    """Return how the comparison reads the judge's scores of a draft, hidden from blind graders until they graded it."""
    views: dict[int, SignalsView] = {}
    judge = grading_hooks.judge_lookup()

    def lookup(*, run_id: int, draft_id: int) -> tuple[dict[str, object] | None, bool]:
        verdict = judge.verdict_of(session, draft_id)
        if verdict is None:
            return None, False
        if run_id not in views:
            views[run_id] = grading_evidence.signals_view(session=session, spec=spec, principal=principal, run_id=run_id)
        if views[run_id].hides(draft_id):
            return None, True
        return verdict.scores or {}, False

    return lookup
