"""Batch ingestion (POST /api/v1/events and its service call): validate, insert idempotently, mark days stale.

Events outside the sane window (before 2000, more than a day ahead) or dated before the retention
watermark are refused per event, as invalid with the field `occurred_at` (event_input.EventWindow).

A batch sent as JSON (`ingest_body`) is validated in one call of pydantic's compiled validator on
the raw bytes (`TypeAdapter(list[EventIn]).validate_json`: parsing and validation in one pass, no
Python objects for the JSON). Only a batch that fails it takes the slow path, which parses the
body (depth-limited), finds a syntax error's event, and validates event by event to name every
invalid one; the valid events of such a batch are stored all the same, as the API documents.

Storing (`store_rows`) is all-or-nothing within the request's transaction: on PostgreSQL the rows
go through binary `COPY` (rows formatted by psycopg in C) into a per-connection temporary table,
then one statement inserts them with `ON CONFLICT (event_id) DO NOTHING` and, for the events it
created, inserts the stale-day marks (a data-modifying WITH), returning the created ids.
"""

from __future__ import annotations

import datetime as dt
import functools
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, LiteralString, NotRequired, TypedDict, cast

import sqlalchemy as sa
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session

from webapp.core.db import table_of
from webapp.core.safe_input import InputLimitError, loads_json
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow
from webapp.metrics.event_input import (
    DAY_POS,
    EVENT_COLUMNS,
    MAX_BATCH,
    EventIn,
    EventRow,
    EventWindow,
    FieldError,
    event_row,
    validation_errors,
)
from webapp.metrics.models import Event, StaleDay
from webapp.metrics.watermark import pruned_before

if TYPE_CHECKING:  # psycopg is imported where PostgreSQL is used
    import psycopg
    from psycopg.rows import TupleRow

# One compiled validator for a whole batch sent as JSON bytes.
_BATCH = TypeAdapter(list[EventIn])
_ID = EVENT_COLUMNS.index("event_id")
Status = Literal["created", "duplicate", "invalid"]


class BatchError(ValueError):
    """A batch refused as a whole (nothing stored): the HTTP status, the field and the message."""

    def __init__(self, status: int, field: str, message: str) -> None:
        super().__init__(message)
        self.status, self.field, self.message = status, field, message


class FieldErrorJson(TypedDict):
    field: str
    reason: str


class EventResultJson(TypedDict):
    """One event's result as the API answers it (schemas.EventResult; written by hand, see answer_json)."""

    index: int
    event_id: str | None
    status: Status
    field: NotRequired[str]
    reason: NotRequired[str]
    errors: NotRequired[list[FieldErrorJson]]


@dataclass(slots=True)
class ItemResult:
    index: int
    event_id: str | None
    status: Status
    errors: list[FieldError] = field(default_factory=list)

    def as_dict(self) -> EventResultJson:
        out: EventResultJson = {"index": self.index, "event_id": self.event_id, "status": self.status}
        if self.errors:
            out["field"] = self.errors[0].field
            out["reason"] = self.errors[0].reason
            out["errors"] = [{"field": e.field, "reason": e.reason} for e in self.errors]
        return out


def answer_json(results: Sequence[ItemResult]) -> bytes:
    """Return the API's answer for a batch: one result per event, in order, and the counts."""
    counts = {"created": 0, "duplicate": 0, "invalid": 0}
    for r in results:
        counts[r.status] += 1
    return json.dumps({"results": [r.as_dict() for r in results], **counts}, separators=(",", ":")).encode()


def ingest_body(*, session: Session, spec: EvalSpec, body: bytes) -> list[ItemResult]:
    """Validate and store a batch sent as a JSON array; raise BatchError when the body is not one (nothing stored)."""
    try:
        events = _BATCH.validate_json(body)
    except ValidationError:
        return ingest_events(session=session, spec=spec, items=parse_batch(body))
    if len(events) > MAX_BATCH:
        raise BatchError(413, "(body)", f"at most {MAX_BATCH} events per batch, got {len(events)}")
    results: list[ItemResult | None] = [None] * len(events)
    return _store(session, spec, enumerate(events), results)


