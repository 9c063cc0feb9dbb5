"""The background jobs: each domain's `background.run(app, record)` (metrics rebuild, alert evaluation
and delivery), the retention job and SQLite's planner statistics (webapp/ops/planner_stats.py), each
pass recorded in the job_run table.

Decision (issue 33): the default topology is one process: the jobs run inside `draftdesk serve`.
The metrics rebuild merges only the events that arrived since its last pass (webapp/metrics/aggregates.py,
merge_pending), so a pass costs in proportion to the new events, not to the day: at 50,000 events a
day it no longer holds the GIL for seconds beside the page requests (benchmarks/bench_realistic.py
--day-events 50000, docs/benchmarks.md). `draftdesk jobs` beside `serve --separate-jobs` stays an
option (docs/deployment.md, "Topology"): several web workers, or jobs on another host.

Every pass ends with a record (record_pass: last success, or last error) in its own transaction,
so `/healthz` and Prometheus see a job that fails or that no process runs any more
(webapp/ops/jobruns.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import signal
from collections.abc import Callable

from fastapi import FastAPI
from sqlalchemy.engine import Engine

from webapp.core import facts, figures, reactions
from webapp.core.db import session_scope
from webapp.core.domains import domain_modules
from webapp.core.periodic import Record
from webapp.core.timeutil import utcnow
from webapp.ops import jobruns, planner_stats, retention

log = logging.getLogger(__name__)



def recorder(engine: Engine, *, clock: Callable[[], dt.datetime] = utcnow) -> Record:
    """Return the function the jobs call after each pass: it stores the pass in job_run (never raises)."""

    def record(job: str, period_s: float, error: BaseException | None) -> None:
        message = None if error is None else f"{type(error).__name__}: {error}"
        try:
            with session_scope(engine) as session:
                jobruns.record_pass(session=session, job=job, period_s=period_s, now=clock(), error=message)
        except Exception:
            # the database is down, say: the job's own error is logged already, and /healthz says why
            log.exception("jobs: could not record the %s pass", job)

    return record


def start_jobs(app: FastAPI) -> list[asyncio.Task[None]]:
    """Start every background job of `app` (its engine, spec and settings) on the running loop."""
    record = recorder(app.state.engine)
    tasks = [asyncio.create_task(run_reactions(app, record))]
    tasks += [asyncio.create_task(m.run(app, record)) for m in domain_modules("background")]
    tasks.append(asyncio.create_task(retention.run(app, record)))
    tasks.append(asyncio.create_task(planner_stats.run(app, record)))
    return tasks


async def stop_jobs(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the jobs and wait until each has cleaned up (the alerts job gives back its lease)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# The reactions job's name in job_run, /healthz and Prometheus.
REACTIONS_JOB = "reactions"
# Seconds between two looks for facts nobody woke the loop for (another process's: the CLI, a second
# server) and for retries coming due; a fact this process commits wakes the loop at once.
POLL_S = 2.0
# A pass is recorded in job_run at most this often while all goes well (each record is a write).
RECORD_EVERY_S = 30.0


async def run_reactions(app: FastAPI, record: Record | None = None) -> None:
    """Loop until cancelled: run the due reactions (webapp/core/reactions.py) whenever a fact commits, else every POLL_S.

    A request that commits a fact sets `wake` (its session's after-commit callback, from the worker
    thread, through call_soon_threadsafe), so a final grade's alerts follow it within the time of
    the reactions themselves, not of a poll (the < 5 s target of issue 42). A pass whose reactions
    failed is recorded as the job's error (failures also stay in fact_reaction until they succeed).
    """
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()

    def waker(_session: object) -> None:
        loop.call_soon_threadsafe(wake.set)

    previous = getattr(app.state, "on_facts", None)
    app.state.on_facts = waker
    facts.set_waker(waker)
    figures.set_refresh_on_read(False)  # the reactions (and ppi's sweep) refresh stored figures; reads only read them
    last_record = 0.0
    try:
        while True:
            wake.clear()
            error: BaseException | None = None
            try:
                report = await asyncio.to_thread(reactions.run_pending, app.state.engine, app.state.spec)
                if report.failed:
                    fact_id, name, message = report.failed[-1]
                    error = RuntimeError(f"{len(report.failed)} reaction(s) failed, last {name} on fact {fact_id}: {message}")
            except Exception as exc:
                error = exc
                log.exception("reactions: a pass failed; trying again in %s s", POLL_S)
            if record is not None and (error is not None or loop.time() - last_record >= RECORD_EVERY_S):
                await asyncio.to_thread(record, REACTIONS_JOB, RECORD_EVERY_S, error)
                last_record = loop.time()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=POLL_S)
    finally:
        facts.set_waker(None)
        figures.set_refresh_on_read(True)
        app.state.on_facts = previous


async def run_jobs(app: FastAPI) -> None:
    """Run the jobs until SIGTERM or SIGINT, then stop them cleanly: `draftdesk jobs`."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tasks = start_jobs(app)
    log.info("jobs: %d background jobs running", len(tasks))
    try:
        await stop.wait()
    finally:
        await stop_jobs(tasks)
        log.info("jobs: stopped")
