"""Job runs: record each background job pass, and tell which jobs have stopped succeeding.

Every pass of every job (webapp/app/jobs.py) ends with record_pass, in its own transaction, in
whichever process ran it; /healthz and Prometheus (/-/metrics) read the rows back, so a web process
reports on jobs run by a separate `draftdesk jobs` process too.

Decision (issue 33): a job is stalled when it has not succeeded for STALL_PERIODS of its periods
(since its last success, or since its first pass when it never succeeded). One slow or failed
pass is routine (a database restart, a lock); three in a row is a job that stopped, whether it
fails every time or no process runs it any more.
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, col

from webapp.core.db import table_of
from webapp.core.timeutil import as_utc
from webapp.ops.models import JobRun

STALL_PERIODS = 3
# Enough of an error's message to recognise it; the rest is in the log.
ERROR_CHARS = 2000


class JobState(BaseModel):
    """One job's last passes, and whether it is stalled (no success for STALL_PERIODS periods)."""

    job: str
    period_s: float
    last_run_at: dt.datetime
    last_success_at: dt.datetime | None
    last_error_at: dt.datetime | None
    last_error: str | None
    failures: int
    stalled: bool


def record_pass(*, session: Session, job: str, period_s: float, now: dt.datetime, error: str | None = None) -> None:
    """Record one pass of `job` (an error message when it failed): one upsert, safe when processes race."""
    table = table_of(JobRun)
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    values: dict[str, object] = {"job": job, "period_s": period_s, "first_run_at": now, "last_run_at": now, "failures": 0}
    changes: dict[str, object] = {"period_s": period_s, "last_run_at": now}
    if error is None:
        values["last_success_at"] = changes["last_success_at"] = now
        changes["failures"] = 0
    else:
        message = error[:ERROR_CHARS]
        values.update(last_error_at=now, last_error=message, failures=1)
        changes.update(last_error_at=now, last_error=message, failures=table.c.failures + 1)
    stmt = insert(table).values(**values)
    session.execute(stmt.on_conflict_do_update(index_elements=[table.c.job], set_=changes))
    session.flush()


def job_states(*, session: Session, now: dt.datetime) -> list[JobState]:
    """Return every recorded job's state at `now`, by name."""
    rows = session.execute(select(JobRun).order_by(col(JobRun.job))).scalars().all()
    return [_state(r, now) for r in rows]


def _state(r: JobRun, now: dt.datetime) -> JobState:
    success = as_utc(r.last_success_at) if r.last_success_at else None
    since = success or as_utc(r.first_run_at)
    return JobState(
        job=r.job,
        period_s=r.period_s,
        last_run_at=as_utc(r.last_run_at),
        last_success_at=success,
        last_error_at=as_utc(r.last_error_at) if r.last_error_at else None,
        last_error=r.last_error,
        failures=r.failures,
        stalled=(now - since).total_seconds() > STALL_PERIODS * r.period_s,
    )
