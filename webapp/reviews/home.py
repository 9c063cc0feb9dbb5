"""Home card for the PM: progress of the latest draft-vs-sent review."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlmodel import Session, col

from webapp.auth.service import Principal
from webapp.home.cards import HomeCard
from webapp.reviews import service
from webapp.reviews.models import ReviewSample
from webapp.spec import EvalSpec


def home_cards(*, session: Session, principal: Principal, spec: EvalSpec) -> list[HomeCard]:
    """Return the review waiting for the PM: the latest drawn sample's progress, or a period ready to draw."""
    if not principal.has_role("pm"):
        return []
    label = "Monthly review" if spec.review.cadence == "monthly" else "Weekly review"
    latest = session.execute(select(ReviewSample).order_by(col(ReviewSample.end).desc())).scalars().first()
    today = dt.datetime.now(spec.tz).date()
    last_done = service.period_of(today - dt.timedelta(days=7 if spec.review.cadence == "weekly" else 31), spec.review.cadence)
    if latest is None or latest.period < last_done:
        start, end, _ = service.period_bounds(last_done)
        if service.candidate_ids(session=session, start=start, end=end):
            return [HomeCard(title=f"{label} {last_done} is ready", body="Its random sample is drawn when you open it.",
                             href=f"/reviews/{last_done}", action="Start reviewing", tone="todo")]
    if latest is None:
        return []
    prog = service.progress(session=session, sample=latest)
    done = prog.total > 0 and prog.reviewed == prog.total
    return [
        HomeCard(
            title=f"{label}: {prog}",
            body=f"{latest.period}: draft and sent text side by side." + ("" if not done else " All pairs reviewed."),
            href=f"/reviews/{latest.period}", action="Continue" if not done else "Open",
            count=None, tone="ok" if done else "todo",
        )
    ]
