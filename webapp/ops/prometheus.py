"""`GET /-/metrics`: the app's own Prometheus metrics (not `/metrics`, which is the product's metrics page).

- `draftdesk_http_requests_total{method, route, status}`: requests answered.
- `draftdesk_http_request_duration_seconds{method, route, status}`: their latency (histogram).
  `route` is the route's template (`/grading/drafts/{draft_id}`), never the path, so the number of
  series stays small; `/static` for static files, `unmatched` for paths no route matched.
- `draftdesk_alert_outbox_messages{status}`: alert messages waiting (`pending`) or given up
  (`failed`), counted in the database at each scrape (the same in every process).
- `draftdesk_job_last_success_timestamp_seconds{job}`: when each background job (metrics_rebuild,
  alerts, retention) last succeeded, Unix seconds (0: never), and `draftdesk_job_failures{job}`,
  its failed passes since then, both read from job_run at each scrape (any process's passes).
  Alert on `time() - draftdesk_job_last_success_timestamp_seconds > 3 * period`.

Who may read it: an API token with the `metrics` scope (what a Prometheus scraper is given: it can
read this and nothing else) or an admin (session or token). Decision: the counters name every
route and how busy the team is, which is not for every signed-in user, and a scraper holds a bearer
token, not a session; a dedicated scope keeps that token from doing anything an admin could.

Each process counts its own requests (with `serve --workers N` a scrape sees one worker's);
Draft Desk is served by one process for a team, which this is sized for.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from sqlalchemy import func, select
from sqlmodel import col

from webapp.alerts.models import AlertOutbox
from webapp.auth.service import Principal
from webapp.core import reactions
from webapp.core.db import SessionDep
from webapp.core.timeutil import utcnow
from webapp.ops import jobruns
from webapp.web.deps import require_scope

METRICS_PATH = "/-/metrics"
SCOPE = "metrics"
OUTBOX_STATUSES = ("pending", "failed")
# Seconds; from a cached page (a few ms) to a slow export.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class AppMetrics:
    """One app's registry (its own, not the process-wide default: each app built in a process counts apart)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ("method", "route", "status")
        self.requests = Counter(
            "draftdesk_http_requests", "HTTP requests answered", labels, registry=self.registry
        )
        self.latency = Histogram(
            "draftdesk_http_request_duration_seconds",
            "Time from a request's arrival to its last byte",
            labels,
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.outbox = Gauge(
            "draftdesk_alert_outbox_messages", "Alert messages waiting or given up, by status", ("status",), registry=self.registry
        )
        self.job_success = Gauge(
            "draftdesk_job_last_success_timestamp_seconds",
            "When each background job last succeeded (Unix seconds; 0: never)",
            ("job",),
            registry=self.registry,
        )
        self.job_failures = Gauge(
            "draftdesk_job_failures", "Failed passes of each background job since its last success", ("job",), registry=self.registry
        )
        self.reaction_failures = Gauge(
            "draftdesk_reaction_failing_facts", "Facts whose reaction has failed and not yet succeeded, by reaction",
            ("reaction",), registry=self.registry,
        )
        self.facts_pending = Gauge(
            "draftdesk_facts_pending", "Facts still waiting for a reaction (issue 42)", registry=self.registry
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered request (called by webapp.ops.logs.RequestLog)."""
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route, str(status)).observe(seconds)


router = APIRouter(include_in_schema=False)


@router.get(METRICS_PATH)
def prometheus_metrics(
    request: Request, session: SessionDep, principal: Principal = Depends(require_scope(SCOPE, "admin"))
) -> Response:
    """Serve the metrics in Prometheus' text format (the outbox gauge is counted now)."""
    metrics: AppMetrics = request.app.state.app_metrics
    rows = session.connection().execute(
        select(col(AlertOutbox.status), func.count())
        .where(col(AlertOutbox.status).in_(OUTBOX_STATUSES))
        .group_by(col(AlertOutbox.status))
    ).all()
    counts: dict[str, int] = {status: n for status, n in rows}
    for status in OUTBOX_STATUSES:
        metrics.outbox.labels(status).set(counts.get(status, 0))
    for job in jobruns.job_states(session=session, now=utcnow()):
        metrics.job_success.labels(job.job).set(job.last_success_at.timestamp() if job.last_success_at else 0)
        metrics.job_failures.labels(job.job).set(job.failures)
    failing = {f.reaction: f.facts for f in reactions.failing(session=session)}
    for r in reactions.registry():
        metrics.reaction_failures.labels(r.name).set(failing.get(r.name, 0))
    metrics.facts_pending.set(reactions.pending_count(session=session))
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
