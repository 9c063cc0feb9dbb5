"""On SQLite, the background pass's merge computed from a read snapshot, then written in a short write transaction.

Why: SQLite has one write lock for the database. The background pass (webapp/metrics/background.py)
merged a busy hour's new events into a 50,000-event day inside its write transaction: reading
them, aggregating them through pandas and re-reading the day's latencies for the p95 held the lock
289 ms at p50 (736 ms at worst) every 30 s, and the grade saves and events batches of that moment
waited for it (bench_realistic, 6 December: the slowest saves, up to 1.3 s, had waited behind it).
Now `plan_merge` does that work in a snapshot reader's transaction (webapp/core/db.py,
snapshot_reader: every read sees one committed state, no lock), and `apply_plan`, in the pass's
write transaction, checks that the snapshot still holds before writing:
- the marks the call clears are the snapshot's, to the creation time (so every event behind them
  was committed before the snapshot and is in the plan, or merged already);
- the days are still open to rebuild (no prune in between);
- their stored rows are the ones the plan started from (any merge, import or rebuild of those days
  in between changes them);
- every event the plan merges is still pending.
When one of them fails the plan is dropped and the call merges inside the write transaction as before
(stale.rebuild_stale): never a different figure, at worst the old lock time. Events that arrive
after the snapshot stay pending, behind their own marks, for the next pass.

PostgreSQL keeps stale.rebuild_stale: its writers take row and day locks, not one lock for the
whole database, so its pass never held up a save.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from webapp.core.db import is_sqlite, session_scope, snapshot_reader, table_of
from webapp.core.spec import EvalSpec
from webapp.metrics import aggregates, stale, watermark
from webapp.metrics.models import Event


@dataclass(frozen=True)
class MergePlan:
    """What a rebuild call writes for `days`, and the snapshot it was computed from."""

    days: list[dt.date]  # the days the call brings up to date (stale.marks_to_rebuild)
    marks: list[stale.Mark]  # the marks it clears
    open_days: list[dt.date]  # those of the days open to rebuild (watermark)
    changed: list[dt.date]  # the days with pending events
    pending_ids: list[int]  # the events it marks merged
    stored: dict[aggregates.RowKey, aggregates.Record]  # the changed days' stored rows at the snapshot
    rows: list[aggregates.InsertRow]  # what they are replaced by


def rebuild_stale_planned(*, engine: Engine, spec: EvalSpec, marked_upto: int) -> list[dt.date]:
    """Bring a chunk of stale days up to date as stale.rebuild_stale does, computed outside the write lock on SQLite."""
    plan = plan_merge(engine, spec, marked_upto=marked_upto)
    with session_scope(engine) as session:
        if not stale.try_rebuilder_lock(session):
            return []
        if plan is not None and apply_plan(session, plan, marked_upto=marked_upto):
            return plan.days
        return stale.rebuild_stale(session=session, spec=spec, marked_upto=marked_upto)


def plan_merge(engine: Engine, spec: EvalSpec, *, marked_upto: int) -> MergePlan | None:
    """Compute the next rebuild call's writes from one read snapshot, holding no lock; None on PostgreSQL."""
    if not is_sqlite(engine):
        return None
    with Session(snapshot_reader(engine)) as session:
        days, marks = stale.marks_to_rebuild(session, marked_upto=marked_upto)
        open_days = watermark.days_open_to_rebuild(session, days)
        pending = aggregates.raw_frame(session, days=open_days, pending_only=True, with_ids=True) if open_days else None
        if pending is None or pending.empty:
            session.commit()
            return MergePlan(days, marks, open_days, [], [], {}, [])
        changed, rows, new = aggregates.merged_records(session, spec, pending)
        stored = aggregates.stored_records(session, changed)
        # every event of the days, the pending ones included: the day's merged events once this is written
        aggregates.set_p95(rows, new, aggregates.latency_p95(session, changed, with_pending=True))
        session.commit()
    ids = [int(i) for i in pending["id"].tolist()]
    return MergePlan(days, marks, open_days, changed, ids, stored, aggregates.insert_tuples(rows))


def apply_plan(session: Session, plan: MergePlan, *, marked_upto: int) -> bool:
    """Write the plan in the session's write transaction if its snapshot still holds (module docstring); False: it does not."""
    days, marks = stale.marks_to_rebuild(session, marked_upto=marked_upto)
    if not days or days != plan.days or marks != plan.marks:
        return False
    if watermark.days_open_to_rebuild(session, days) != plan.open_days:
        return False
    if plan.changed:
        if aggregates.stored_records(session, plan.changed) != plan.stored or _pending_among(session, plan.pending_ids) != len(plan.pending_ids):
            return False
        aggregates.mark_merged(session, plan.pending_ids)
        aggregates.replace_days(session, plan.changed, plan.rows)
    stale.clear_marks(session, marks)
    return True


def _pending_among(session: Session, ids: list[int]) -> int:
    e = table_of(Event).c
    return sum(
        int(session.execute(select(func.count()).where(e.id.in_(chunk), e.pending.is_(True))).scalar_one())
        for chunk in aggregates.chunks(ids, 1000)
    )
