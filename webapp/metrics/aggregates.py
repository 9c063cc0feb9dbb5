"""Per-day aggregates: loading raw events, the pandas rollups, rebuilding a day's stored rows."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import TypeVar, cast

import pandas as pd
from sqlalchemy import Date, bindparam, delete, func, insert, select, text, update
from sqlalchemy import column as column_clause
from sqlalchemy import table as table_clause
from sqlmodel import Session, col

from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc
from webapp.metrics import watermark
from webapp.metrics.driver_rows import fetch_rows, floats, frame_of, lock_days
from webapp.metrics.event_days import as_date
from webapp.metrics.event_days import (
    event_days as event_days,  # read from here by the pages, the alerts and gates
)
from webapp.metrics.models import ALL, NONE, DailyAggregate, Event, StaleDay
from webapp.metrics.p95_in_database import latency_p95_by_segment

T = TypeVar("T")

CALIBRATION_BINS = 10
SEGMENT_DIMS: tuple[str, ...] = ("intent", "plan", "agent_id")
# The segments kept per day: everything, each single dimension, and intent x plan. Narrower
# combinations with an agent (one agent's events are few) are computed from the raw events.
ROLLUPS: tuple[tuple[str, ...], ...] = ((), ("intent",), ("plan",), ("agent_id",), ("intent", "plan"))
# The pending events, written as the partial index ix_metric_event_pending_day's own condition (a
# bare `pending`: SQLite uses a partial index only for a term identical to its WHERE, and
# SQLAlchemy would write `pending = 1` or `pending IS 1` there).
PENDING = text(f"{Event.__tablename__}.pending")

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
    pending_only: bool = False,
    with_ids: bool = False,
) -> pd.DataFrame:
    """Load the columns the metrics need for the events of [start, end], or of exactly `days` (optionally one segment).

    `pending_only` keeps the events not yet merged into their day's aggregates; `with_ids` adds
    the columns `id` and `pending` (read in the same statement, so in the same snapshot).
    """
    e = table_of(Event).c
    extra = [e.id, e.pending] if with_ids else []
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
        *extra,
    )
    if pending_only:
        stmt = stmt.where(PENDING)
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
    columns = [*RAW_COLUMNS, *(["id", "pending"] if with_ids else [])]
    df = pd.DataFrame.from_records(fetch_rows(session, stmt), columns=columns)
    if not df.empty and not isinstance(df["day"].iloc[0], dt.date):
        df["day"] = pd.to_datetime(df["day"], format="%Y-%m-%d").dt.date  # SQLite hands back ISO text
    return df


def _prepare(df: pd.DataFrame, spec: EvalSpec) -> pd.DataFrame:
    om = spec.online_metrics
    shown = df["draft_shown"].astype(bool)
    action = df["action"]
    ed = floats(df["edit_distance"])
    is_edit = action == "edit"
    accept = shown & ((action == "accept") | (is_edit & (ed <= om.minor_edit_limit)))
    ed_ok = shown & ((action == "accept") | is_edit) & df["has_sent"].astype(bool) & ed.notna()
    ht = floats(df["handle_time_s"])
    ht_ok = df["intent"].isin(spec.intents) & ht.notna()
    lat = floats(df["latency_ms"]) / 1000.0
    lat_ok = shown & lat.notna()
    cost = floats(df["cost_usd"])
    conf = floats(df["confidence"])
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
    agg = frame_of(grouped[_SUM_COLS].sum())
    # numpy's default percentile (linear interpolation between closest ranks), per group
    agg["lat_p95_s"] = grouped["lat"].quantile(0.95, interpolation="linear")
    cal = p[p["conf_bin"] >= 0]
    calib_cols = [(m, b) for b in range(CALIBRATION_BINS) for m in ("n", "conf", "acc")]
    if cal.empty:
        wide = pd.DataFrame(0.0, index=agg.index, columns=pd.MultiIndex.from_tuples(calib_cols))
    else:
        cg = frame_of(cal.groupby([*keys, "conf_bin"], sort=False).agg(n=("conf", "size"), conf=("conf", "sum"), acc=("conf_acc", "sum")))
        wide = frame_of(cg.unstack("conf_bin"))
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


_AGG_COLUMNS = ["day", *SEGMENT_DIMS, *_SUM_COLS, "lat_p95_s"]
# A stored row: the aggregate columns, then calib and versions.
_ROW_COLUMNS = [*_AGG_COLUMNS, "calib", "versions"]
_KEY = 1 + len(SEGMENT_DIMS)  # a row's identity: its day and segment, the first columns
_P95 = _AGG_COLUMNS.index("lat_p95_s")
_SUM_POS = [_AGG_COLUMNS.index(c) for c in _SUM_COLS]
_CALIB = len(_AGG_COLUMNS)
_VERSIONS = _CALIB + 1
RowKey = tuple[object, ...]  # (day, intent, plan, agent_id)
# An aggregate record in _ROW_COLUMNS order: the day and segment, the sums (ints and floats), the
# p95 (float or None), calib (per bin [n, sum of confidence, accepted]) and versions (or None).
Record = list[object]
InsertRow = tuple[object, ...]  # a record as the insert writes it (calib and versions as JSON text)
Calib = list[list[float]]
Versions = dict[str, dict[str, int]]
# The aggregate table as replace_days writes it: the day a date, the rest as given (calib and versions
# are JSON text already, which both databases take for their JSON columns, without a cast).
_ROWS_AS_TEXT = table_clause(
    DailyAggregate.__tablename__,
    *(
        column_clause(c, Date()) if c == "day" else column_clause(c)
        for c in _ROW_COLUMNS
    ),
)


def aggregate_records(df: pd.DataFrame, spec: EvalSpec) -> list[Record]:
    """Return the aggregate rows (every rollup) of raw events in _ROW_COLUMNS order, calib and versions as objects."""
    if df.empty:
        return []
    prepared = _prepare(df, spec)
    versions = versions_by_day(df)
    out: list[Record] = []
    for dims in ROLLUPS:
        agg = aggregate_frame(df, spec, dims, prepared=prepared)
        lists: list[list[object]] = [agg[c].tolist() for c in _AGG_COLUMNS]
        lists[_P95] = [None if v != v else v for v in lists[_P95]]  # NaN -> NULL
        lists.append(agg["calib"].tolist())
        lists.append([versions.get(d) if not dims else None for d in agg["day"].tolist()])
        out.extend(list(r) for r in zip(*lists, strict=True))
    return out


def _insert_tuple(row: Sequence[object]) -> InsertRow:
    """Return a row of aggregate_records as the insert writes it (calib and versions as JSON text)."""
    versions = row[_VERSIONS]
    return (*row[:_CALIB], json.dumps(row[_CALIB]), None if versions is None else json.dumps(versions))


def compute_aggregates(df: pd.DataFrame, spec: EvalSpec) -> list[InsertRow]:
    """Return the aggregate rows (every rollup) of raw events, as insert tuples; touches no database."""
    return [_insert_tuple(r) for r in aggregate_records(df, spec)]


def rebuild_days(
    *,
    session: Session,
    spec: EvalSpec,
    days: Iterable[dt.date],
    frame: pd.DataFrame | None = None,
    computed: list[InsertRow] | None = None,
) -> int:
    """Recompute the aggregate rows of the given days from all their raw events; return how many rows were written.

    The full recompute (`draftdesk metrics rebuild`, the file import); the background pass merges
    instead (merge_pending). The pending events it read are marked merged, in the same snapshot as
    the read, so an event committed meanwhile stays pending for the next merge.
    `frame` may hold exactly the stored events of those days (a bulk import into empty days), and
    `computed` its compute_aggregates(); they are used only when the stored and pending counts confirm
    that the frame is all there is, else the events are read back.
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
    records = _frame_records(session, spec, days, frame, computed) if frame is not None else None
    if records is None:
        records = []
        # a month at a time: memory stays bounded when every day is rebuilt
        for chunk in chunks(days, 31):
            df = raw_frame(session, days=chunk, with_ids=True)
            records += compute_aggregates(df.drop(columns=["id", "pending"]), spec)
            mark_merged(session, df.loc[df["pending"].astype(bool), "id"].tolist())
    replace_days(session, days, records)
    return len(records)


