"""A run's grading plan: the drafts a sample drew for human grading, in a random order.

The sampler (webapp.ppi) decides before any grade which drafts people grade and hands them over
here in the order to grade them; the queue then offers only those, in rank order
(webapp.grading.queue's statements read this table). Rows are only ever added (a further sample adds
its new drafts after the ones already planned).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from webapp.grading.models import FinalGrade, GradingPlan


def add_to_plan(*, session: Session, run_id: int, draft_ids: Sequence[int]) -> int:
    """Add drafts to the run's grading plan after those already in it (ranks in the given order); return how many were new."""
    planned = set(session.exec(select(GradingPlan.draft_id).where(GradingPlan.run_id == run_id)).all())
    start = session.exec(select(func.coalesce(func.max(GradingPlan.rank), -1)).where(GradingPlan.run_id == run_id)).one()
    new = [d for d in dict.fromkeys(draft_ids) if d not in planned]
    for k, draft_id in enumerate(new):
        session.add(GradingPlan(draft_id=draft_id, run_id=run_id, rank=int(start) + 1 + k))
    session.flush()
    return len(new)


def planned_drafts(*, session: Session, run_id: int) -> list[int] | None:
    """Return the run's planned drafts in grading order, or None when the run has no plan (grade every draft)."""
    rows = session.exec(select(GradingPlan.draft_id).where(GradingPlan.run_id == run_id).order_by(col(GradingPlan.rank))).all()
    return list(rows) or None


def reorder_plan(*, session: Session, run_id: int, draft_ids: Sequence[int]) -> None:
    """Give the run's planned drafts the ranks of their places in `draft_ids` (a run graded until decided: its draw order)."""
    for rank, draft_id in enumerate(draft_ids):
        session.execute(
            update(GradingPlan).where(col(GradingPlan.run_id) == run_id, col(GradingPlan.draft_id) == draft_id).values(rank=rank)
        )
    session.flush()


def close_plan(*, session: Session, run_id: int, reason: str) -> None:
    """Close the run's planned drafts without a final grade to grading, with the reason (kept for the page and a refused save).

    Drafts with a final grade stay open so a correction can still re-open a decision.
    """
    finals = select(FinalGrade.draft_id)
    session.execute(
        update(GradingPlan)
        .where(col(GradingPlan.run_id) == run_id, col(GradingPlan.draft_id).not_in(finals))
        .values(closed_reason=reason)
    )
    session.flush()


def reopen_plan(*, session: Session, run_id: int) -> None:
    """Open the run's planned drafts to grading again."""
    session.execute(update(GradingPlan).where(col(GradingPlan.run_id) == run_id).values(closed_reason=None))
    session.flush()


def plan_closed_reason(*, session: Session, run_id: int) -> str | None:
    """Return why the run's remaining planned drafts are closed to grading, or None when none is."""
    return session.exec(
        select(GradingPlan.closed_reason).where(GradingPlan.run_id == run_id, col(GradingPlan.closed_reason).is_not(None)).limit(1)
    ).first()
