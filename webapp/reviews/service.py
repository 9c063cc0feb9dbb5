"""Draw, browse and record the PM's periodic draft-vs-sent review."""

from __future__ import annotations

import datetime as dt
import difflib
import random
import re
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow
from webapp.metrics import daily as metrics_daily
from webapp.metrics.models import Event
from webapp.regression import service as regression_service
from webapp.reviews.models import ReviewItem, ReviewSample

VERDICTS: dict[str, str] = {"good": "Good", "minor_issue": "Minor issue", "major_issue": "Major issue"}
_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


class ReviewError(ValueError):
    """A review request that cannot be honoured; the message names the field."""


class SampleAlreadyDrawn(ReviewError):
    """The period's sample exists (drawn before, or by a request running at the same time): a 409."""

    status = 409


def period_of(day: dt.date, cadence: str) -> str:
    """Return the period holding a day: ISO week '2026-W45' or month '2026-11'."""
    if cadence == "monthly":
        return f"{day.year:04d}-{day.month:02d}"
    year, week, _ = day.isocalendar()
    return f"{year:04d}-W{week:02d}"


def period_bounds(period: str) -> tuple[dt.date, dt.date, str]:
    """Return the first and last day of a period and its cadence."""
    if m := _WEEK.match(period):
        try:
            start = dt.date.fromisocalendar(int(m[1]), int(m[2]), 1)
        except ValueError as exc:
            raise ReviewError(f"period: no ISO week {period!r}") from exc
        return start, start + dt.timedelta(days=6), "weekly"
    if m := _MONTH.match(period):
        year, month = int(m[1]), int(m[2])
        if not 1 <= month <= 12:
            raise ReviewError(f"period: no month {period!r}")
        start = dt.date(year, month, 1)
        nxt = dt.date(year + (month == 12), month % 12 + 1, 1)
        return start, nxt - dt.timedelta(days=1), "monthly"
    raise ReviewError(f"period: expected YYYY-Www or YYYY-MM, not {period!r}")


def _sent_drafts() -> list[ColumnElement[bool]]:
    # "Sent drafts": shown drafts the agent accepted or edited and sent, with both texts.
    return [
        col(Event.draft_shown).is_(True),
        col(Event.action).in_(("accept", "edit")),
        col(Event.draft_text).is_not(None),
        col(Event.sent_text).is_not(None),
    ]


def _candidates_stmt(start: dt.date, end: dt.date) -> Select[str]:
    return select(col(Event.event_id)).where(col(Event.day) >= start, col(Event.day) <= end, *_sent_drafts())


def candidate_ids(*, session: Session, start: dt.date, end: dt.date) -> list[str]:
    """Return the event ids of the sent drafts of [start, end], sorted (the draw's fixed order)."""
    return sorted(session.execute(_candidates_stmt(start, end)).scalars())


def newest_period_with_drafts(*, session: Session, until: dt.date, cadence: str) -> str | None:
    """Return the period of the newest sent draft on or before `until` (None: no sent draft yet)."""
    day = session.execute(select(func.max(col(Event.day))).where(col(Event.day) <= until, *_sent_drafts())).scalar()
    return None if day is None else period_of(day, cadence)


def seed_for(period: str) -> str:
    """Return the seed of a period's draw (the same period always gives the same sample)."""
    return f"draftdesk-review:{period}"


# The first period a review may be drawn for: nothing of the pilot is older, and a year like 0001
# is a typo, not a review.
FIRST_DRAWABLE = dt.date(2000, 1, 1)


def check_drawable(period: str, *, today: dt.date) -> tuple[dt.date, dt.date, str]:
    """Return a period's bounds when a sample may be drawn for it: started by `today`, not before 2000.

    A week or month that has not begun has no sent drafts yet; a sample drawn for it would be an
    empty one fixed for ever (a sample, once drawn, is kept), so the draw is refused instead.
    The week (or month) in progress may be drawn: the PM may start reviewing before it ends.
    """
    start, end, cadence = period_bounds(period)
    current = period_of(today, cadence)
    if start > today:
        raise ReviewError(f"period: {period} has not begun (the current {'month' if cadence == 'monthly' else 'ISO week'} is {current}); a sample is drawn for a period that has started")
    if start < FIRST_DRAWABLE:
        raise ReviewError(f"period: {period} is before {FIRST_DRAWABLE.year}; a sample is drawn for a period of the pilot")
    return start, end, cadence


