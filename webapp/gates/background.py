"""The background job `draftdesk serve` runs for the gates: store again the gate criteria whose inputs changed without a fact.

The reactions to "run_checked" and "draft_finalised" (webapp/gates/reactions.py) keep a run's
stored gate criteria (webapp/gates/stored_report.py) current; this sweep takes what changed
without a fact: a regression case added, a run imported, a changed plan file, reports from before
the table. It runs at start-up and every SWEEP_INTERVAL_S; a pass compares each launch
candidate's fingerprint (one aggregate query) with its stored one and recomputes the stale ones only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from fastapi import FastAPI

from webapp.core.db import session_scope
from webapp.gates.stored_report import refresh_stale

log = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 30.0
# The job's name in job_run, /healthz and Prometheus.
JOB = "gate_reports"


async def run(app: FastAPI, record: Callable[[str, float, BaseException | None], None] | None = None) -> None:
    """Loop until cancelled: one sweep of stale gate criteria every SWEEP_INTERVAL_S, in a thread (the database calls block)."""
    engine = app.state.engine

    def sweep() -> list[int]:
        with session_scope(engine) as session:
            return refresh_stale(session=session, spec=app.state.spec)

    while True:
        error: BaseException | None = None
        try:
            await asyncio.to_thread(sweep)
        except Exception as exc:
            error = exc
            log.exception("gates: refreshing stale gate reports failed; trying again in %s s", SWEEP_INTERVAL_S)
        if record is not None:
            await asyncio.to_thread(record, JOB, SWEEP_INTERVAL_S, error)
        await asyncio.sleep(SWEEP_INTERVAL_S)
