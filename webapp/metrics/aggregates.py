"""Per-day aggregates: loading raw events, the pandas rollups, rebuilding a day's stored rows."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import bindparam, delete, func, select, text
from sqlmodel import Session, col

from webapp.db import table_of
from webapp.metrics import watermark
from webapp.metrics.event_input import WINDOW_START
from webapp.metrics.models import ALL, NONE, DailyAggregate, Event, StaleDay
from webapp.spec import EvalSpec
from webapp.timeutil import as_utc, utcnow

CALIBRATION_BINS = 10
SEGMENT_DIMS: tuple[str, ...] = ("intent", "plan", "agent_id")
# The segments kept per day: everything, each single dimension, and intent x plan. Narrower
# combinations with an agent (one agent's events are few) are computed from the raw events.
ROLLUPS: tuple[tuple[str, ...], ...] = ((), ("intent",), ("plan",), ("agent_id",), ("intent", "plan"))
# First key of the per-day advisory locks (the second is the day's ordinal): on PostgreSQL the
# rebuilds of one day are serialized, so a rebuild that started later (and read more events)
# writes last, while rebuilds of different days proceed in parallel. Ingestion takes no lock.
PG_AGGREGATE_LOCK_KEY = 7_305_501

# The first day an event in the sane window can fall on, in any time zone.
READ_FIRST_DAY = WINDOW_START.date() - dt.timedelta(days=1)

RAW_COLUMNS = (
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
    df = pd.DataFrame.from_records(rows, columns=list(RAW_COLUMNS))
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
            # the group keys as categories: each column is factorized once here, not once per rollup
            "day": df["day"].astype("category"),
            "intent": df["intent"].fillna(NONE).astype(str).astype("category"),
            "plan": df["plan"].fillna(NONE).astype(str).astype("category"),
            "agent_id": df["agent_id"].fillna(NONE).astype(str).astype("category"),
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
    asked = set(days)
    # the retention guard: days before the watermark keep their figures (see watermark.py)
    days = watermark.days_open_to_rebuild(session, asked)
    if not days:
        return 0
    if len(days) < len(asked):
        frame = computed = None  # they hold events of closed days too
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
    updates = [{"b_id": r[0], "b_day": as_utc(r[1]).astimezone(tz).date()} for r in rows]
    for chunk in chunks(updates, 5000):
        session.execute(e.update().where(e.c.id == bindparam("b_id")).values(day=bindparam("b_day")), chunk)
    # the marks standing for events read here: rebuilt below, whatever their day
    marks = list(session.execute(select(col(StaleDay.id))).scalars())
    # the retention guard: the figures of days before the watermark stay as they are (watermark.py)
    floor = watermark.pruned_before(session)
    daily = table_of(DailyAggregate)
    session.execute(delete(daily) if floor is None else delete(daily).where(daily.c.day >= floor))
    for chunk in chunks(marks, 1000):
        session.execute(delete(StaleDay).where(col(StaleDay.id).in_(chunk)))
    # the days with events, not every day between the first and the last (a stray day decades away
    # would make millions of empty days to lock and read)
    with_events = select(e.c.day).distinct() if floor is None else select(e.c.day).where(e.c.day >= floor).distinct()
    days = [_as_date(d) for d in session.execute(with_events).scalars()]
    return rebuild_days(session=session, spec=spec, days=days)


def chunks(seq: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    """Yield consecutive slices of at most `size` items."""
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


# Readers (the metrics page, the alerts, the alert pass) evaluate from the first day with events to
# the last: at most this many days back from the last, so that a history of any length stays within
# daily_metrics' ten-year range.
READ_HISTORY_DAYS = 3650


def event_days(session: Session) -> tuple[dt.date, dt.date] | None:
    """Return the first and last day with events that readers evaluate, or None.

    Only days in the sane window count (from 2000 to two days after today's UTC date, the furthest
    a day can be ahead in any time zone when events may be a day ahead) and at most
    READ_HISTORY_DAYS before the last: a stored row outside it (written before the window was
    enforced, or by hand) never drags every reader's range out of bounds (issue 33).
    """
    e = col(Event.day)
    lowest = READ_FIRST_DAY
    highest = utcnow().date() + dt.timedelta(days=2)
    # two queries: SQLite answers a lone min() or max() from the index, but not both in one
    last = session.execute(select(func.max(e)).where(e >= lowest, e <= highest)).scalar_one()
    if last is None:
        return None
    last = _as_date(last)
    first = session.execute(select(func.min(e)).where(e >= max(lowest, last - dt.timedelta(days=READ_HISTORY_DAYS)))).scalar_one()
    return _as_date(first), last


def _as_date(value: dt.date | str) -> dt.date:
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(value)
