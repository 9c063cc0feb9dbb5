"""SQLite's query planner statistics (`ANALYZE`), gathered at start-up and then hourly by the server's jobs.

Why: without statistics SQLite's planner guesses from the indexes alone, and for the grading
queue it guesses wrong. "The next drafts with a free place" (webapp/grading/queue_statements.py,
candidates_stmt) is answered by walking the run's drafts through the run index and sorting them
all (1.0-1.8 ms for a 1,540-draft run, in the write lock of every save-and-next); with statistics
it reads the dataset's cases in queue order and stops at the first free drafts (0.13 ms, the same
rows), measured on the busy-hour benchmark's database (bench_realistic, 7 December). (On 6
December it was the held drafts' query; that one now goes through the grader's reservations
either way.) The SQLite documentation's
advice for long-running applications is to refresh the statistics periodically; `analysis_limit`
makes `ANALYZE` sample about that many rows of each index instead of reading them all, so a pass
costs milliseconds however many events are stored (10 ms on the benchmark's database) and holds
the write lock only that long. PostgreSQL gathers its own (autovacuum's autoanalyze): nothing runs there.
"""

from __future__ import annotations

from fastapi import FastAPI
from sqlalchemy.engine import Engine

from webapp.core.db import is_sqlite, writer
from webapp.core.periodic import Record, every

# The job's name in job_run, /healthz and Prometheus.
JOB = "planner_stats"
# Rows of each index ANALYZE samples (SQLite's documentation suggests 100-1000 with a limit).
ANALYSIS_LIMIT = 1000
# How often the statistics are refreshed (the first pass runs at start-up).
INTERVAL_S = 3600.0


def refresh(engine: Engine) -> bool:
    """Refresh SQLite's planner statistics (sampled: ANALYSIS_LIMIT rows per index); False on PostgreSQL, which keeps its own."""
    if not is_sqlite(engine):
        return False
    with writer(engine).connect() as conn:  # ANALYZE writes sqlite_stat1: a writer's transaction (webapp/core/db.py)
        conn.exec_driver_sql(f"PRAGMA analysis_limit={ANALYSIS_LIMIT}")
        conn.exec_driver_sql("ANALYZE")
        conn.commit()
    return True


async def run(app: FastAPI, record: Record | None = None) -> None:
    """Refresh the statistics at start-up and then every INTERVAL_S until cancelled (in a thread); record each pass."""
    engine: Engine = app.state.engine
    if not is_sqlite(engine):
        return
    await every(INTERVAL_S, JOB, lambda: refresh(engine), record)
