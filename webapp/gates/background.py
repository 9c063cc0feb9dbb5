"""The background job `draftdesk serve` runs for the gates: store again the gate criteria whose inputs changed.

The reaction to "run_checked" (webapp/gates/reactions.py) stores a run's gate criteria
(webapp/gates/stored_report.py) after a check; this sweep takes everything else: final grades, a
regression case added, a run imported, a changed plan file, reports from before the table. It runs
at start-up and every SWEEP_INTERVAL_S; a pass compares each launch candidate's fingerprint (one
aggregate query) with its stored one and recomputes the stale ones only, each computed in a read
transaction and stored in a short write one (stored_report.refresh_outside_write_lock).

Decision (3 December, benchmarks/bench_realistic.py): a reaction to every final grade recomputed
a 1,540-draft run's criteria inside the reaction's write transaction, about 0.4 s each, and
tripled the busy hour's save p95 on SQLite (133 -> 377 ms) and events p95 (106 -> 342 ms). The
sweep recomputes a run at most once per SWEEP_INTERVAL_S, outside the write lock; the gate pages
say "updating" for at most that long after a grade.
"""

from __future__ import annotations

from fastapi import FastAPI

from webapp.core.db import session_scope
from webapp.core.periodic import Record, every
from webapp.gates.stored_report import refresh_outside_write_lock, stale_runs

SWEEP_INTERVAL_S = 5.0
# The job's name in job_run, /healthz and Prometheus.
JOB = "gate_reports"


async def run(app: FastAPI, record: Record | None = None) -> None:
    """Loop until cancelled: one sweep of stale gate criteria every SWEEP_INTERVAL_S, in a thread (the database calls block)."""
    engine = app.state.engine

    def sweep() -> list[int]:
        with session_scope(engine, write=False) as session:
            stale = stale_runs(session=session, spec=app.state.spec)
        return [r for r in stale if refresh_outside_write_lock(engine=engine, spec=app.state.spec, run_id=r)]

    await every(SWEEP_INTERVAL_S, JOB, sweep, record)
