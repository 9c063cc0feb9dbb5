"""The background jobs: each domain's `background.run(app)` (metrics rebuild, alert evaluation and
delivery) and the retention job.

They run inside `draftdesk serve` by default, or as their own process, `draftdesk jobs`, beside
`serve --separate-jobs` (the team deployment in docs/deployment.md). Decision (issue 26): the
metrics rebuild re-aggregates a day's events with pandas (0.4 s at 12,000 events today, ~1.7 s
at 50,000), and inside the web process the requests it overlaps wait for the GIL: in the
realistic benchmark the slowest saves fell on the rebuild passes. A second process is the
standard answer (Langfuse runs a web and a worker container the same way); one process stays
the default for a demo or a small team.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

from webapp.domains import domain_modules
from webapp.ops import retention

log = logging.getLogger(__name__)


def start_jobs(app: Any) -> list[asyncio.Task[None]]:
    """Start every background job of `app` (its engine, spec and settings) on the running loop."""
    tasks = [asyncio.create_task(m.run(app)) for m in domain_modules("background")]
    tasks.append(asyncio.create_task(retention.run(app)))
    return tasks


async def stop_jobs(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the jobs and wait until each has cleaned up (the alerts job gives back its lease)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def run_jobs(app: Any) -> None:
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
