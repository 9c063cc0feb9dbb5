"""Demo data: the last complete week's review sample drawn, with part of it reviewed."""

from __future__ import annotations

import datetime as dt
import re

from sqlmodel import Session

from webapp.core.db import stored_id
from webapp.core.demo_context import DemoContext
from webapp.core.spec import EvalSpec
from webapp.reviews import cadence, service
from webapp.reviews.models import CadenceReview

# The verdict drawn for a pair (weights 7:2:1) and the index of its note (one draw among as many notes as each
# verdict had when the demo's figures were written, so every later hook draws the same numbers). The note then
# comes from the list for what the pair shows, so it never contradicts it: the note of a pair sent as drafted
# does not say the agent fixed anything, and only a draft that promises a refund is said to.
WEIGHTS = {"good": 7, "minor_issue": 2, "major_issue": 1}
NOTE_COUNTS = {"good": 3, "minor_issue": 2, "major_issue": 1}
NOTES: dict[str, dict[str, list[str]]] = {
    "unchanged": {
        "good": ["", "Sent as drafted.", "Correct and complete as drafted."],
        "minor_issue": ["Slightly stiff opening.", "Correct, but longer than the question needs."],
    },
    "edited": {
        "good": ["", "The agent's edits were wording only.", "Fine; the agent adjusted the wording."],
        "minor_issue": ["Slightly stiff opening; the agent softened it.", "The agent had to add a closing line."],
    },
}
# A draft that promises a refund breaks KB-5001 (agents cannot promise refunds): a major issue, whatever was sent.
REFUND_PROMISE = re.compile(r"\b(started|processed|issued)\b[^.]*\brefund\b", re.I)
REFUND_NOTES = {
    True: "The draft promised a refund (KB-5001: agents cannot promise one), and it was sent.",
    False: "The draft promised a refund (KB-5001: agents cannot promise one); the agent took it out.",
}


def demo_verdict(*, draft: str, sent: str, drawn: str, note_index: int) -> tuple[str, str]:
    """Return the verdict and note a reviewer gives a pair, given the verdict and note index drawn for it."""
    if REFUND_PROMISE.search(draft):
        return "major_issue", REFUND_NOTES[bool(REFUND_PROMISE.search(sent))]
    verdict = "minor_issue" if drawn == "major_issue" else drawn  # a major issue needs a promise to point at
    notes = NOTES["unchanged" if sent == draft else "edited"][verdict]
    return verdict, notes[min(note_index, len(notes) - 1)]


def seed(*, session: Session, spec: EvalSpec, ctx: DemoContext) -> None:
    """Draw the last complete period's sample and record verdicts on about 60% of it."""
    cadence = spec.review.cadence
    last_complete = ctx.today - dt.timedelta(days=7 if cadence == "weekly" else 31)
    period = service.period_of(last_complete, cadence)
    pm = ctx.users.get("pm")
    sample = service.draw_sample(session=session, spec=spec, period=period, today=ctx.today, drawn_by=pm.id if pm else None)
    items = service.sample_items(session=session, sample=sample)
    to_review = items[: round(len(items) * 0.6)]
    for item, event in to_review:
        drawn = ctx.rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
        note_index = ctx.rng.choice(range(NOTE_COUNTS[drawn]))
        verdict, notes = demo_verdict(draft=event.draft_text or "", sent=event.sent_text or "", drawn=drawn, note_index=note_index)
        service.record_verdict(
            session=session, item_id=stored_id(item.id), verdict=verdict, notes=notes, reviewer=pm.id if pm else None,
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
