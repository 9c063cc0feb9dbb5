"""Skips: a grader passes on a draft with a reason; it goes to the end of their queue (webapp.grading.queue)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

from sqlalchemy import func
from sqlmodel import Session, col, select

from webapp.core.timeutil import utcnow
from webapp.grading.errors import AlreadyGraded, GradeInvalid, NotFound
from webapp.grading.models import Grade, GradingSkip
from webapp.grading.queue import release_reservation
from webapp.runs.models import Draft

# Reasons a grader may give for skipping a draft (key -> label); "other" needs a few words.
SKIP_REASONS: dict[str, str] = {
    "domain": "needs domain knowledge",
    "kb_missing": "KB missing",
    "unclear_ticket": "unclear ticket",
    "other": "other",
}


def skip_draft(
    *,
    session: Session,
    draft_id: int,
    grader_id: int,
    reason: str,
    detail: str = "",
    now: dt.datetime | None = None,
) -> GradingSkip:
    """Record that the grader skips the draft (with a reason) and give back their reservation."""
    reason = (reason or "").strip()
    if reason not in SKIP_REASONS:
        raise GradeInvalid(
            f"reason: choose one of {', '.join(SKIP_REASONS)} (got {reason!r})", field="reason"
        )
    detail = (detail or "").strip()
    if reason == "other" and not detail:
        raise GradeInvalid("detail: say in a few words why you skip this draft", field="detail")
    if len(detail) > 500:
        raise GradeInvalid("detail: at most 500 characters", field="detail")
    if session.get(Draft, draft_id) is None:
        raise NotFound(f"draft {draft_id} does not exist")
    graded = select(Grade.id).where(Grade.draft_id == draft_id, Grade.grader_id == grader_id)
    if session.exec(graded).first() is not None:
        raise AlreadyGraded(f"you already graded draft {draft_id}; there is nothing to skip")
    release_reservation(session=session, draft_id=draft_id, grader_id=grader_id)
    row = GradingSkip(
        draft_id=draft_id, grader_id=grader_id, reason=reason, detail=detail, skipped_at=now or utcnow()
    )
    session.add(row)
    session.flush()
    return row


def skip_counts(*, session: Session, draft_ids: Collection[int]) -> dict[int, int]:
    """Return how many times each draft was skipped (drafts never skipped are absent)."""
    if not draft_ids:
        return {}
    rows = session.exec(
        select(GradingSkip.draft_id, func.count())
        .where(col(GradingSkip.draft_id).in_(list(draft_ids)))
        .group_by(col(GradingSkip.draft_id))
    )
    return {int(d): int(n) for d, n in rows}
