"""JSON API shapes of the notification channels."""

from __future__ import annotations

from pydantic import Field

from webapp.alerts.models import ChannelKind
from webapp.alerts.outbox import DeliveryState
from webapp.core.public import PublicModel
from webapp.web.api_schemas import StoredTimestamp


class DeliveryPublic(PublicModel):
    """One delivery of a notification to a channel: its state, attempts and the alerts it carried."""

    id: int
    state: DeliveryState
    attempts: int
    created_at: StoredTimestamp
    next_attempt_at: StoredTimestamp | None
    sent_at: StoredTimestamp | None
    last_status: int | None
    last_error: str
    items: list[str] = Field(description="One `alert: state` line per alert the notification carried")


class ChannelPublic(PublicModel):
    """A notification channel with its last five deliveries (newest first)."""

    id: int
    name: str
    kind: ChannelKind
    target: str
    topics: list[str]
    send_resolved: bool
    deliveries: list[DeliveryPublic]