def _frame_records(
    session: Session, spec: EvalSpec, days: list[dt.date], frame: pd.DataFrame, computed: list[InsertRow] | None
) -> list[InsertRow] | None:
    """Return the frame's rows when it holds every event of `days`, all of them pending (now marked merged); else None."""
    e = table_of(Event).c
    merged = 0
    for chunk in chunks(days, 500):
        result = session.execute(update(table_of(Event)).where(e.day.in_(chunk), PENDING).values(pending=False))
        merged += int(getattr(result, "rowcount", 0))
    stored = sum(session.execute(select(func.count()).where(e.day.in_(chunk))).scalar_one() for chunk in chunks(days, 500))
    if not stored == merged == len(frame):
        return None  # the full read that follows reads every event of the days, these included
    return computed if computed is not None else compute_aggregates(frame, spec)


def merge_pending(*, session: Session, spec: EvalSpec, days: Iterable[dt.date]) -> list[dt.date]:
    """Add the pending events of `days` into their days' stored aggregates and mark them merged; return the days changed.

    Invariant: a day's stored rows aggregate exactly its events that are not pending. Sums,
    counts, calibration bins and version counts add up; the latency p95 does not, so it is
    recomputed for the segments the new events touch, from one read of the changed days'
    latencies (one column per event, not the whole rows through pandas). An event is pending
    once (a retried event_id is not stored again), so the merge never counts one twice. Days
    before the retention watermark keep their figures (an event stored just before a prune set it
    is deleted by that prune, never merged). SQLite's background pass computes the same from a
    read snapshot first (webapp/metrics/merge_plan.py).
    """
    days = watermark.days_open_to_rebuild(session, set(days))
    if not days:
        return []
    session.flush()
    lock_days(session, days)
    pending = raw_frame(session, days=days, pending_only=True, with_ids=True)
    if pending.empty:
        return []
    changed, rows, new = merged_records(session, spec, pending)
    # marked merged first: the p95 read below takes exactly the merged events (on PostgreSQL each
    # statement sees the batches committed before it, and those stay pending, outside the sums)
    mark_merged(session, pending["id"].tolist())
    set_p95(rows, new, latency_p95(session, changed))
    replace_days(session, changed, [_insert_tuple(r) for r in rows.values()])
    return changed


