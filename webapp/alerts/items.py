"""The typed shapes that travel through the alerts: one notifiable transition (an item), the outbox
message that groups items, and an email channel's settings.

They are TypedDicts, not models: the outbox stores the message and the channel its settings in JSON
columns (webapp/alerts/models.py), so what is written and read back stays a plain dict; the types
say which keys it has.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict, cast

from webapp.alerts.models import AlertChannel, AlertOutbox


class AlertItem(TypedDict):
    """One notifiable transition: a metric alert firing or resolved, no data, a regression, a confirmed
    hallucination, a week's human-graded quality below target (or the channel test)."""

    key: str  # stable: the `alert_notice` ledger records it once
    kind: str  # metric | no_data | regression | hallucination | human_quality | test
    topic: str  # what a channel subscribes to (a metric's name, or the kind)
    state: str  # firing | resolved | raised | confirmed | test
    alert: str
    rule: str
    window: str
    value: float | None
    threshold: float | None
    op: str
    value_text: NotRequired[str]
    threshold_text: NotRequired[str]
    days: list[str]  # ISO days behind the transition
    segment: str
    path: str  # the page to open, below the base URL


class AlertPayload(TypedDict):
    """An outbox message: the items found in one pass for one channel."""

    items: list[AlertItem]
    created_at: NotRequired[str]


class EmailConfig(TypedDict):
    """An email channel's settings, as checked by webapp/alerts/channels.py (the password is read from
    the environment variable `password_env` at send time, never stored)."""

    host: str
    port: int
    security: str  # starttls | tls | none
    username: str
    password_env: str
    from_addr: str
    to: list[str]
    ca_file: str


def payload_of(msg: AlertOutbox) -> AlertPayload:
    """Return an outbox message's payload (stored as JSON by `outbox.enqueue` in this shape)."""
    return cast(AlertPayload, msg.payload)


def email_config(channel: AlertChannel) -> EmailConfig:
    """Return an email channel's settings (stored as JSON by `channels.add_channel` in this shape)."""
    return cast(EmailConfig, channel.config)
