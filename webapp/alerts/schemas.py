"""JSON API shapes of the notification channels."""

from __future__ import annotations

from pydantic import BaseModel, Field

from webapp.web.api_schemas import Timestamp


class DeliveryPublic(BaseModel):
    """One delivery of a notification to a channel: its state, attempts and the alerts it carried."""

    id: int
    state: str
    attempts: int
    created_at: Timestamp
    next_attempt_at: Timestamp | None
    sent_at: Timestamp | None
    last_status: int | None
    last_error: str
    items: list[str] = Field(description="One `alert: state` line per alert the notification carried")


class ChannelPublic(BaseModel):
    """A notification channel with its last five deliveries (newest first)."""

    id: int
    name: str
    kind: str
    target: str
    topics: list[str]
    send_resolved: bool
    deliveries: list[DeliveryPublic]