def merged_records(
    session: Session, spec: EvalSpec, pending: pd.DataFrame
) -> tuple[list[dt.date], dict[RowKey, Record], list[Record]]:
    """Return the days the pending events touch, their stored rows plus those events (p95 not set yet), and the events' own rows."""
    changed: list[dt.date] = sorted(set(pending["day"].tolist()))
    new = aggregate_records(pending.drop(columns=["id", "pending"]), spec)
    rows = stored_records(session, changed)
    for r in new:
        key = tuple(r[:_KEY])
        old = rows.get(key)
        rows[key] = r if old is None else _added(old, r)
    return changed, rows, new


def set_p95(rows: dict[RowKey, Record], new: list[Record], p95: dict[RowKey, float]) -> None:
    """Set the latency p95 of the rows the new events touched (the others keep theirs)."""
    for r in new:
        rows[tuple(r[:_KEY])][_P95] = p95.get(tuple(r[:_KEY]))


def insert_tuples(rows: dict[RowKey, Record]) -> list[InsertRow]:
    """Return the rows as replace_days writes them."""
    return [_insert_tuple(r) for r in rows.values()]


def _sum(a: object, b: object) -> int | float:
    """Add two sums of a record (ints stay ints: the count columns are integers)."""
    if not (isinstance(a, int | float) and isinstance(b, int | float)):
        raise TypeError(f"a sum column holds {a!r} and {b!r}")
    return a + b


def _added(old: Record, new: Record) -> Record:
    """Return a stored row plus the new events' row of the same day and segment (the p95 is set apart)."""
    out = list(old)
    for i in _SUM_POS:
        out[i] = _sum(old[i], new[i])
    # calib and versions as aggregate_records and the stored JSON columns hold them
    old_calib, new_calib = cast(Calib | None, old[_CALIB]), cast(Calib | None, new[_CALIB])
    if old_calib and new_calib:
        out[_CALIB] = [[a + b for a, b in zip(x, y, strict=True)] for x, y in zip(old_calib, new_calib, strict=True)]
    else:
        out[_CALIB] = old_calib or new_calib
    out[_VERSIONS] = _added_versions(cast(Versions | None, old[_VERSIONS]), cast(Versions | None, new[_VERSIONS]))
    return out


def _added_versions(
    old: dict[str, dict[str, int]] | None, new: dict[str, dict[str, int]] | None
) -> dict[str, dict[str, int]] | None:
    if old is None or new is None:
        return old if new is None else new
    out = {column: dict(counts) for column, counts in old.items()}
    for column, counts in new.items():
        into = out.setdefault(column, {})
        for value, n in counts.items():
            into[value] = into.get(value, 0) + n
    return out


