"""Demo: a channel that writes notifications to a local JSON-lines file, and the demo's transitions queued for it."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from sqlmodel import Session, col

from webapp.alerts import channels, outbox
from webapp.alerts.models import AlertChannel
from webapp.core.config import DATA_DIR
from webapp.core.demo_context import DemoContext
from webapp.core.spec import EvalSpec

DEMO_CHANNEL = "Demo log"
DEMO_LOG_NAME = "demo-notifications.jsonl"


def demo_log_path(session: Session) -> Path:
    """Return the demo log: beside the demo's SQLite file, else in the data directory."""
    url = session.get_bind().engine.url
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        return Path(url.database).resolve().parent / DEMO_LOG_NAME
    return DATA_DIR / DEMO_LOG_NAME


def seed(*, session: Session, spec: EvalSpec, ctx: DemoContext) -> None:
    """Add the demo log channel and queue the demo's alert transitions (reject-rate alert, confirmed hallucination)."""
    if session.execute(select(AlertChannel).where(col(AlertChannel.name) == DEMO_CHANNEL)).first() is None:
        channels.add_channel(session=session, name=DEMO_CHANNEL, kind="file", target=str(demo_log_path(session)))
    outbox.record_transitions(session=session, spec=spec)


def where_notifications_go(*, session: Session) -> list[str]:
    """Return one line per channel saying where its notifications go (printed by `draftdesk demo`)."""
    lines = []
    for ch in channels.list_channels(session=session):
        where = ch.target if ch.kind != "email" else ", ".join(ch.config.get("to", []))
        lines.append(f"  {ch.name} ({ch.kind}): {where}")
    return lines
