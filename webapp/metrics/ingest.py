"""Event validation, idempotent bulk insertion, stale-day marks, and the per-day aggregates."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import Levenshtein
import pandas as pd
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from sqlalchemy import delete, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, col

from webapp.db import table_of
from webapp.metrics.models import ALL, NONE, DailyAggregate, Event, StaleDay
from webapp.spec import EvalSpec
from webapp.timeutil import utcnow

MAX_BATCH = 1000
CALIBRATION_BINS = 10
SEGMENT_DIMS: tuple[str, ...] = ("intent", "plan", "agent_id")
# The segments kept per day: everything, each single dimension, and intent x plan. Narrower
# combinations with an agent (one agent's events are few) are computed from the raw events.
ROLLUPS: tuple[tuple[str, ...], ...] = ((), ("intent",), ("plan",), ("agent_id",), ("intent", "plan"))
# First key of the per-day advisory locks (the second is the day's ordinal): on PostgreSQL the
# rebuilds of one day are serialized, so a rebuild that started later (and read more events)
# writes last, while rebuilds of different days proceed in parallel. Ingestion takes no lock.
PG_AGGREGATE_LOCK_KEY = 7_305_501


class EventIn(BaseModel):
    """One production event as the drafting tool reports it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, str_strip_whitespace=False)

    event_id: str = Field(min_length=1, max_length=200)
    ticket_id: str = Field(min_length=1, max_length=200)
    occurred_at: AwareDatetime
    intent: str | None = Field(default=None, max_length=100)
    plan: str | None = Field(default=None, max_length=100)
    agent_id: str | None = Field(default=None, max_length=100)
    model_version: str | None = Field(default=None, max_length=200)
    prompt_version: str | None = Field(default=None, max_length=200)
    draft_shown: bool
    action: Literal["accept", "edit", "reject", "escalate"] | None = None
    draft_text: str | None = None
    sent_text: str | None = None
    customer_message: str | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    latency_ms: float | None = Field(default=None, ge=0)
    handle_time_s: float | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    escalated: bool

    @field_validator("intent", "plan", "agent_id")
    @classmethod
    def _not_wildcard(cls, v: str | None) -> str | None:
        if v == ALL:
            raise ValueError(f"'{ALL}' is reserved (it means every value in filters)")
        return v

    @model_validator(mode="after")
    def _action_needs_shown_draft(self) -> EventIn:
        if self.action is not None and not self.draft_shown:
            raise ValueError("action: must be null when draft_shown is false (no draft to act on)")
        return self


@dataclass(frozen=True)
class FieldError:
    field: str
    reason: str


def validation_errors(exc: ValidationError) -> list[FieldError]:
    """Turn a pydantic error into (field, reason) pairs."""
    out = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"])
        msg = err["msg"]
        if not field and msg.startswith("Value error, ") and ":" in msg:
            # model-level rules name their field at the start of the message
            field, _, msg = msg[len("Value error, ") :].partition(": ")
        out.append(FieldError(field or "(event)", msg.removeprefix("Value error, ")))
    return out


def normalized_edit_distance(draft: str, sent: str) -> float:
    """Return Levenshtein distance / length of the longer text; 0 when both are empty."""
    longest = max(len(draft), len(sent))
    if longest == 0:
        return 0.0
    return Levenshtein.distance(draft, sent) / longest


def event_row(ev: EventIn, tz: dt.tzinfo, received_at: dt.datetime) -> dict[str, Any]:
    """Return the insert parameters of one validated event (day and edit distance computed here, once)."""
    ed = None
    if ev.draft_text is not None and ev.sent_text is not None:
        ed = normalized_edit_distance(ev.draft_text, ev.sent_text)
    row = dict(ev.__dict__)  # the validated fields, without 21 attribute look-ups per event
    row["occurred_at"] = ev.occurred_at.astimezone(dt.UTC)
    row["day"] = ev.occurred_at.astimezone(tz).date()
    row["edit_distance"] = ed
    row["received_at"] = received_at
    return row


def _insert_stmt(session: Session, table: Any) -> Any:
    dialect = session.get_bind().dialect.name
    builder = sqlite_insert if dialect == "sqlite" else pg_insert
    return builder(table)


