"""Alerts' reactions: queue the notifications of what changed (new regression alerts, a hallucination decision)."""

from __future__ import annotations

from pydantic import JsonValue
from sqlmodel import Session

from webapp.alerts import outbox
from webapp.core.reactions import FactPublic, Reaction
from webapp.core.spec import EvalSpec


def notify(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
    """Record the alert transitions the fact may have caused and queue their notifications."""
    outbox.notify_changes(session=session, spec=spec)
    return None


REACTIONS: tuple[Reaction, ...] = (
    Reaction(name="alerts.notify_regression", fact="regression_alerts_raised", handle=notify),
    Reaction(name="alerts.notify_hallucination", fact="hallucination_decided", handle=notify),
    Reaction(name="alerts.notify_metrics", fact="metrics_rebuilt", handle=notify),
)
