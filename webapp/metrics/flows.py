"""What follows an ingested batch: the aggregates and alert evaluation, now or in serve's rebuilder."""

from __future__ import annotations

from sqlmodel import Session

from webapp.alerts import service as alerts_service
from webapp.metrics import stale
from webapp.spec import EvalSpec


def after_ingest(*, session: Session, spec: EvalSpec, background: bool) -> None:
    """Rebuild stale days and queue alert transitions in this transaction, unless a background rebuilder will.

    With background jobs (`draftdesk serve`), a batch stops at its insert and stale-day marks: the
    rebuilder coalesces the rebuilds of many batches and evaluates the alerts right after
    (within webapp.metrics.background.REBUILD_INTERVAL_S). Without one (tests, scripts, `serve
    --no-background`), nothing else would rebuild, so the request does it, as before.
    """
    if background:
        return
    while stale.rebuild_stale(session=session, spec=spec):
        pass
    alerts_service.notify_changes(session=session, spec=spec)  # alert transitions -> outbox, same transaction