def insert_rows(session: Session, rows: Sequence[dict[str, Any]], *, returning: bool) -> set[str] | int:
    """Insert events, skipping those whose event_id exists; return the created ids (or just their count)."""
    if not rows:
        return set() if returning else 0
    table = table_of(Event)
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        # one statement with one array per column: the driver neither expands nor parses a
        # thousand-row VALUES list (that parsing took most of a batch's time)
        cols = [c for c in EVENT_COLUMNS if c in rows[0]]
        arrays = ", ".join(f"CAST(%b AS {table.c[c].type.compile(conn.dialect)}[])" for c in cols)
        sql = (
            f"INSERT INTO {table.name} ({', '.join(cols)}) SELECT * FROM unnest({arrays}) "
            "ON CONFLICT (event_id) DO NOTHING"
        )
        params = tuple([r[c] for r in rows] for c in cols)
        # binary parameters: psycopg sends the arrays as they are in memory, where the text format
        # escaped every element with a regular expression (40% of a batch's CPU)
        raw = conn.connection.driver_connection
        if raw is None:
            raise RuntimeError("the database connection is closed")
        with raw.cursor() as cur:
            if returning:
                cur.execute(sql + " RETURNING event_id", params, binary=True)
                return {r[0] for r in cur.fetchall()}
            cur.execute(sql, params, binary=True)
            return int(cur.rowcount)
    stmt = _insert_stmt(session, table).on_conflict_do_nothing(index_elements=["event_id"])
    if returning:
        result = session.execute(stmt.returning(table.c.event_id), list(rows))
        return {r[0] for r in result}
    result = conn.execute(stmt, list(rows))
    return int(result.rowcount or 0)


_PLAIN_COLUMNS: tuple[str, ...] = (
    "event_id", "ticket_id", "intent", "plan", "agent_id", "model_version", "prompt_version", "draft_shown",
    "action", "draft_text", "sent_text", "customer_message", "confidence", "latency_ms", "handle_time_s",
    "cost_usd", "escalated", "edit_distance",
)  # fmt: skip
_TIME_COLUMNS: tuple[str, ...] = ("occurred_at", "day", "received_at")
EVENT_COLUMNS: tuple[str, ...] = _PLAIN_COLUMNS + _TIME_COLUMNS


@dataclass
class ItemResult:
    index: int
    event_id: str | None
    status: Literal["created", "duplicate", "invalid"]
    errors: list[FieldError]

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "event_id": self.event_id, "status": self.status}
        if self.errors:
            out["field"] = self.errors[0].field
            out["reason"] = self.errors[0].reason
            out["errors"] = [{"field": e.field, "reason": e.reason} for e in self.errors]
        return out


def ingest_events(*, session: Session, spec: EvalSpec, items: Sequence[Any]) -> list[ItemResult]:
    """Validate and store a batch; valid events are kept even when others are invalid; retries create nothing twice."""
    if len(items) > MAX_BATCH:
        raise ValueError(f"a batch holds at most {MAX_BATCH} events, not {len(items)}")
    results: list[ItemResult] = []
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    now = utcnow()
    tz = spec.tz
    for i, item in enumerate(items):
        raw_id = item.get("event_id") if isinstance(item, dict) else None
        try:
            ev = EventIn.model_validate(item)
        except ValidationError as exc:
            results.append(ItemResult(i, raw_id if isinstance(raw_id, str) else None, "invalid", validation_errors(exc)))
            continue
        if ev.event_id in seen:
            results.append(ItemResult(i, ev.event_id, "duplicate", []))
            continue
        seen.add(ev.event_id)
        rows.append(event_row(ev, tz, now))
        results.append(ItemResult(i, ev.event_id, "created", []))
    created = insert_rows(session, rows, returning=True)
    assert isinstance(created, set)
    for r in results:
        if r.status == "created" and r.event_id not in created:
            r.status = "duplicate"
    touched = {row["day"] for row in rows if row["event_id"] in created}
    mark_stale(session, touched)
    session.flush()
    return results


def mark_stale(session: Session, days: Iterable[dt.date]) -> None:
    """Mark days whose aggregates lag their events, in the transaction that inserted the events.

    The aggregates are rebuilt later, coalesced (stale.rebuild_stale); until then readers compute
    these days from the raw events. A mark is a new row, never an update, so batches for the same
    day do not wait for each other.
    """
    ordered = sorted(set(days))
    if ordered:
        session.execute(table_of(StaleDay).insert(), [{"day": d} for d in ordered])


