"""Time helpers: everything is stored as timezone-aware UTC."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import DateTime


def utcnow() -> dt.datetime:
    """Return the current time, aware, in UTC."""
    return dt.datetime.now(dt.UTC)


def as_utc(value: dt.datetime) -> dt.datetime:
    """Return an aware UTC datetime; naive values (SQLite returns them) are taken as UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def aware_datetime_type() -> DateTime:
    """Column type for every timestamp: timezone-aware on PostgreSQL (SQLite stores ISO text)."""
    from sqlalchemy import DateTime

    return DateTime(timezone=True)
