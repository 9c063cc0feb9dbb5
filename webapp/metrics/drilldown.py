"""Drill-down into one day: its events draft by draft, filtered by segment and kind (rejects, edits, escalations)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlmodel import Session, col

from webapp.core.db import table_of
from webapp.core.timeutil import as_utc
from webapp.metrics.daily import MetricsError, segment_filter
from webapp.metrics.models import Event, RetentionWatermark
from webapp.metrics.watermark import WATERMARK_ID

DAY_KINDS: dict[str, str] = {"reject": "Rejects", "edit": "Edits", "escalation": "Escalations"}


def _kind_clause(kind: str) -> Any:
    """Return the SQL condition of a drill-down filter (the same events the day's rates count)."""
    if kind == "reject":
        return (col(Event.draft_shown).is_(True)) & (Event.action == "reject")
    if kind == "edit":
        return (col(Event.draft_shown).is_(True)) & (Event.action == "edit")
    if kind == "escalation":
        return col(Event.escalated).is_(True)
    raise MetricsError(f"show: must be one of {', '.join(DAY_KINDS)} (or empty for every event), not {kind!r}")


def day_events(
    *,
    session: Session,
    day: dt.date,
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
    kind: str | None = None,
    limit: int = 200,
    offset: int = 0,
) -> tuple[list[Event], int]:
    """Return one page of a day's events (draft by draft) for the segment and kind, and how many there are."""
    stmt = select(Event).where(col(Event.day) == day)
    count = select(func.count()).select_from(Event).where(col(Event.day) == day)
    for dim, value in segment_filter(intent, plan, agent_id).items():
        if value is not None:
            stmt = stmt.where(getattr(Event, dim) == value)
            count = count.where(getattr(Event, dim) == value)
    if kind:
        stmt = stmt.where(_kind_clause(kind))
        count = count.where(_kind_clause(kind))
    rows = session.execute(stmt.order_by(col(Event.occurred_at), col(Event.id)).limit(limit).offset(offset)).scalars()
    return list(rows), int(session.execute(count).scalar_one())


def day_kind_counts(
    *, session: Session, day: dt.date, intent: str | None = None, plan: str | None = None, agent_id: str | None = None
) -> dict[str, int]:
    """Return how many of a day's events (for the segment) are rejects, edits and escalations."""
    out: dict[str, int] = {}
    for kind in DAY_KINDS:
        stmt = select(func.count()).select_from(Event).where(col(Event.day) == day, _kind_clause(kind))
        for dim, value in segment_filter(intent, plan, agent_id).items():
            if value is not None:
                stmt = stmt.where(getattr(Event, dim) == value)
        out[kind] = int(session.execute(stmt).scalar_one())
    return out


@dataclass(frozen=True)
class PrunedDay:
    """Why a day's drill-down lists no events: retention removed them; its figures are the ones kept (issue 41)."""

    pruned_before: dt.date  # the retention watermark: every day before it lost its events
    removed_by: dt.date  # the (UTC) date of the prune that last moved the watermark: the events were gone by then


def pruned_day(*, session: Session, day: dt.date) -> PrunedDay | None:
    """Return how retention removed a day's events, when the day is before the watermark; None for a day that keeps them."""
    t = table_of(RetentionWatermark).c
    row = session.execute(select(t.pruned_before, t.updated_at).where(t.id == WATERMARK_ID)).first()
    if row is None:
        return None
    floor = row[0] if isinstance(row[0], dt.date) else dt.date.fromisoformat(row[0])
    if day >= floor:
        return None
    updated = row[1] if isinstance(row[1], dt.datetime) else dt.datetime.fromisoformat(str(row[1]))
    return PrunedDay(pruned_before=floor, removed_by=as_utc(updated).date())
