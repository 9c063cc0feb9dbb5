"""The evaluator's answers to the hooks of the domains below it (webapp/core/hooks.py): the judge's verdicts."""

from __future__ import annotations

from sqlalchemy import bindparam
from sqlalchemy import select as core_select

from webapp.core.db import table_of
from webapp.evaluator.models import EvaluatorJudgeScore
from webapp.grading import hooks as grading_hooks
from webapp.grading.evidence import JudgeLookup

_JUDGE = core_select(table_of(EvaluatorJudgeScore).c.scores, table_of(EvaluatorJudgeScore).c.rationale).where(
    table_of(EvaluatorJudgeScore).c.draft_id == bindparam("draft_id")
)

# The grading pages and the run comparison read judge verdicts through it (JudgeLookup.verdict_of).
JUDGE = JudgeLookup(stmt=_JUDGE)


def judge_lookup() -> JudgeLookup:
    """Return where a draft's judge verdict is read (one statement, `draft_id` bound per draft)."""
    return JUDGE


PROVIDES = (grading_hooks.judge_lookup.by(judge_lookup),)
