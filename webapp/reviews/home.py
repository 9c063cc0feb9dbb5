"""Home card for the PM: progress of the latest draft-vs-sent review."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlmodel import Session, col

from webapp.auth.service import Principal
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc
from webapp.metrics import daily as metrics_daily
from webapp.reviews import cadence, service
from webapp.reviews.models import ReviewSample
from webapp.web.cards import HomeCard

ROLE_NAMES = {"pm": "the PM", "ml_lead": "the ML lead"}


def home_cards(*, session: Session, principal: Principal, spec: EvalSpec) -> list[HomeCard]:
    """Return the reviews waiting: the plan's cadence (who did the latest), and the PM's draft-vs-sent sample."""
    return _cadence_cards(session=session, principal=principal, spec=spec) + _sample_cards(
        session=session, principal=principal, spec=spec
    )


def _cadence_cards(*, session: Session, principal: Principal, spec: EvalSpec) -> list[HomeCard]:
    """Say whether the newest review of the plan's cadence is done, by whom and when, and how many were missed."""
    if not principal.has_role(*cadence.ALL_MARKERS):
        return []
    today = metrics_daily.today_in(spec)
    due = cadence.due_reviews(session=session, spec=spec, today=today)
    if not due:
        return []
    latest, earlier = due[0], due[1:]
    missed = sum(not d.done for d in earlier)
    late = not latest.done and latest.end < today
    if latest.done:
        who = "; ".join(f"{m.name} ({as_utc(m.done_at):%Y-%m-%d %H:%M} UTC)" for m in latest.marks)
        body = f"Done by {who}."
    elif latest.marks:
        names = ", ".join(m.name for m in latest.marks)
        body = f"Marked by {names}; still needs " + " and ".join(ROLE_NAMES.get(r, r) for r in latest.missing) + "."
    elif late:
        body = "Missed: nobody marked it done."
    else:
        body = "Due: nobody has marked it done yet."
    if missed:
        body += f" {missed} earlier review{'' if missed == 1 else 's'} not done."
    tone = "alert" if missed or late else "ok" if latest.done else "todo"
    return [HomeCard(f"{cadence.SHORT[latest.kind]}: {latest.when}", body, "/cadence", "Open the cadence", missed or None, tone)]


def _sample_cards(*, session: Session, principal: Principal, spec: EvalSpec) -> list[HomeCard]:
    """Return the review waiting for the PM: the latest drawn sample's progress, or a period ready to draw."""
    if not principal.has_role("pm"):
        return []
    label = "Monthly review" if spec.review.cadence == "monthly" else "Weekly review"
    latest = session.execute(select(ReviewSample).order_by(col(ReviewSample.end).desc())).scalars().first()
    today = dt.datetime.now(spec.tz).date()
    last_done = service.period_of(today - dt.timedelta(days=7 if spec.review.cadence == "weekly" else 31), spec.review.cadence)
    # The newest finished period with sent drafts (issue 41: the card showed W46's sample while W47,
    # the newest week with drafts, waited unseen because the week just ended had none).
    newest = service.newest_period_with_drafts(
        session=session, until=service.period_bounds(last_done)[1], cadence=spec.review.cadence
    )
    if newest is not None and (latest is None or latest.period < newest):
        return [HomeCard(title=f"{label} {newest} is ready", body="Its random sample is drawn when you open it.",
                         href=f"/reviews/{newest}", action="Start reviewing", tone="todo")]
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
