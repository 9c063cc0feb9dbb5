"""Grading's answers to the hooks of the domains below it (webapp/core/hooks.py)."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import Session, col, select

from webapp.grading import evidence
from webapp.grading.models import Grade
from webapp.runs import hooks as runs_hooks


def grade_counts(session: Session, draft_ids: list[int]) -> dict[int, int]:
    """Return how many grades each of these drafts has (drafts without any are left out)."""
    if not draft_ids:
        return {}
    rows = session.exec(
        select(Grade.draft_id, func.count()).where(col(Grade.draft_id).in_(draft_ids)).group_by(col(Grade.draft_id))
    ).all()
    return {draft_id: n for draft_id, n in rows}


PROVIDES = (
    runs_hooks.grade_counts.by(grade_counts),
    runs_hooks.signals_view.by(evidence.signals_view),
)
