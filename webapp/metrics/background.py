"""The background job `draftdesk serve` runs: rebuild stale days' aggregates, coalesced, then evaluate alerts."""

from __future__ import annotations

import datetime as dt

from fastapi import FastAPI
from sqlalchemy.engine import Engine

from webapp.core.db import session_scope
from webapp.core.facts import record_fact
from webapp.core.periodic import Record, every
from webapp.core.spec import EvalSpec
from webapp.metrics import merge_plan, stale

# Seconds between passes: how long a day's figures (and its alerts) may lag its events; the API
# and the pages flag the days still updating. Since issue 33 a pass merges only the new events
# (aggregates.merge_pending: ~0.15 s at 50,000 events today with a busy hour's 170 new ones, against
# 0.6 s for re-aggregating the day, which every pass did before), and the requests the process
# serves meanwhile wait for the GIL less. 30 s is the alert evaluation's own default interval
# (alerts_interval_seconds).
REBUILD_INTERVAL_S = 30.0
# The job's name in job_run, /healthz and Prometheus.
JOB = "metrics_rebuild"


def rebuild_pass(*, engine: Engine, spec: EvalSpec) -> list[dt.date]:
    """Rebuild every day stale when the pass began (a chunk per transaction) unless another process is at it; return the days.

    Marks made while the pass runs wait for the next pass: under a steady stream of events
    batches (each marks its day) a pass that went on until no mark was left ran back to back,
    re-reading the day's latencies for every few batches, and held the process's GIL for ~40% of
    a 50,000-event day's busy hour (bench_realistic, PostgreSQL, py-spy --gil, 3 December); the
    pages and saves waited for it.
    """
    done: list[dt.date] = []
    with session_scope(engine, write=False) as session:
        upto = stale.last_mark(session)
    if upto is None:
        return done
    while True:
        # on SQLite computed from a read snapshot, then checked and written in a short write
        # transaction (webapp/metrics/merge_plan.py); on PostgreSQL in its write transaction
        days = merge_plan.rebuild_stale_planned(engine=engine, spec=spec, marked_upto=upto)
        if days:
            done += days
            continue
        if done:
            # the ingestion requests left the alert evaluation to this pass (stale.after_ingest): the
            # alerts domain reacts to the fact (webapp/alerts/reactions.py)
            with session_scope(engine) as session:
                record_fact(session, "metrics_rebuilt", days=len(done))
        return done


async def run(app: FastAPI, record: Record | None = None) -> None:
    """Loop until cancelled: one rebuild pass every REBUILD_INTERVAL_S, in a thread (the database calls block).

    After each pass `record(JOB, REBUILD_INTERVAL_S, error)` stores how it went (webapp/app/jobs.py).
    """
    engine = app.state.engine
    await every(REBUILD_INTERVAL_S, JOB, lambda: rebuild_pass(engine=engine, spec=app.state.spec), record)
