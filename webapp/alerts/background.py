"""The background job `draftdesk serve` runs: periodic evaluation (one process at a time) and delivery (every process)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import socket
import uuid
from dataclasses import dataclass

from fastapi import FastAPI
from sqlalchemy.engine import Engine

from webapp.alerts import delivery, outbox
from webapp.core.db import session_scope
from webapp.core.periodic import Record, every
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow

# The job's name in job_run, /healthz and Prometheus.
JOB = "alerts"


def holder_id() -> str:
    """Return a name for this process, unique across hosts and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class PassReport:
    """What one pass did."""

    evaluated: bool
    transitions: int
    queued: int
    delivery: delivery.DeliveryReport


def run_pass(
    *,
    engine: Engine,
    spec: EvalSpec,
    base_url: str,
    secret_key: str,
    holder: str,
    lease_ttl_s: float,
    now: dt.datetime | None = None,
    allow_private_targets: bool = False,
) -> PassReport:
    """Evaluate (only while holding the lease), then deliver what is due."""
    now = now or utcnow()
    evaluated = outbox.acquire_lease(engine=engine, holder=holder, ttl_s=lease_ttl_s, now=now)
    transitions = queued = 0
    if evaluated:
        # write=False: the evaluation reads for a while and writes a few rows; a writer session would
        # hold SQLite's one write lock for all of it, and the events batches queued behind it (issue 36,
        # docs/decisions/0004-plain-optimisations-removed.md). Its writes take the lock when they come.
        with session_scope(engine, write=False) as session:
            result = outbox.record_transitions(session=session, spec=spec, now=now)
            transitions, queued = len(result.transitions), len(result.messages)
    report = delivery.deliver_due(engine=engine, base_url=base_url, secret_key=secret_key, now=now,
                                  allow_private_targets=allow_private_targets)
    return PassReport(evaluated, transitions, queued, report)


async def run(app: FastAPI, record: Record | None = None) -> None:
    """Loop until cancelled: one pass every alerts_interval_seconds, in a thread (the database calls block).

    After each pass `record(JOB, interval, error)` stores how it went (webapp/app/jobs.py).
    """
    settings = app.state.settings
    interval = float(settings.alerts_interval_seconds)
    holder = holder_id()
    engine = app.state.engine

    def one_pass() -> PassReport:
        return run_pass(
            engine=engine,
            spec=app.state.spec,
            base_url=settings.base_url,
            secret_key=settings.secret_key,
            holder=holder,
            lease_ttl_s=3 * interval,
            allow_private_targets=settings.alerts_allow_private_targets,
        )

    try:
        await every(interval, JOB, one_pass, record)
    finally:
        await asyncio.to_thread(outbox.release_lease, engine=engine, holder=holder)
