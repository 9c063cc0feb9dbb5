"""Demo data: the last complete week's review sample drawn, with part of it reviewed."""

from __future__ import annotations

import datetime as dt

from sqlmodel import Session

from webapp.db import stored_id
from webapp.demo.context import DemoContext
from webapp.reviews import cadence, service
from webapp.reviews.models import CadenceReview
from webapp.spec import EvalSpec

NOTES = {
    "good": ["", "Agent only fixed the greeting.", "Sent as drafted."],
    "minor_issue": ["Slightly stiff opening.", "Missed the secondary question about invoices."],
    "major_issue": ["Draft promised a refund the policy does not allow."],
}


def seed(*, session: Session, spec: EvalSpec, ctx: DemoContext) -> None:
    """Draw the last complete period's sample and record verdicts on about 60% of it."""
    cadence = spec.review.cadence
    last_complete = ctx.today - dt.timedelta(days=7 if cadence == "weekly" else 31)
    period = service.period_of(last_complete, cadence)
    pm = ctx.users.get("pm")
    sample = service.draw_sample(session=session, spec=spec, period=period, today=ctx.today, drawn_by=pm.id if pm else None)
    items = service.sample_items(session=session, sample=sample)
    to_review = items[: round(len(items) * 0.6)]
    for item, _event in to_review:
        verdict = ctx.rng.choices(list(NOTES), weights=[7, 2, 1])[0]
        service.record_verdict(
            session=session, item_id=stored_id(item.id), verdict=verdict, notes=ctx.rng.choice(NOTES[verdict]),
            reviewer=pm.id if pm else None,
        )
    session.flush()
    _seed_cadence(session=session, spec=spec, ctx=ctx)


def _seed_cadence(*, session: Session, spec: EvalSpec, ctx: DemoContext) -> None:
    """Mark the pilot's daily metrics reviews done by the support lead or the PM, all but one day."""
    marker = {"support_lead": ctx.users.get("support_lead"), "pm": ctx.users.get("pm")}
    due = cadence.periods(spec=spec, today=ctx.today)
    for n, (kind, period, start, _end) in enumerate(due):
        if n == len(due) - 2:  # one missed day, so the page and the home card show what a gap looks like
            continue
        role = "support_lead" if n % 3 else "pm"
        user = marker[role]
        if user is None or kind not in cadence.MARKERS or role not in cadence.MARKERS[kind]:
            continue
        done_at = dt.datetime.combine(start, dt.time(9, 30 + n), tzinfo=spec.tz).astimezone(dt.UTC)
        note = "Reject spike after the model change: rollback requested." if n == 5 else ""
        session.add(CadenceReview(kind=kind, period=period, user_id=stored_id(user.id), role=role, note=note, done_at=done_at))
    session.flush()