def parse_batch(body: bytes) -> list[object]:
    """Parse a body that failed validation as a whole: a JSON array of at most MAX_BATCH items, or BatchError."""
    try:
        items = loads_json(body, strict=False)  # each event's fields are judged per event
    except InputLimitError as exc:
        raise BatchError(422, "(body)", f"JSON {exc.message}") from exc
    except UnicodeDecodeError as exc:
        raise BatchError(422, "(body)", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        index = _event_at(exc.doc, exc.pos)
        where = f"line {exc.lineno}, column {exc.colno}"
        if index is None:
            raise BatchError(422, "(body)", f"not valid JSON: {exc.msg} ({where})") from exc
        raise BatchError(422, str(index), f"event {index} is not valid JSON: {exc.msg} ({where})") from exc
    if not isinstance(items, list):
        raise BatchError(422, "(body)", "expected a JSON array of events")
    if len(items) > MAX_BATCH:
        raise BatchError(413, "(body)", f"at most {MAX_BATCH} events per batch, got {len(items)}")
    return items


def _event_at(doc: str, pos: int) -> int | None:
    """Return the index of the array element in which a JSON syntax error at `pos` lies (None: not inside one)."""
    decoder = json.JSONDecoder()
    i = _skip_space(doc, 0)
    if not doc.startswith("[", i):
        return None
    index, i = 0, i + 1
    while True:
        i = _skip_space(doc, i)
        if i >= pos:
            return index
        try:
            _, i = decoder.raw_decode(doc, i)
        except (json.JSONDecodeError, RecursionError):
            return index
        i = _skip_space(doc, i)
        if i >= pos:  # a missing comma or bracket after this element: the next one is broken
            return index + 1
        if not doc.startswith(",", i):
            return None
        index, i = index + 1, i + 1


def _skip_space(doc: str, i: int) -> int:
    while i < len(doc) and doc[i] in " \t\n\r":
        i += 1
    return i


def ingest_events(*, session: Session, spec: EvalSpec, items: Sequence[object]) -> list[ItemResult]:
    """Validate and store a batch; valid events are kept even when others are invalid; retries create nothing twice."""
    if len(items) > MAX_BATCH:
        raise ValueError(f"a batch holds at most {MAX_BATCH} events, not {len(items)}")
    results: list[ItemResult | None] = [None] * len(items)
    valid: list[tuple[int, EventIn]] = []
    for i, item in enumerate(items):
        try:
            valid.append((i, EventIn.model_validate(item)))
        except ValidationError as exc:
            raw_id = item.get("event_id") if isinstance(item, dict) else None
            results[i] = ItemResult(i, raw_id if isinstance(raw_id, str) else None, "invalid", validation_errors(exc))
    return _store(session, spec, valid, results)


def _store(
    session: Session, spec: EvalSpec, events: Iterable[tuple[int, EventIn]], results: list[ItemResult | None]
) -> list[ItemResult]:
    """Build the rows of the valid events, store them, and fill in each one's result (created, duplicate, invalid).

    An event outside the sane window or before the retention watermark is invalid (field `occurred_at`).
    """
    tz = spec.tz
    received = utcnow()
    window = EventWindow(now=received, tz=tz, pruned_before=pruned_before(session))
    rows: list[EventRow] = []
    seen: set[str] = set()
    for i, ev in events:
        v = ev.__dict__  # the validated fields, without 21 attribute look-ups per event
        event_id = v["event_id"]
        refused = window.error(v["occurred_at"])
        if refused is not None:
            results[i] = ItemResult(i, event_id, "invalid", [refused])
            continue
        if event_id in seen:
            results[i] = ItemResult(i, event_id, "duplicate")
            continue
        seen.add(event_id)
        rows.append(event_row(v, tz, received))
        results[i] = ItemResult(i, event_id, "created")
    created = store_rows(session, rows)
    if len(created) < len(rows):
        for r in results:
            if r is not None and r.status == "created" and r.event_id not in created:
                r.status = "duplicate"
    return [r for r in results if r is not None]


# --- the event store's writes --------------------------------------------------------------------

# Per-connection staging table of the API's batches (emptied at every commit; the import uses its own).
_STAGE = "metric_event_batch"
# PostgreSQL type of each column type, for binary COPY (text and varchar share a binary format)
_COPY_TYPES: tuple[tuple[type, str], ...] = (
    (sa.Boolean, "bool"), (sa.Float, "float8"), (sa.DateTime, "timestamptz"), (sa.Date, "date"), (sa.String, "text"),
)  # fmt: skip


def _copy_type(column: sa.Column[object]) -> str:
    kind = column.type
    if isinstance(kind, sa.TypeDecorator):  # e.g. SQLModel's AutoString: what it stores as
        kind = kind.impl_instance
    for sa_type, name in _COPY_TYPES:
        if isinstance(kind, sa_type):
            return name
    raise TypeError(f"{column.name}: no COPY type for {kind!r}")


@functools.cache
def _event_copy_types() -> tuple[str, ...]:
    columns = table_of(Event).c
    return tuple(_copy_type(columns[c]) for c in EVENT_COLUMNS)


def encode_event_rows(conn: psycopg.Connection[TupleRow], rows: Iterable[EventRow]) -> bytes:
    """Return event rows (EVENT_COLUMNS order) as the data of a binary `COPY`, sent nowhere yet.

    Binary with the column types set, so psycopg formats each row in C without looking up a dumper
    per value (about 1.5 microseconds a row against 6 for text COPY, measured on 100,000 events).
    psycopg's public FileWriter formats without a COPY running (the connection only lends its
    type adapters); copy_event_data then sends the bytes.
    """
    from psycopg.copy import Copy, FileWriter

    buffer = io.BytesIO()
    with Copy(conn.cursor(), binary=True, writer=FileWriter(buffer)) as copy:
        copy.set_types(list(_event_copy_types()))
        write = copy.write_row
        for row in rows:
            write(row)
    return buffer.getvalue()


def copy_event_data(cur: psycopg.Cursor[TupleRow], table: str, data: bytes) -> None:
    """Send event rows encoded by encode_event_rows to `table`: the one way they reach PostgreSQL
    (the API's batches through store_rows, the file import through bulkload.Loader)."""
    # the table and columns are this module's names, never input
    statement = cast("LiteralString", f"COPY {table} ({', '.join(EVENT_COLUMNS)}) FROM STDIN (FORMAT BINARY)")
    with cur.copy(statement) as copy:
        copy.write(data)


def store_rows(session: Session, rows: Sequence[EventRow]) -> set[str]:
    """Insert event rows (EVENT_COLUMNS order), skipping stored event_ids, and mark the created events' days stale.

    Return the ids this call created. Both writes are in the session's transaction: the marks
    commit with their events (see stale.py for why readers then always see exact figures).
    """
    if not rows:
        return set()
    conn = session.connection()
    if conn.dialect.name != "postgresql":
        return _store_sqlite(session, rows)
    raw = conn.connection.driver_connection
    if raw is None:
        raise RuntimeError("the database connection is closed")
    table = table_of(Event)
    cols = ", ".join(EVENT_COLUMNS)
    with raw.cursor() as cur:
        # created once per connection; ON COMMIT DELETE ROWS empties it at the end of each transaction
        cur.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE} ON COMMIT DELETE ROWS AS "
            f"SELECT {cols} FROM {table.name} WITH NO DATA"
        )
        copy_event_data(cur, _STAGE, encode_event_rows(raw, rows))
        # moved out of the staging table (DELETE ... RETURNING), so a second batch in the same
        # transaction starts from an empty table
        cur.execute(
            f"WITH staged AS (DELETE FROM {_STAGE} RETURNING {cols}), "
            f"created AS (INSERT INTO {table.name} ({cols}) SELECT {cols} FROM staged "
            "ON CONFLICT (event_id) DO NOTHING RETURNING event_id, day), "
            f"marked AS (INSERT INTO {table_of(StaleDay).name} (day) SELECT DISTINCT day FROM created) "
            "SELECT event_id FROM created"
        )
        return {r[0] for r in cur.fetchall()}


def _store_sqlite(session: Session, rows: Sequence[EventRow]) -> set[str]:
    table = table_of(Event)
    params = [dict(zip(EVENT_COLUMNS, r, strict=True)) for r in rows]
    for p in params:
        p["occurred_at"] = cast(dt.datetime, p["occurred_at"]).astimezone(dt.UTC)
    stmt = sqlite_insert(table).on_conflict_do_nothing(index_elements=["event_id"]).returning(table.c.event_id)
    created = {r[0] for r in session.execute(stmt, params)}
    days = sorted({cast(dt.date, r[DAY_POS]) for r in rows if r[_ID] in created})
    if days:
        session.execute(table_of(StaleDay).insert(), [{"day": d} for d in days])
    return created