def draw_sample(
    *, session: Session, spec: EvalSpec, period: str, today: dt.date, drawn_by: int | None = None,
    if_drawn: Literal["return", "refuse"] = "return",
) -> ReviewSample:
    """Draw the period's random sample (seeded by the period) and store it; an existing sample is returned as is,
    or refused with SampleAlreadyDrawn when `if_drawn` is "refuse" (the Draw button).

    Raise ReviewError naming the period when it is malformed, has not begun by `today`, or is before 2000.
    Two draws at the same time (issue 41: six PMs pressing Draw) store one sample: on PostgreSQL the
    later inserts meet the unique index on the period, on SQLite they wait for the first writer and
    then find its sample; either way they raise SampleAlreadyDrawn (a 409), never a driver error.
    """
    existing = get_sample(session=session, period=period)
    if existing is not None:
        if if_drawn == "refuse":
            raise _already_drawn(existing)
        return existing
    start, end, cadence = check_drawable(period, today=today)
    wanted = spec.review.monthly_pairs if cadence == "monthly" else spec.review.weekly_pairs
    ids = candidate_ids(session=session, start=start, end=end)
    chosen = random.Random(seed_for(period)).sample(ids, min(wanted, len(ids)))
    sample = ReviewSample(
        period=period, cadence=cadence, start=start, end=end, wanted=wanted, candidates=len(ids),
        seed=seed_for(period), drawn_by=drawn_by,
    )
    try:
        with session.begin_nested():  # a savepoint: the request's transaction survives a lost race
            session.add(sample)
            session.flush()
    except IntegrityError:
        raced = get_sample(session=session, period=period)
        raise _already_drawn(raced) from None
    for position, event_id in enumerate(chosen):
        session.add(ReviewItem(sample_id=stored_id(sample.id), position=position, event_id=event_id))
    session.flush()
    return sample


def _already_drawn(sample: ReviewSample | None) -> SampleAlreadyDrawn:
    when = f" at {sample.drawn_at:%Y-%m-%d %H:%M} UTC" if sample is not None else ""
    period = f" of {sample.period}" if sample is not None else ""
    return SampleAlreadyDrawn(
        f"period: the sample{period} was drawn already{when} and is kept (a draw is seeded by its period, so "
        "drawing again would give the same pairs)"
    )


def get_sample(*, session: Session, period: str) -> ReviewSample | None:
    """Return the stored sample of a period, or None."""
    return session.execute(select(ReviewSample).where(col(ReviewSample.period) == period)).scalars().first()


def sample_items(*, session: Session, sample: ReviewSample) -> list[tuple[ReviewItem, Event]]:
    """Return the sample's items with their events, in draw order."""
    stmt = (
        select(ReviewItem, Event)
        .join(Event, col(Event.event_id) == ReviewItem.event_id)
        .where(col(ReviewItem.sample_id) == sample.id)
        .order_by(col(ReviewItem.position))
    )
    return [(i, e) for i, e in session.execute(stmt).all()]


@dataclass
class Progress:
    reviewed: int
    total: int

    def __str__(self) -> str:
        return f"{self.reviewed}/{self.total} reviewed"


def progress(*, session: Session, sample: ReviewSample) -> Progress:
    """Return how many of the sample's pairs have a verdict."""
    total, reviewed = session.execute(
        select(func.count(col(ReviewItem.id)), func.count(col(ReviewItem.verdict))).where(col(ReviewItem.sample_id) == sample.id)
    ).one()
    return Progress(int(reviewed), int(total))