# --- aggregates -----------------------------------------------------------------------------------

_RAW_COLUMNS = (
    "day",
    "intent",
    "plan",
    "agent_id",
    "model_version",
    "prompt_version",
    "draft_shown",
    "action",
    "has_sent",
    "edit_distance",
    "escalated",
    "handle_time_s",
    "latency_ms",
    "cost_usd",
    "confidence",
)


def raw_frame(
    session: Session,
    *,
    start: dt.date | None = None,
    end: dt.date | None = None,
    days: Iterable[dt.date] | None = None,
    segment: dict[str, str | None] | None = None,
) -> pd.DataFrame:
    """Load the columns the metrics need for the events of [start, end], or of exactly `days` (optionally one segment)."""
    e = table_of(Event).c
    stmt = select(
        e.day,
        e.intent,
        e.plan,
        e.agent_id,
        e.model_version,
        e.prompt_version,
        e.draft_shown,
        e.action,
        e.sent_text.is_not(None).label("has_sent"),
        e.edit_distance,
        e.escalated,
        e.handle_time_s,
        e.latency_ms,
        e.cost_usd,
        e.confidence,
    )
    if days is not None:
        # only the listed days are read (day IN (...)): a late event does not reload the days between
        stmt = stmt.where(e.day.in_(sorted(set(days))))
    else:
        if start is None or end is None:
            raise ValueError("raw_frame needs start and end, or days")
        stmt = stmt.where(e.day >= start, e.day <= end)
    for dim, value in (segment or {}).items():
        if value is not None:
            stmt = stmt.where(e[dim] == value)
    # The DBAPI cursor skips SQLAlchemy's per-row processing: a million rows load in seconds, not a minute.
    conn = session.connection()
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    # bound parameters (filter values come from users); the only non-strings are days, which
    # SQLite stores as ISO text (as SQLAlchemy binds them)
    sqlite = conn.dialect.name == "sqlite"
    values = {k: (v.isoformat() if sqlite and isinstance(v, dt.date) else v) for k, v in compiled.params.items()}
    order = compiled.positiontup
    params: Any = [values[k] for k in order] if compiled.positional and order is not None else values
    # exec_driver_sql keeps the statement visible to SQLAlchemy's events; the rows are fetched
    # from the driver's cursor, skipping SQLAlchemy's per-row objects
    result = conn.exec_driver_sql(str(compiled), tuple(params) if isinstance(params, list) else params)
    try:
        rows = result.cursor.fetchall() if result.cursor is not None else []
    finally:
        result.close()
    df = pd.DataFrame.from_records(rows, columns=list(_RAW_COLUMNS))
    if not df.empty and not isinstance(df["day"].iloc[0], dt.date):
        df["day"] = pd.to_datetime(df["day"], format="%Y-%m-%d").dt.date  # SQLite hands back ISO text
    return df


def _floats(column: object) -> pd.Series:
    """Return a column as floats, missing values (None) as NaN."""
    if not isinstance(column, pd.Series):  # a frame's column by name; the stubs also allow a frame
        raise TypeError(f"expected a column, got {type(column).__name__}")
    return pd.Series(pd.to_numeric(column, errors="coerce"), index=column.index, dtype=float)


def _frame(value: object) -> pd.DataFrame:
    """Return a groupby result known to be a frame (the stubs allow a scalar or a Series too)."""
    if not isinstance(value, pd.DataFrame):
        raise TypeError(f"expected a frame, got {type(value).__name__}")
    return value


