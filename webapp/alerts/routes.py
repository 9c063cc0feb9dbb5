"""JSON API: notification channels with their last deliveries."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from webapp.alerts import outbox
from webapp.alerts.items import email_config, payload_of
from webapp.alerts.schemas import ChannelPublic, DeliveryPublic
from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.web.deps import require_role

router = APIRouter(tags=["alerts"])


@router.get(
    "/alerts/channels",
    summary="List the notification channels",
    description=(
        "The admin lists the alert notification channels with their last five deliveries (newest first), "
        "to see that alerts reach people."
    ),
    response_model=list[ChannelPublic],
)
def get_channels(session: SessionDep, principal: Principal = Depends(require_role("admin"))) -> list[ChannelPublic]:
    """List notification channels with their last five deliveries (newest first)."""
    return [_channel_public(row) for row in outbox.channels_with_deliveries(session=session)]


def _channel_public(row: outbox.ChannelDeliveries) -> ChannelPublic:
    ch = row.channel
    target = ch.target
    if not target:
        cfg = email_config(ch)
        target = f"smtp://{cfg.get('host')}:{cfg.get('port')}"
    return ChannelPublic.of(ch, target=target, deliveries=[_delivery_public(d) for d in row.deliveries])


def _delivery_public(d: outbox.Delivery) -> DeliveryPublic:
    m = d.message
    return DeliveryPublic.of(
        m, state=d.state, next_attempt_at=m.next_attempt_at if d.state in ("retrying", "queued") else None,
        items=[f"{it['alert']}: {it['state']}" for it in payload_of(m)["items"]],
    )
