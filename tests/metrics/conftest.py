"""Factories for production events in metrics tests."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

from sqlmodel import Session

from webapp.core.spec import EvalSpec
from webapp.metrics import ingest, stale

_ids = itertools.count(1)


def ev(day: dt.date | str, hour: int = 12, *, tz: str = "+00:00", **fields: Any) -> dict[str, Any]:
    """Return a valid event dict on a day (noon UTC by default); fields override the defaults."""
    d = dt.date.fromisoformat(day) if isinstance(day, str) else day
    n = next(_ids)
    base: dict[str, Any] = {
        "event_id": f"e{n}",
        "ticket_id": f"t{n}",
        "occurred_at": f"{d.isoformat()}T{hour:02d}:00:00{tz}",
        "intent": "billing_charge",
        "draft_shown": True,
        "action": "accept",
        "draft_text": "Hello",
        "sent_text": "Hello",
        "escalated": False,
    }
    base.update(fields)
    return base


def load(session: Session, spec: EvalSpec, events: list[dict[str, Any]], *, rebuild: bool = True) -> list[ingest.ItemResult]:
    """Ingest events through the service, rebuild their days (as the API does without background jobs) and commit.

    rebuild=False leaves the days stale, as under `serve` until its rebuilder's next pass.
    """
    out = ingest.ingest_events(session=session, spec=spec, items=events)
    if rebuild:
        settle(session, spec)
    session.commit()
    return out


def settle(session: Session, spec: EvalSpec) -> None:
    """Rebuild every stale day, as serve's rebuilder does (alerts are left to the test)."""
    while stale.rebuild_stale(session=session, spec=spec):
        pass
