"""JSON API: notification channels with their last deliveries."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from webapp.alerts import outbox
from webapp.alerts.schemas import ChannelPublic
from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.web.deps import require_role

router = APIRouter(tags=["alerts"])


@router.get("/alerts/channels", response_model=list[ChannelPublic])
def get_channels(session: SessionDep, principal: Principal = Depends(require_role("admin"))) -> list[dict[str, Any]]:
    """List notification channels with their last five deliveries (newest first)."""
    out = []
    for row in outbox.channels_with_deliveries(session=session):
        ch = row["channel"]
        out.append(
            {
                "id": ch.id, "name": ch.name, "kind": ch.kind, "topics": ch.topics, "send_resolved": ch.send_resolved,
                "target": ch.target or f"smtp://{ch.config.get('host')}:{ch.config.get('port')}",
                "deliveries": [
                    {
                        "id": m.id, "state": state, "attempts": m.attempts, "created_at": m.created_at.isoformat(),
                        "next_attempt_at": m.next_attempt_at.isoformat() if state in ("retrying", "queued") else None,
                        "sent_at": m.sent_at.isoformat() if m.sent_at else None, "last_status": m.last_status,
                        "last_error": m.last_error, "items": [f"{it['alert']}: {it['state']}" for it in m.payload["items"]],
                    }
                    for m, state in row["deliveries"]
                ],
            }
        )
    return out
