"""Admin page: notification channels, their last deliveries, a test button, add and remove."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from webapp.alerts import channels as alerts_channels
from webapp.alerts import delivery, outbox
from webapp.alerts.models import CHANNEL_KINDS
from webapp.auth.service import Principal
from webapp.db import SessionDep
from webapp.deps import require_role
from webapp.templating import render

router = APIRouter()
Admin = Annotated[Principal, Depends(require_role("admin"))]
# File channels write on the server's disk: they are for the demo and the CLI, not the web form.
WEB_KINDS = tuple(k for k in CHANNEL_KINDS if k != "file")


def _page(request: Request, session: Any, *, status_code: int = 200, **extra: Any) -> HTMLResponse:
    settings = request.app.state.settings
    ctx = {
        "rows": outbox.channels_with_deliveries(session=session),
        "kinds": WEB_KINDS,
        "topics": alerts_channels.valid_topics(),
        "counts": outbox.outbox_counts(session=session),
        "base_url": settings.base_url,
        "background": settings.background_jobs,
        "form": {},
        "error": None,
        "flash": None,
        "secret": None,
    }
    ctx.update(extra)
    return render(request, "alerts/channels.html", ctx, status_code=status_code)


@router.get("/admin/alerts", response_class=HTMLResponse, name="alerts_channels")
def channels_page(request: Request, session: SessionDep, principal: Admin, removed: str = "") -> HTMLResponse:
    """List notification channels with their last deliveries; a form adds one."""
    return _page(request, session, flash=f"Channel {removed} removed." if removed else None)


@router.post("/admin/alerts/channels", response_class=HTMLResponse)
def channels_create(
    request: Request,
    session: SessionDep,
    principal: Admin,
    name: Annotated[str, Form()] = "",
    kind: Annotated[str, Form()] = "slack",
    url: Annotated[str, Form()] = "",
    topic: Annotated[list[str] | None, Form()] = None,
    send_resolved: Annotated[str, Form()] = "",
    smtp_host: Annotated[str, Form()] = "",
    smtp_port: Annotated[str, Form()] = "",
    security: Annotated[str, Form()] = "starttls",
    username: Annotated[str, Form()] = "",
    password_env: Annotated[str, Form()] = "",
    from_addr: Annotated[str, Form()] = "",
    to: Annotated[str, Form()] = "",
) -> Response:
    """Add a channel; a webhook's signing secret is shown on the answer page."""
    form = {"name": name, "kind": kind, "url": url, "topics": topic or ["all"], "send_resolved": bool(send_resolved),
            "smtp_host": smtp_host, "smtp_port": smtp_port, "security": security, "username": username,
            "password_env": password_env, "from_addr": from_addr, "to": to}
    try:
        if kind not in WEB_KINDS:
            raise alerts_channels.AlertsError(f"kind: must be one of {', '.join(WEB_KINDS)}, not {kind!r}")
        email = {"host": smtp_host, "port": smtp_port or None, "security": security, "username": username,
                 "password_env": password_env, "from_addr": from_addr, "to": to}
        ch = alerts_channels.add_channel(session=session, name=name, kind=kind, target=url, topics=topic,
                                 send_resolved=bool(send_resolved), email=email if kind == "email" else None)
    except alerts_channels.AlertsError as exc:
        session.rollback()
        return _page(request, session, error=str(exc), form=form, status_code=400)
    secret = alerts_channels.signing_secret(ch, request.app.state.settings.secret_key) if ch.kind == "webhook" else None
    return _page(request, session, flash=f"Channel {ch.name} added.", secret=secret, secret_for=ch.name)


@router.post("/admin/alerts/channels/{channel_id}/test", response_class=HTMLResponse)
def channels_test(request: Request, channel_id: int, session: SessionDep, principal: Admin) -> HTMLResponse:
    """Send a test message to a channel now and show what the receiver answered."""
    try:
        ch = alerts_channels.get_channel(session=session, ref=channel_id)
    except alerts_channels.AlertsError as exc:
        raise HTTPException(404, detail=str(exc)) from exc
    settings = request.app.state.settings
    result = delivery.send_test(ch, base_url=settings.base_url, secret_key=settings.secret_key)
    if result.ok:
        status = f" (HTTP {result.status})" if result.status and ch.kind != "email" else ""
        return _page(request, session, flash=f"Test message delivered to {ch.name}{status}.")
    return _page(request, session, error=f"Test message to {ch.name} failed: {result.error}")


@router.post("/admin/alerts/channels/{channel_id}/delete", response_class=HTMLResponse)
def channels_delete(request: Request, channel_id: int, session: SessionDep, principal: Admin) -> Response:
    """Remove a channel and its queued messages."""
    try:
        ch = alerts_channels.remove_channel(session=session, ref=channel_id)
    except alerts_channels.AlertsError as exc:
        raise HTTPException(404, detail=str(exc)) from exc
    return RedirectResponse("/admin/alerts?" + urlencode({"removed": ch.name}), status_code=303)
