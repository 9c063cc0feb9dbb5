"""The loop every periodic background job runs: a pass in a thread, its failure logged, the pass recorded, a sleep.

The jobs `draftdesk serve` starts (webapp/app/jobs.py: the metrics rebuild, the alerts, the stored
figures and gate reports, retention, SQLite's planner statistics) differ only in what a pass does
and how often; this holds the rest once. A pass that raises is logged and recorded as the job's
error (job_run, /healthz, Prometheus: webapp/ops/jobruns.py) and the loop goes on: the next pass
comes after the same period, so a broken job keeps being tried and keeps being seen to fail.
The first pass runs at once (at start-up).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

# What a job calls after each pass: its name, its period in seconds, and the error it failed with (or None).
Record = Callable[[str, float, BaseException | None], None]


async def every(period_s: float, job: str, work: Callable[[], object], record: Record | None) -> None:
    """Run `work()` in a thread now and then every `period_s` seconds until cancelled; record each pass as `job`.

    `work` blocks (database calls), hence the thread: the event loop keeps serving requests.
    """
    while True:
        error: BaseException | None = None
        try:
            await asyncio.to_thread(work)
        except Exception as exc:
            error = exc
            log.exception("%s: a pass failed; trying again in %s s", job, period_s)
        if record is not None:
            await asyncio.to_thread(record, job, period_s, error)
        await asyncio.sleep(period_s)