def stored_records(session: Session, days: Sequence[dt.date]) -> dict[RowKey, Record]:
    """Return the stored rows of `days` by (day, segment), in _ROW_COLUMNS order."""
    t = table_of(DailyAggregate).c
    stmt = select(*[t[c] for c in _ROW_COLUMNS]).where(t.day.in_(list(days)))
    return {tuple(r[:_KEY]): list(r) for r in session.execute(stmt)}


def latency_p95(session: Session, days: Sequence[dt.date], *, with_pending: bool = False) -> dict[RowKey, float]:
    """Return the latency p95 (seconds) of every stored segment of `days` with a latency, from their merged events.

    `with_pending` (SQLite only: a merge planned from a snapshot, webapp/metrics/merge_plan.py)
    takes the pending events too, i.e. every event of the days, as they will be once merged.

    The same values and the same quantile as aggregate_frame (shown drafts' latencies, linear
    interpolation), so a merged day's p95 equals a full recompute's. One read per day, answered
    from the covering index ix_metric_event_day_latency (50,000 events: ~50 ms on SQLite).
    """
    e = table_of(Event).c
    out: dict[RowKey, float] = {}
    if session.get_bind().dialect.name == "postgresql":  # sorted by the database (p95_in_database)
        for day in days:
            out.update(latency_p95_by_segment(session, day))
        return out
    for day in days:
        stmt = select(e.intent, e.plan, e.agent_id, e.latency_ms).where(
            e.day == day, e.draft_shown.is_(True), e.latency_ms.is_not(None), *([] if with_pending else [e.pending.is_(False)])
        )
        df = pd.DataFrame.from_records(fetch_rows(session, stmt), columns=[*SEGMENT_DIMS, "latency_ms"])
        if df.empty:
            continue
        for dim in SEGMENT_DIMS:
            df[dim] = df[dim].fillna(NONE).astype(str).astype("category")
        df["lat"] = floats(df["latency_ms"]) / 1000.0
        df["day"] = day
        for dims in ROLLUPS:
            keys = ["day", *dims]
            quantiles = df.groupby(keys, sort=False, observed=True)["lat"].quantile(0.95, interpolation="linear")
            values: list[float] = quantiles.to_numpy(dtype=float).tolist()
            for group, value in zip(quantiles.index.tolist(), values, strict=True):
                parts = dict(zip(keys, group if isinstance(group, tuple) else (group,), strict=True))
                if value == value:  # not NaN
                    out[(day, *(parts.get(d, ALL) for d in SEGMENT_DIMS))] = value
    return out


def mark_merged(session: Session, ids: Sequence[int]) -> None:
    """Mark events as merged into their days' aggregates."""
    e = table_of(Event)
    for chunk in chunks([int(i) for i in ids], 1000):
        session.execute(update(e).where(e.c.id.in_(chunk)).values(pending=False))


def replace_days(session: Session, days: Sequence[dt.date], records: list[InsertRow]) -> None:
    """Replace the stored rows of `days` by `records` (insert tuples: calib and versions as JSON text already).

    One executemany through SQLAlchemy (its insertmanyvalues batching on PostgreSQL), on a
    lightweight table whose JSON columns are plain text: the records hold them encoded.
    """
    table = table_of(DailyAggregate)
    for chunk in chunks(list(days), 500):
        session.execute(delete(table).where(table.c.day.in_(chunk)))
    if records:
        session.execute(insert(_ROWS_AS_TEXT), [dict(zip(_ROW_COLUMNS, r, strict=True)) for r in records])


def _iso(day: object) -> str:
    if not isinstance(day, dt.date):
        raise TypeError(f"a record's first column is its day, not {day!r}")
    return day.isoformat()


def rebuild_all(*, session: Session, spec: EvalSpec) -> int:
    """Recompute every event's day (after a time-zone change) and every aggregate, in the caller's one transaction.

    For a small database (tests, a demo); `draftdesk metrics rebuild` works a day per transaction,
    resumable (webapp/metrics/rebuild.py), so that it never holds SQLite's write lock throughout.
    """
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
    days = [as_date(d) for d in session.execute(with_events).scalars()]
    return rebuild_days(session=session, spec=spec, days=days)


def chunks(seq: Sequence[T], size: int) -> Iterable[Sequence[T]]:
    """Yield consecutive slices of at most `size` items."""
    for i in range(0, len(seq), size):
        yield seq[i : i + size]
