"""The background job `draftdesk serve` runs for PPI: store again the figures whose inputs changed without a fact.

The reactions to "draft_finalised" and "sample_drawn" (webapp/ppi/reactions.py) keep the stored
figures current after every grade and draw; this sweep takes what changed without a fact: figures
from before the table existed, a changed plan file, a judge pass recorded after a sample. It runs
at start-up and every SWEEP_INTERVAL_S; a pass compares each sampled run's fingerprint (one
aggregate query) with its stored figure's and recomputes the stale ones only.
"""

from __future__ import annotations

from fastapi import FastAPI

from webapp.core.db import session_scope
from webapp.core.periodic import Record, every
from webapp.ppi.stored_figures import refresh_stale

SWEEP_INTERVAL_S = 30.0
# The job's name in job_run, /healthz and Prometheus.
JOB = "figures"


async def run(app: FastAPI, record: Record | None = None) -> None:
    """Loop until cancelled: one sweep of stale figures every SWEEP_INTERVAL_S, in a thread (the database calls block)."""
    engine = app.state.engine

    def sweep() -> list[int]:
        with session_scope(engine) as session:
            return refresh_stale(session=session, spec=app.state.spec)

    await every(SWEEP_INTERVAL_S, JOB, sweep, record)