def _prepare(df: pd.DataFrame, spec: EvalSpec) -> pd.DataFrame:
    om = spec.online_metrics
    shown = df["draft_shown"].astype(bool)
    action = df["action"]
    ed = _floats(df["edit_distance"])
    is_edit = action == "edit"
    accept = shown & ((action == "accept") | (is_edit & (ed <= om.minor_edit_limit)))
    ed_ok = shown & ((action == "accept") | is_edit) & df["has_sent"].astype(bool) & ed.notna()
    ht = _floats(df["handle_time_s"])
    ht_ok = df["intent"].isin(spec.intents) & ht.notna()
    lat = _floats(df["latency_ms"]) / 1000.0
    lat_ok = shown & lat.notna()
    cost = _floats(df["cost_usd"])
    conf = _floats(df["confidence"])
    conf_ok = shown & conf.notna()
    out = pd.DataFrame(
        {
            "day": df["day"],
            "intent": df["intent"].fillna(NONE).astype(str),
            "plan": df["plan"].fillna(NONE).astype(str),
            "agent_id": df["agent_id"].fillna(NONE).astype(str),
            "n_events": 1,
            "n_shown": shown.astype(int),
            "n_accept": accept.astype(int),
            "n_reject": (shown & (action == "reject")).astype(int),
            "ed_sum": ed.where(ed_ok, 0.0),
            "ed_n": ed_ok.astype(int),
            "n_escalated": df["escalated"].astype(bool).astype(int),
            "ht_sum": ht.where(ht_ok, 0.0),
            "ht_n": ht_ok.astype(int),
            "lat": lat.where(lat_ok),
            "lat_n": lat_ok.astype(int),
            "cost_sum": cost.fillna(0.0),
            "cost_n": cost.notna().astype(int),
            "conf": conf.where(conf_ok),
            "conf_bin": (conf.fillna(0.0) * CALIBRATION_BINS).astype(int).clip(upper=CALIBRATION_BINS - 1).where(conf_ok, -1),
            "conf_acc": (accept & conf_ok).astype(int),
        },
        index=df.index,
    )
    return out


_SUM_COLS = ["n_events", "n_shown", "n_accept", "n_reject", "ed_sum", "ed_n", "n_escalated", "ht_sum", "ht_n", "lat_n", "cost_sum", "cost_n"]


def aggregate_frame(df: pd.DataFrame, spec: EvalSpec, dims: tuple[str, ...], *, prepared: pd.DataFrame | None = None) -> pd.DataFrame:
    """Aggregate raw events per day and the given segment dimensions (the others become '*')."""
    p = prepared if prepared is not None else _prepare(df, spec)
    keys = ["day", *dims]
    if p.empty:
        return pd.DataFrame(columns=[*keys, *_SUM_COLS, "lat_p95_s", "calib"])
    grouped = p.groupby(keys, sort=True)
    agg = _frame(grouped[_SUM_COLS].sum())
    # numpy's default percentile (linear interpolation between closest ranks), per group
    agg["lat_p95_s"] = grouped["lat"].quantile(0.95, interpolation="linear")
    cal = p[p["conf_bin"] >= 0]
    calib_cols = [(m, b) for b in range(CALIBRATION_BINS) for m in ("n", "conf", "acc")]
    if cal.empty:
        wide = pd.DataFrame(0.0, index=agg.index, columns=pd.MultiIndex.from_tuples(calib_cols))
    else:
        cg = _frame(cal.groupby([*keys, "conf_bin"], sort=False).agg(n=("conf", "size"), conf=("conf", "sum"), acc=("conf_acc", "sum")))
        wide = _frame(cg.unstack("conf_bin"))
        wide = wide.reindex(columns=pd.MultiIndex.from_tuples(calib_cols)).reindex(agg.index).fillna(0.0)
    agg["calib"] = wide.to_numpy(dtype=float).reshape(-1, CALIBRATION_BINS, 3).tolist()
    agg = agg.reset_index()
    for dim in SEGMENT_DIMS:
        if dim not in dims:
            agg[dim] = ALL
    return agg


def versions_by_day(df: pd.DataFrame) -> dict[dt.date, dict[str, dict[str, int]]]:
    """Count the events of each model and prompt version per day."""
    out: dict[dt.date, dict[str, dict[str, int]]] = {}
    for column in ("model_version", "prompt_version"):
        counts = df[["day", column]].dropna().groupby(["day", column], sort=False).size()
        for key, n in zip(counts.index, counts.to_numpy().tolist(), strict=True):
            if isinstance(key, tuple):  # (day, version): the two group keys
                day, value = key
                out.setdefault(day, {"model_version": {}, "prompt_version": {}})[column][str(value)] = int(n)
    return out


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


_AGG_COLUMNS = ["day", *SEGMENT_DIMS, *_SUM_COLS, "lat_p95_s"]


