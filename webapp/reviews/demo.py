"""Demo data: the last complete week's review sample drawn, with part of it reviewed."""

from __future__ import annotations

import datetime as dt

from sqlmodel import Session

from webapp.db import stored_id
from webapp.demo.context import DemoContext
from webapp.reviews import service
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
    sample = service.draw_sample(session=session, spec=spec, period=period, drawn_by=pm.id if pm else None)
    items = service.sample_items(session=session, sample=sample)
    to_review = items[: round(len(items) * 0.6)]
    for item, _event in to_review:
        verdict = ctx.rng.choices(list(NOTES), weights=[7, 2, 1])[0]
        service.record_verdict(
            session=session, item_id=stored_id(item.id), verdict=verdict, notes=ctx.rng.choice(NOTES[verdict]),
            reviewer=pm.id if pm else None,
        )
    session.flush()
