"""Stored figures: a heavy figure computed by a reaction when its inputs change, kept with what it was computed from.

One row per (kind, key), e.g. ("ppi_run", "12") or ("ppi_week", "2026-W47"): the result (a typed
value serialised with pydantic, JSON), the fingerprint of the inputs it read (counts and the
newest ids and times of its rows: cheap aggregate queries, webapp/ppi/stored_figures.py) and when.
A page reads the row and the inputs' fingerprint now; when they differ the figure is shown as it
was with an "updating" mark, and with no row at all the page says "computing…" (docs/decisions/
0012-stored-figures.md). Which domain computes which kind is the domain's business; this module
only keeps the rows (core imports no domain).

Who refreshes: the reactions to the facts that change the inputs (in the jobs loop of `serve`),
and the jobs loop's sweep of stale figures (inputs changed without a fact: rows from before the
table, a changed plan file). A process with no jobs loop (tests' apps, `serve --no-background`,
the CLI) has nobody to refresh a figure later, so its reads compute a stale figure there and then,
as its requests run their facts' reactions right after their commit (`refresh_on_read`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import TypeAdapter
from sqlalchemy import JSON, Column, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Field, Session, SQLModel

from webapp.core.db import is_sqlite, table_of
from webapp.core.timeutil import aware_datetime_type, utcnow

T = TypeVar("T")
# current: computed from the inputs as they are; updating: the inputs changed since (the figure shown is
# the one computed before); computing: nothing stored yet (the reaction has not run).
FigureState = Literal["current", "updating", "computing"]


class StoredFigure(SQLModel, table=True):
    """One computed figure, the fingerprint of the inputs it was computed from, and when."""

    __tablename__: ClassVar[str] = "stored_figure"

    kind: str = Field(primary_key=True, max_length=40)
    key: str = Field(primary_key=True, max_length=100)
    fingerprint: str = Field(max_length=200)
    computed_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    result: Any = Field(default=None, sa_column=Column(JSON, nullable=True))


@dataclass(frozen=True)
class FigureRead(Generic[T]):
    """A figure as a page reads it: the value (None while computing) and whether it is current."""

    value: T | None
    state: FigureState
    computed_at: dt.datetime | None = None

    @property
    def updating(self) -> bool:
        """Tell whether the figure shown is older than its inputs (or not there yet)."""
        return self.state != "current"


# Whether a read computes a stale or missing figure itself: yes, unless a jobs loop runs in this
# process (it sets this off while it runs, like facts.set_waker), which refreshes it after the commit.
_refresh_on_read: list[bool] = [True]


def set_refresh_on_read(on: bool) -> None:
    """Say whether reads compute stale figures themselves (True: no jobs loop in this process)."""
    _refresh_on_read[0] = on


def refresh_on_read() -> bool:
    """Tell whether reads of this process compute a stale figure themselves (no jobs loop refreshes it)."""
    return _refresh_on_read[0]


def stored(session: Session, kind: str, key: str) -> StoredFigure | None:
    """Return the stored figure's row (plain columns, detached from the session), or None."""
    t = table_of(StoredFigure)
    row = session.execute(
        select(t.c.kind, t.c.key, t.c.fingerprint, t.c.computed_at, t.c.result).where(t.c.kind == kind, t.c.key == key)
    ).first()
    if row is None:
        return None
    return StoredFigure(kind=row[0], key=row[1], fingerprint=row[2], computed_at=row[3], result=row[4])


def store(session: Session, kind: str, key: str, fingerprint: str, result: object, adapter: TypeAdapter[Any]) -> None:
    """Insert or replace the figure (serialised through `adapter`) in the session's transaction."""
    t = table_of(StoredFigure)
    values = {"kind": kind, "key": key, "fingerprint": fingerprint, "computed_at": utcnow(),
              "result": adapter.dump_python(result, mode="json")}
    insert = sqlite_insert if is_sqlite(session) else pg_insert
    stmt = insert(t).values(**values)
    session.execute(stmt.on_conflict_do_update(index_elements=[t.c.kind, t.c.key], set_={k: v for k, v in values.items() if k not in ("kind", "key")}))


def read(session: Session, kind: str, key: str, fingerprint: str, adapter: TypeAdapter[T]) -> FigureRead[T]:
    """Return the stored figure and whether it was computed from the inputs as they are (`fingerprint`: theirs now)."""
    row = stored(session, kind, key)
    if row is None:
        return FigureRead(None, "computing")
    value = adapter.validate_python(row.result)
    return FigureRead(value, "current" if row.fingerprint == fingerprint else "updating", row.computed_at)


def keys(session: Session, kind: str) -> list[str]:
    """Return the keys stored of one kind."""
    t = table_of(StoredFigure)
    return [str(k) for k in session.execute(select(t.c.key).where(t.c.kind == kind).order_by(t.c.key)).scalars()]