@dataclass
class PeriodSummary:
    period: str
    start: dt.date
    end: dt.date
    complete: bool
    candidates: int
    sample: ReviewSample | None
    progress: Progress | None


def list_periods(*, session: Session, spec: EvalSpec, today: dt.date) -> list[PeriodSummary]:
    """List the periods with sent drafts or a drawn sample, newest first."""
    cadence = spec.review.cadence
    counts: dict[str, int] = {}
    for day, n in metrics_daily.sent_drafts_by_day(session=session).items():
        counts[period_of(day, cadence)] = counts.get(period_of(day, cadence), 0) + int(n)
    samples = {s.period: s for s in session.execute(select(ReviewSample)).scalars()}
    out = []
    for period in sorted(set(counts) | set(samples), reverse=True):
        start, end, _ = period_bounds(period)
        sample = samples.get(period)
        out.append(
            PeriodSummary(
                period, start, end, end < today, counts.get(period, 0), sample,
                progress(session=session, sample=sample) if sample else None,
            )
        )
    return out


def record_verdict(
    *, session: Session, item_id: int, verdict: str, notes: str, reviewer: int | None
) -> ReviewItem:
    """Record (or change) the verdict and notes on one pair."""
    if verdict not in VERDICTS:
        raise ReviewError(f"verdict: must be one of {', '.join(VERDICTS)}, not {verdict!r}")
    item = session.get(ReviewItem, item_id)
    if item is None:
        raise ReviewError(f"item: no review item {item_id}")
    item.verdict = verdict
    item.notes = notes.strip()
    item.reviewed_by = reviewer
    item.reviewed_at = utcnow()
    session.add(item)
    session.flush()
    return item


def add_to_regression(
    *, session: Session, item_id: int, created_by: int, input_text: str, reference_text: str, note: str = ""
) -> str:
    """Add a reviewed pair to the regression suite with the reviewer's reference text; return the case id.

    The form offers the sent text as the reference, but the reviewer edits it: the sent text may be
    the very reply that was wrong (a fabricated refund the agent did not catch), and a regression
    case must hold the reply that should have been sent.
    """
    item = session.get(ReviewItem, item_id)
    if item is None:
        raise ReviewError(f"item: no review item {item_id}")
    if item.regression_case_id:
        return item.regression_case_id
    if not input_text.strip():
        raise ReviewError("input: the customer's message is needed for a regression case")
    if not reference_text.strip():
        raise ReviewError("reference: the reference response (the reply that should be sent) is needed for a regression case")
    event = session.execute(select(Event).where(col(Event.event_id) == item.event_id)).scalars().one()
    case_id = f"review-{item.event_id}"[:200]
    try:
        regression_service.add_case(
            session=session,
            created_by=created_by,
            source="review",
            case_id=case_id,
            input=input_text.strip(),
            note=note.strip() or f"From the draft-vs-sent review, ticket {event.ticket_id}",
            reference=reference_text.strip(),
            intent=event.intent,
            source_ref=event.event_id,
        )
    except ValueError as exc:  # the suite's own refusals (e.g. the case id is already in it)
        raise ReviewError(str(exc)) from exc
    item.regression_case_id = case_id
    session.add(item)
    session.flush()
    return case_id


@dataclass(frozen=True)
class Segment:
    op: str  # equal | delete | insert
    text: str


def word_diff(draft: str, sent: str) -> tuple[list[Segment], list[Segment]]:
    """Return the draft and the sent text as word segments marked equal, deleted or inserted."""
    a = re.findall(r"\S+|\s+", draft)
    b = re.findall(r"\S+|\s+", sent)
    left: list[Segment] = []
    right: list[Segment] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            left.append(Segment("equal", "".join(a[i1:i2])))
            right.append(Segment("equal", "".join(b[j1:j2])))
            continue
        if i2 > i1:
            left.append(Segment("delete", "".join(a[i1:i2])))
        if j2 > j1:
            right.append(Segment("insert", "".join(b[j1:j2])))
    return left, right
