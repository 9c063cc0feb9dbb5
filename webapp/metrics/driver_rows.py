"""Reads and locks of the aggregates below SQLAlchemy's row objects: a select's rows straight from the
driver's cursor (a million events load in seconds), pandas' typed columns, the per-day advisory locks."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pandas as pd
from sqlalchemy import text
from sqlalchemy.sql import Executable
from sqlmodel import Session

# First key of the per-day advisory locks (the second is the day's ordinal): on PostgreSQL the
# rebuilds of one day are serialized, so a rebuild that started later (and read more events)
# writes last, while rebuilds of different days proceed in parallel. Ingestion takes no lock.
PG_AGGREGATE_LOCK_KEY = 7_305_501


def fetch_rows(session: Session, stmt: Executable) -> Sequence[Sequence[object]]:
    """Run a select and return its rows as the driver hands them (tuples)."""
    # SQLAlchemy binds the parameters (each column type's own bind processing: a datetime filter
    # matches SQLite's stored text); the rows are read from the driver's cursor, skipping
    # SQLAlchemy's per-row objects: a million rows load in seconds, not a minute.
    result = session.connection().execute(stmt)
    try:
        return result.cursor.fetchall() if result.cursor is not None else []
    finally:
        result.close()


def floats(column: object) -> pd.Series:
    """Return a column as floats, missing values (None) as NaN."""
    if not isinstance(column, pd.Series):  # a frame's column by name; the stubs also allow a frame
        raise TypeError(f"expected a column, got {type(column).__name__}")
    return pd.Series(pd.to_numeric(column, errors="coerce"), index=column.index, dtype=float)


def frame_of(value: object) -> pd.DataFrame:
    """Return a groupby result known to be a frame (the stubs allow a scalar or a Series too)."""
    if not isinstance(value, pd.DataFrame):
        raise TypeError(f"expected a frame, got {type(value).__name__}")
    return value


def lock_days(session: Session, days: Sequence[dt.date]) -> None:
    """Take the transaction-scoped lock of each day on PostgreSQL (SQLite has one writer at a time anyway).

    Locks are taken in day order, so two rebuilds sharing days cannot deadlock; rebuilds of
    different days do not wait for each other.
    """
    if session.get_bind().dialect.name != "postgresql" or not days:
        return
    ordinals = sorted({d.toordinal() for d in days})
    # unnest keeps the array order, so the locks are taken in ascending day order
    session.execute(
        text("SELECT count(pg_advisory_xact_lock(:k, d)) FROM unnest(CAST(:days AS integer[])) AS d"),
        {"k": PG_AGGREGATE_LOCK_KEY, "days": ordinals},
    )


