"""Admin page: notification channels, their last deliveries, a test button, add and remove."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from webapp.alerts import channels as alerts_channels
from webapp.alerts import delivery, outbox
from webapp.alerts.models import CHANNEL_KINDS, AlertChannel
from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.web.deps import require_role
from webapp.web.flash import FlashKind, consume_flash, read_flash, redirect_with_flash
from webapp.web.templating import render_view

router = APIRouter()
Admin = Annotated[Principal, Depends(require_role("admin"))]
# File channels write on the server's disk: they are for the demo and the CLI, not the web form.
WEB_KINDS = tuple(k for k in CHANNEL_KINDS if k != "file")
PAGE = "/admin/alerts"
# Post-redirect-get: after adding, testing or removing a channel the answer is a 303 to the page,
# and what to say there rides in webapp.web.flash's signed, short-lived cookie (read once), so a reload
# repeats no POST and the URL carries no message.


def _redirect_with_flash(request: Request, *, text: str, kind: FlashKind = "ok", secret_for: int | None = None) -> Response:
    """Answer a POST with 303 to the channels page, carrying the message to show there once."""
    return redirect_with_flash(request, PAGE, text=text, kind=kind, ref=secret_for)


@dataclass(frozen=True)
class ChannelForm:
    """What was typed into the add-channel form, shown again with the error (empty on a first visit)."""

    name: str = ""
    kind: str = ""
    url: str = ""
    topics: list[str] = field(default_factory=lambda: ["all"])
    send_resolved: bool = True
    smtp_host: str = ""
    smtp_port: str = ""
    security: str = ""
    username: str = ""
    password_env: str = ""
    from_addr: str = ""
    to: str = ""


@dataclass(frozen=True)
class ChannelsView:
    """The channels page: each channel with its last deliveries, the outbox counts, the add form."""

    rows: list[outbox.ChannelDeliveries]
    kinds: tuple[str, ...]
    topics: tuple[str, ...]
    counts: dict[str, int]
    base_url: str
    background: bool  # this process runs the delivery worker
    form: ChannelForm = field(default_factory=ChannelForm)
    error: str | None = None
    flash: str | None = None  # base.html's banner: what the last action did
    secret: str | None = None  # a webhook's signing secret, shown once after adding it
    secret_for: str | None = None



def channels_view(
    request: Request, session: SessionDep, *, form: ChannelForm | None = None, error: str | None = None,
    flash: str | None = None, secret: str | None = None, secret_for: str | None = None,
) -> ChannelsView:
    """Build the channels page from the channels, their deliveries and the outbox counts."""
    settings = request.app.state.settings
    return ChannelsView(
        rows=outbox.channels_with_deliveries(session=session), kinds=WEB_KINDS, topics=alerts_channels.valid_topics(),
        counts=outbox.outbox_counts(session=session), base_url=settings.base_url,
        background=settings.background_jobs or settings.separate_jobs, form=form or ChannelForm(), error=error,
        flash=flash, secret=secret, secret_for=secret_for,
    )


def _page(request: Request, view: ChannelsView, *, status_code: int = 200) -> HTMLResponse:
    return render_view(request, "alerts/channels.html", view, status_code=status_code)


@router.get("/admin/alerts", response_class=HTMLResponse, name="alerts_channels")
def channels_page(request: Request, session: SessionDep, principal: Admin) -> HTMLResponse:
    """List notification channels with their last deliveries; a form adds one."""
    message = read_flash(request)
    error = flash = secret = secret_for = None
    if message is not None:
        error, flash = (message.text, None) if message.kind == "error" else (None, message.text)
        ch = session.get(AlertChannel, message.ref) if message.ref is not None else None
        if ch is not None and ch.kind == "webhook":
            secret = alerts_channels.signing_secret(ch, request.app.state.settings.secret_key)
            secret_for = ch.name
    response = _page(request, channels_view(request, session, error=error, flash=flash, secret=secret, secret_for=secret_for))
    if message is not None:
        response.headers["Cache-Control"] = "no-store"  # a signing secret must not linger in caches
    return consume_flash(request, response)


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
    form = ChannelForm(name=name, kind=kind, url=url, topics=topic or ["all"], send_resolved=bool(send_resolved),
                       smtp_host=smtp_host, smtp_port=smtp_port, security=security, username=username,
                       password_env=password_env, from_addr=from_addr, to=to)
    try:
        if kind not in WEB_KINDS:
            raise alerts_channels.AlertsError(f"kind: must be one of {', '.join(WEB_KINDS)}, not {kind!r}")
        email = {"host": smtp_host, "port": smtp_port or None, "security": security, "username": username,
                 "password_env": password_env, "from_addr": from_addr, "to": to}
        ch = alerts_channels.add_channel(session=session, name=name, kind=kind, target=url, topics=topic,
                                 send_resolved=bool(send_resolved), email=email if kind == "email" else None,
                                 allow_private_targets=request.app.state.settings.alerts_allow_private_targets)
    except alerts_channels.AlertsError as exc:
        session.rollback()
        return _page(request, channels_view(request, session, form=form, error=str(exc)), status_code=400)
    return _redirect_with_flash(request, text=f"Channel {ch.name} added.", secret_for=ch.id)


@router.post("/admin/alerts/channels/{channel_id}/test", response_class=HTMLResponse)
def channels_test(request: Request, channel_id: int, session: SessionDep, principal: Admin) -> Response:
    """Send a test message to a channel now and show what the receiver answered."""
    try:
        ch = alerts_channels.get_channel(session=session, ref=channel_id)
    except alerts_channels.AlertsError as exc:
        raise HTTPException(404, detail=str(exc)) from exc
    settings = request.app.state.settings
    result = delivery.send_test(ch, base_url=settings.base_url, secret_key=settings.secret_key,
                                allow_private_targets=settings.alerts_allow_private_targets, session=session)
    if result.ok:
        status = f" (HTTP {result.status})" if result.status and ch.kind != "email" else ""
        return _redirect_with_flash(request, text=f"Test message delivered to {ch.name}{status}.")
    return _redirect_with_flash(request, text=f"Test message to {ch.name} failed: {result.error}", kind="error")


@router.post("/admin/alerts/channels/{channel_id}/delete", response_class=HTMLResponse)
def channels_delete(request: Request, channel_id: int, session: SessionDep, principal: Admin) -> Response:
    """Remove a channel and its queued messages."""
    try:
        ch = alerts_channels.remove_channel(session=session, ref=channel_id)
    except alerts_channels.AlertsError as exc:
        raise HTTPException(404, detail=str(exc)) from exc
    return _redirect_with_flash(request, text=f"Channel {ch.name} removed.")
