"""Bulk load of an events file: batch validation, one transaction, each engine's fastest insert path.

Validation is pydantic's compiled validator of the API's own model (`EventIn.model_validate_json`
per JSON line, `TypeAdapter(list[EventIn])` per CSV batch), so the API and the import refuse the
same records, and the same window (`EventWindow`: before 2000, more than a day ahead, or before the
retention watermark); every bad record is named as `FILE:LINE: field: reason`. Rows go to SQLite
through a prepared executemany, to PostgreSQL through psycopg's `cursor.copy()` (`COPY ... FROM
STDIN`), straight into metric_event until a batch meets a stored event_id, then into a temporary
staging table followed by `INSERT ... SELECT ... ON CONFLICT (event_id) DO NOTHING`.
Only the columns the daily aggregates need are kept in memory (not the texts), as one small
DataFrame per batch.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import gc
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pandas as pd
from psycopg.errors import UniqueViolation
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

from webapp.core.db import table_of
from webapp.metrics.aggregates import RAW_COLUMNS
from webapp.metrics.event_input import (
    DAY_POS,
    EDIT_DISTANCE_POS,
    EVENT_COLUMNS,
    OCCURRED_POS,
    EventIn,
    EventRow,
    EventWindow,
    event_row,
    validation_errors,
)
from webapp.metrics.ingest import copy_event_data, encode_event_rows
from webapp.metrics.models import Event

CHUNK = 10_000
_EVENTS = TypeAdapter(list[EventIn])
_CSV_NULLS = {""}
_AGG_FIELDS = [c for c in RAW_COLUMNS if c not in ("day", "has_sent", "edit_distance")]
# SQLite page cache for the import (KiB, negative = size): the day indexes stay in memory while
# rows arrive in file order, yet the process stays well under 1 GiB.
SQLITE_IMPORT_CACHE_KIB = 131_072
# Python's cycle collector thresholds during an import (see rare_collections)
IMPORT_GC_THRESHOLDS = (100_000, 50, 100)


@dataclass
class Chunk:
    """One validated batch: insert rows, aggregation columns, ids and errors."""

    rows: list[EventRow] = field(default_factory=list)
    frame: pd.DataFrame | None = None
    errors: list[str] = field(default_factory=list)
    records: int = 0
    ids: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)


@contextlib.contextmanager
def rare_collections() -> Iterator[None]:
    """Run the block with Python's cycle collector working rarely (a bulk import creates millions of objects).

    With the default thresholds, the collector walks every live object (the validated events, the
    id set, the frames) again and again as they pile up: 27% of the validation time of 400,000
    events, measured. The import's objects form no cycles, so the young generation is collected
    100 times less often and the older ones practically never until the block ends.
    """
    before = gc.get_threshold()
    gc.set_threshold(*IMPORT_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


class EventsFileError(ValueError):
    """A file that cannot be read as records at all (bad UTF-8, a CSV field over the limit): 'FILE:LINE: why'."""


# A file's record before validation: a JSON line's bytes, or a CSV row by column name.
RawRecord = bytes | dict[str, str | None]


def read_records(path: Path, chunk: int | None = None) -> Iterator[list[tuple[int, RawRecord]]]:
    """Yield lists of (line number, raw record) from a JSONL (bytes per line) or CSV (dict per row) file.

    Raise EventsFileError naming the line when the file cannot be read (invalid UTF-8, a CSV field
    over csv's field size limit) instead of letting the reader's exception escape as a traceback.
    """
    chunk = chunk or CHUNK  # read when called, so a test can make batches small
    batch: list[tuple[int, RawRecord]] = []
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            try:
                for row in reader:
                    batch.append((reader.line_num, {k: (None if v in _CSV_NULLS else v) for k, v in row.items() if k is not None}))
                    if len(batch) >= chunk:
                        yield batch
                        batch = []
            except (csv.Error, UnicodeDecodeError) as exc:
                reason = exc.reason if isinstance(exc, UnicodeDecodeError) else str(exc)
                raise EventsFileError(f"{path}:{reader.line_num + 1}: (line): cannot be read: {reason}") from None
    else:
        with path.open("rb") as fh:
            for n, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        line.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise EventsFileError(
                            f"{path}:{n}: (line): not valid UTF-8 ({exc.reason} at byte {exc.start})"
                        ) from None
                    batch.append((n, line))
                    if len(batch) >= chunk:
                        yield batch
                        batch = []
    if batch:
        yield batch


def _validate(path: Path, records: list[tuple[int, RawRecord]]) -> tuple[list[EventIn], list[int], list[str]]:
    """Validate a batch with pydantic's compiled validator; name each bad line with its errors."""
    is_json = bool(records) and isinstance(records[0][1], bytes)
    if not is_json:
        try:  # CSV rows: the whole batch in one call
            return _EVENTS.validate_python([r for _, r in records]), [n for n, _ in records], []
        except ValidationError:
            pass  # again record by record, to name every bad line
    # JSON lines one call each: measured faster than one call on the batch joined into an array
    # (6-7 against 10-13 microseconds an event), and each error is already tied to its line
    events, lines, errors = [], [], []
    for line_no, raw in records:
        try:
            ev = EventIn.model_validate_json(raw) if isinstance(raw, bytes) else EventIn.model_validate(raw)
        except ValidationError as exc:
            for fe in validation_errors(exc):
                if fe.reason.startswith("Invalid JSON"):
                    errors.append(f"{path}:{line_no}: (line): not a JSON object: {fe.reason}")
                else:
                    errors.append(f"{path}:{line_no}: {fe.field}: {fe.reason}")
        else:
            events.append(ev)
            lines.append(line_no)
    return events, lines, errors


class Validator:
    """Turn raw record batches into insert rows and aggregation columns (no state: batches may run anywhere)."""

    def __init__(
        self, path: Path, *, tz: dt.tzinfo, received_at: dt.datetime, pruned_before: dt.date | None = None
    ) -> None:
        self.path = path
        self.tz = tz
        self.received = received_at
        self.window = EventWindow(now=received_at, tz=tz, pruned_before=pruned_before)

    def chunk(self, records: list[tuple[int, RawRecord]], *, keep_rows: bool = True) -> Chunk:
        """Validate one batch; rows and aggregation columns are built only when it and the file so far are clean."""
        events, lines, errors = _validate(self.path, records)
        values = [ev.__dict__ for ev in events]  # the validated fields, without attribute look-ups
        errors = self._window_errors(values, lines, errors)
        out = Chunk(errors=errors, records=len(records), lines=lines)
        out.ids = [v["event_id"] for v in values]
        if errors or not keep_rows:
            return out
        tz, received = self.tz, self.received
        rows = out.rows = [event_row(v, tz, received) for v in values]
        frame = pd.DataFrame({c: [v[c] for v in values] for c in _AGG_FIELDS})
        frame["day"] = [r[DAY_POS] for r in rows]
        frame["edit_distance"] = [r[EDIT_DISTANCE_POS] for r in rows]
        frame["has_sent"] = [v["sent_text"] is not None for v in values]
        out.frame = frame.reindex(columns=list(RAW_COLUMNS))
        return out

    def _window_errors(self, values: Sequence[Mapping[str, object]], lines: list[int], errors: list[str]) -> list[str]:
        """Add an error for each event outside the window to the batch's errors, keeping them in line order."""
        check = self.window.error
        refused = []
        for v, line_no in zip(values, lines, strict=True):
            fe = check(cast(dt.datetime, v["occurred_at"]))
            if fe is not None:
                refused.append(f"{self.path}:{line_no}: {fe.field}: {fe.reason}")
        if not refused:
            return errors
        prefix = len(str(self.path)) + 1
        return sorted([*errors, *refused], key=lambda e: int(e[prefix:].split(":", 1)[0]))


class FirstLines:
    """The line on which each event_id first appeared in the file: a repeat is a bad record."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.first: dict[str, int] = {}

    def check(self, chunk: Chunk) -> None:
        """Add a 'repeats line N' error to the chunk for each id seen before (errors kept in line order)."""
        first, repeats = self.first, []
        for event_id, line_no in zip(chunk.ids, chunk.lines, strict=True):
            seen = first.setdefault(event_id, line_no)
            if seen != line_no:
                repeats.append(f"{self.path}:{line_no}: event_id: {event_id!r} repeats line {seen}")
        if repeats:
            prefix = len(str(self.path)) + 1
            chunk.errors = sorted([*chunk.errors, *repeats], key=lambda e: int(e[prefix:].split(":", 1)[0]))


_ID_POS = EVENT_COLUMNS.index("event_id")
_RECEIVED_POS = EVENT_COLUMNS.index("received_at")


def _day_then_id(row: EventRow) -> tuple[dt.date, str]:
    return cast(dt.date, row[DAY_POS]), cast(str, row[_ID_POS])


class Loader:
    """Insert row batches into metric_event inside the session's transaction."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.conn = session.connection()
        self.dialect = self.conn.dialect.name
        self.table = table_of(Event).name
        cols = ", ".join(EVENT_COLUMNS)
        if self.dialect == "sqlite":
            self.conn.exec_driver_sql(f"PRAGMA cache_size = -{SQLITE_IMPORT_CACHE_KIB}")
            marks = ", ".join(["?"] * len(EVENT_COLUMNS))
            self.sql = f"INSERT INTO {self.table} ({cols}) VALUES ({marks}) ON CONFLICT (event_id) DO NOTHING"
            # SQLAlchemy's own SQLite converters (times as naive UTC text, days as ISO dates)
            c, d = table_of(Event).c, self.conn.dialect
            self.to_time = c.occurred_at.type.dialect_impl(d).bind_processor(d) or (lambda v: v)
            self.to_day = c.day.type.dialect_impl(d).bind_processor(d) or (lambda v: v)
            self.days: dict[dt.date, object] = {}  # a day as the SQLite converter binds it
        else:
            # a temporary table: not written to the WAL, gone at commit; no index to maintain. Its
            # buffers must hold one batch (the default 8 MB spills to disk); settable only before
            # the session's first temporary table, hence the savepoint
            try:
                with self.conn.begin_nested():
                    self.conn.exec_driver_sql("SET LOCAL temp_buffers = '64MB'")
            except DBAPIError:
                pass
            self.conn.exec_driver_sql(
                f"CREATE TEMP TABLE metric_event_stage ON COMMIT DROP AS SELECT {cols} FROM {self.table} WITH NO DATA"
            )
            self.move_sql = (
                f"INSERT INTO {self.table} ({cols}) SELECT {cols} FROM metric_event_stage "
                "ON CONFLICT (event_id) DO NOTHING"
            )
        # Batches are copied straight into metric_event (what a plain COPY costs the server) until
        # one meets an event_id that is already stored; that batch is rolled back to its savepoint
        # and it and all later ones go through the staging table and ON CONFLICT DO NOTHING.
        self.direct = True
        self.inserted = 0

    def _sqlite_rows(self, rows: list[EventRow]) -> list[EventRow]:
        """Bind times and days as SQLAlchemy stores them in SQLite, in day order (the day indexes fill page by page)."""
        rows.sort(key=_day_then_id)
        to_time, to_day, days = self.to_time, self.to_day, self.days
        received = to_time(cast(dt.datetime, rows[0][_RECEIVED_POS]).astimezone(dt.UTC))
        out = []
        for r in rows:
            day = cast(dt.date, r[DAY_POS])
            bound = days.get(day)
            if bound is None:
                bound = days[day] = to_day(day)
            out.append((*r[:OCCURRED_POS], to_time(cast(dt.datetime, r[OCCURRED_POS]).astimezone(dt.UTC)), bound, received))
        return out

    def write(self, chunk: Chunk) -> None:
        """Send one batch's rows to the database."""
        if not chunk.rows:
            return
        if self.dialect == "sqlite":
            result = self.conn.exec_driver_sql(self.sql, self._sqlite_rows(chunk.rows))
            self.inserted += int(result.rowcount)
            return
        raw = self.conn.connection.driver_connection
        if raw is None:
            raise RuntimeError("the database connection is closed")
        with raw.cursor() as cur:
            data = encode_event_rows(raw, chunk.rows)
            if self.direct:
                cur.execute("SAVEPOINT import_batch")
                try:
                    copy_event_data(cur, self.table, data)
                except UniqueViolation:  # an event_id already stored: this batch and the rest go the safe way
                    cur.execute("ROLLBACK TO SAVEPOINT import_batch")
                    self.direct = False
                else:
                    cur.execute("RELEASE SAVEPOINT import_batch")
                    self.inserted += len(chunk.ids)  # a COPY stores every row or fails
                    return
            copy_event_data(cur, "metric_event_stage", data)
            # batch by batch, so the server inserts batch k while Python validates batch k+1
            cur.execute(self.move_sql)
            self.inserted += int(cur.rowcount)
            cur.execute("TRUNCATE metric_event_stage")

    def finish(self) -> int:
        """Return how many events were new (rows whose event_id was already stored are skipped)."""
        if self.dialect == "sqlite":
            self.conn.exec_driver_sql("PRAGMA cache_size = -2000")  # back to SQLite's default
        return self.inserted