def compute_aggregates(df: pd.DataFrame, spec: EvalSpec) -> list[tuple[Any, ...]]:
    """Return the aggregate rows (every rollup) of raw events, as insert tuples; touches no database."""
    if df.empty:
        return []
    prepared = _prepare(df, spec)
    versions = versions_by_day(df)
    out: list[tuple[Any, ...]] = []
    for dims in ROLLUPS:
        agg = aggregate_frame(df, spec, dims, prepared=prepared)
        lists: list[list[Any]] = [agg[c].tolist() for c in _AGG_COLUMNS]
        lat = lists[_AGG_COLUMNS.index("lat_p95_s")]
        lists[_AGG_COLUMNS.index("lat_p95_s")] = [None if v != v else v for v in lat]  # NaN -> NULL
        lists.append([json.dumps(c) for c in agg["calib"].tolist()])
        lists.append([json.dumps(versions.get(d)) if not dims else None for d in agg["day"].tolist()])
        out.extend(zip(*lists, strict=True))
    return out


def rebuild_days(
    *,
    session: Session,
    spec: EvalSpec,
    days: Iterable[dt.date],
    frame: pd.DataFrame | None = None,
    computed: list[tuple[Any, ...]] | None = None,
) -> int:
    """Recompute the aggregate rows of the given days from their raw events; return how many rows were written.

    `frame` may hold exactly the stored events of those days (a bulk import into empty days), and
    `computed` its compute_aggregates(); they are used only when the stored count confirms that
    the frame is all there is, else the events are read back.
    """
    days = sorted(set(days))
    if not days:
        return 0
    session.flush()
    lock_days(session, days)
    records = None
    if frame is not None:
        e = table_of(Event).c
        stored = sum(
            session.execute(select(func.count()).where(e.day.in_(chunk))).scalar_one() for chunk in chunks(days, 500)
        )
        if stored == len(frame):
            records = computed if computed is not None else compute_aggregates(frame, spec)
    if records is None:
        records = []
        # a month at a time: memory stays bounded when every day is rebuilt
        for chunk in chunks(days, 31):
            records += compute_aggregates(raw_frame(session, days=chunk), spec)
    table = table_of(DailyAggregate)
    for chunk in chunks(days, 500):
        session.execute(delete(table).where(table.c.day.in_(chunk)))
    conn = session.connection()
    if conn.dialect.name == "sqlite":
        records = [(r[0].isoformat(), *r[1:]) for r in records]  # SQLite stores days as ISO text
    names = [*_AGG_COLUMNS, "calib", "versions"]
    mark = "?" if conn.dialect.name == "sqlite" else "%s"
    sql = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({', '.join([mark] * len(names))})"
    # plain executemany through the driver: no per-row ORM or type processing
    for chunk in chunks(records, 10_000):
        conn.exec_driver_sql(sql, list(chunk))
    return len(records)


def rebuild_all(*, session: Session, spec: EvalSpec) -> int:
    """Recompute every event's day (after a time-zone change) and every aggregate."""
    e = table_of(Event)
    tz = spec.tz
    rows = session.execute(select(e.c.id, e.c.occurred_at)).all()
    from webapp.timeutil import as_utc

    updates = [{"b_id": r[0], "b_day": as_utc(r[1]).astimezone(tz).date()} for r in rows]
    from sqlalchemy import bindparam

    for chunk in chunks(updates, 5000):
        session.execute(e.update().where(e.c.id == bindparam("b_id")).values(day=bindparam("b_day")), chunk)
    # the marks standing for events read here: rebuilt below, whatever their day
    marks = list(session.execute(select(col(StaleDay.id))).scalars())
    session.execute(delete(table_of(DailyAggregate)))
    for chunk in chunks(marks, 1000):
        session.execute(delete(StaleDay).where(col(StaleDay.id).in_(chunk)))
    bounds = session.execute(select(func.min(e.c.day), func.max(e.c.day))).one()
    if bounds[0] is None:
        return 0
    all_days = [bounds[0] + dt.timedelta(days=i) for i in range((bounds[1] - bounds[0]).days + 1)]
    return rebuild_days(session=session, spec=spec, days=all_days)


def chunks(seq: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    """Yield consecutive slices of at most `size` items."""
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


def event_days(session: Session) -> tuple[dt.date, dt.date] | None:
    """Return the first and last day with events, or None."""
    e = col(Event.day)
    # two queries: SQLite answers a lone min() or max() from the index, but not both in one
    first = session.execute(select(func.min(e))).scalar_one()
    last = session.execute(select(func.max(e))).scalar_one()
    return (first, last) if first is not None else None
