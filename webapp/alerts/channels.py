"""Notification channels: their settings (checked field by field), the topics they subscribe to, and webhook signing."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping

import httpx
from sqlalchemy import select
from sqlmodel import Session, col

from webapp.alerts import targets
from webapp.alerts.items import AlertItem, EmailConfig
from webapp.alerts.models import CHANNEL_KINDS, TOPIC_ALL, AlertChannel, AlertOutbox
from webapp.core.db import id_from_ref, table_of
from webapp.core.spec import METRIC_NAMES

# Topics a channel may subscribe to, besides each metric's name.
# "human_quality": the production weeks' human-graded quality alert (not in "metrics", the online metrics' group).
GROUP_TOPICS: tuple[str, ...] = (TOPIC_ALL, "metrics", "no_data", "regression", "hallucination", "human_quality")
SECURITY_MODES: tuple[str, ...] = ("starttls", "tls", "none")
# The only environment variables an email channel may read its SMTP password from. An admin names
# the variable; without the fixed prefix they could name DRAFTDESK_SECRET_KEY or the database URL,
# point the channel at their own server and read the value in its AUTH exchange. The operator puts
# the password there (e.g. DRAFTDESK_SMTP_PASSWORD); no Settings field starts with smtp_, so the
# prefix holds no other configuration.
SMTP_PASSWORD_ENV_PREFIX = "DRAFTDESK_SMTP_"
_ENV_NAME = re.compile(r"[A-Z0-9_]+")


class AlertsError(ValueError):
    """Bad channel settings or an unknown channel; the message names the field."""


def valid_topics() -> tuple[str, ...]:
    """Return every topic a channel may subscribe to."""
    return GROUP_TOPICS + METRIC_NAMES


def _check_url(url: str, *, allow_private_targets: bool) -> str:
    """Check a webhook/Slack URL as delivery will read it: httpx's parser, the one that sends (issue 41)."""
    try:
        parts = httpx.URL(url.strip())
    except (httpx.InvalidURL, ValueError) as exc:
        raise AlertsError(f"url: not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.host:
        raise AlertsError(f"url: must be an http(s) URL, not {url!r}")
    _check_host(parts.host, field="url", allow_private_targets=allow_private_targets)
    return url.strip()


def _check_host(host: str, *, field: str, allow_private_targets: bool) -> None:
    """Refuse a host that is a non-public address in any form (or a malformed numeric one), naming the field."""
    try:
        if allow_private_targets:
            targets.literal(host)  # a malformed numeric form is refused even so: no send could use it
        else:
            targets.check_saved_host(host, field=field)
    except targets.TargetRefused as exc:
        msg = str(exc)
        raise AlertsError(msg if msg.startswith(f"{field}: ") else f"{field}: {msg}") from None


def check_password_env(name: str, security: str) -> str | None:
    """Return why an SMTP password may not be read from this variable or sent this way, or None when it may."""
    if not (name.startswith(SMTP_PASSWORD_ENV_PREFIX) and len(name) > len(SMTP_PASSWORD_ENV_PREFIX) and _ENV_NAME.fullmatch(name)):
        return (
            f"password_env: must name a variable starting with {SMTP_PASSWORD_ENV_PREFIX} "
            f"(e.g. {SMTP_PASSWORD_ENV_PREFIX}PASSWORD, set by the operator), not {name!r}"
        )
    if security == "none":
        return "security: a login needs starttls or tls; with none the password would cross the network in clear"
    return None


def add_channel(
    *,
    session: Session,
    name: str,
    kind: str,
    target: str = "",
    topics: list[str] | None = None,
    send_resolved: bool = True,
    email: Mapping[str, object] | None = None,
    allow_private_targets: bool = False,
) -> AlertChannel:
    """Create a channel after checking its settings; each field error names the field.

    A webhook or Slack URL that is a non-public address literal or `localhost` is refused unless
    `allow_private_targets` (the operator's setting); delivery checks the resolved addresses again.
    """
    name = name.strip()
    if not name:
        raise AlertsError("name: required")
    if len(name) > 100:
        raise AlertsError("name: at most 100 characters")
    if kind not in CHANNEL_KINDS:
        raise AlertsError(f"kind: must be one of {', '.join(CHANNEL_KINDS)}, not {kind!r}")
    if session.execute(select(col(AlertChannel.id)).where(col(AlertChannel.name) == name)).first():
        raise AlertsError(f"name: a channel named {name!r} exists")
    topics = [t.strip() for t in (topics or [TOPIC_ALL]) if t.strip()] or [TOPIC_ALL]
    unknown = [t for t in topics if t not in valid_topics()]
    if unknown:
        raise AlertsError(f"topics: unknown {', '.join(unknown)} (choose from {', '.join(valid_topics())})")
    config: EmailConfig | None = None
    if kind in ("slack", "webhook"):
        target = _check_url(target, allow_private_targets=allow_private_targets)
    elif kind == "file":
        if not target.strip():
            raise AlertsError("path: required for a file channel")
        target = target.strip()
    else:
        config = _email_config(email or {})
        _check_host(config["host"], field="smtp_host", allow_private_targets=allow_private_targets)
        target = ""
    channel = AlertChannel(
        name=name,
        kind=kind,
        target=target,
        config=dict(config) if config else {},
        topics=topics,
        send_resolved=send_resolved,
        secret_nonce=secrets.token_hex(16) if kind == "webhook" else "",
    )
    session.add(channel)
    session.flush()
    return channel


def _email_config(raw: Mapping[str, object]) -> EmailConfig:
    """Check an email channel's settings as typed (a form, the CLI); each error names the field."""
    host = str(raw.get("host") or "").strip()
    if not host:
        raise AlertsError("smtp_host: required for an email channel")
    security = str(raw.get("security") or "starttls")
    if security not in SECURITY_MODES:
        raise AlertsError(f"security: must be one of {', '.join(SECURITY_MODES)}, not {security!r}")
    default_port = {"starttls": 587, "tls": 465, "none": 25}[security]
    port_raw = raw.get("port") or default_port
    try:
        port = int(port_raw) if isinstance(port_raw, int | float) else int(str(port_raw))
    except (TypeError, ValueError):
        raise AlertsError(f"smtp_port: must be a number, not {raw.get('port')!r}") from None
    if not 0 < port < 65536:
        raise AlertsError(f"smtp_port: out of range: {port}")
    from_addr = str(raw.get("from_addr") or "").strip()
    if "@" not in from_addr:
        raise AlertsError("from: an email address is required")
    to_raw = raw.get("to") or []
    if isinstance(to_raw, str):
        to_raw = [a.strip() for a in to_raw.replace(";", ",").split(",")]
    to = [str(a) for a in to_raw if a] if isinstance(to_raw, list | tuple) else []
    if not to or any("@" not in a for a in to):
        raise AlertsError("to: one or more email addresses, separated by commas")
    username = str(raw.get("username") or "").strip()
    password_env = str(raw.get("password_env") or "").strip()
    if username and not password_env:
        raise AlertsError("password_env: name the environment variable holding the SMTP password")
    if password_env and (refusal := check_password_env(password_env, security)):
        raise AlertsError(refusal)
    return {
        "host": host,
        "port": port,
        "security": security,
        "username": username,
        "password_env": password_env,
        "from_addr": from_addr,
        "to": to,
        "ca_file": str(raw.get("ca_file") or "").strip(),
    }


def list_channels(*, session: Session) -> list[AlertChannel]:
    """Return every channel, by name."""
    return list(session.execute(select(AlertChannel).order_by(col(AlertChannel.name))).scalars())


def get_channel(*, session: Session, ref: str | int) -> AlertChannel:
    """Return a channel by id or name."""
    channel = None
    if (channel_id := id_from_ref(ref)) is not None:
        channel = session.get(AlertChannel, channel_id)
    if channel is None:
        channel = session.execute(select(AlertChannel).where(col(AlertChannel.name) == str(ref))).scalars().first()
    if channel is None:
        raise AlertsError(f"channel: no channel {ref!r}")
    return channel


def remove_channel(*, session: Session, ref: str | int) -> AlertChannel:
    """Delete a channel and its outbox messages."""
    channel = get_channel(session=session, ref=ref)
    outbox = table_of(AlertOutbox)
    session.execute(outbox.delete().where(outbox.c.channel_id == channel.id))
    session.delete(channel)
    session.flush()
    return channel


def signing_secret(channel: AlertChannel, secret_key: str) -> str:
    """Return a webhook channel's signing secret: HMAC-SHA256(app secret key, channel nonce), hex."""
    if not channel.secret_nonce:
        raise AlertsError(f"channel {channel.name!r}: only webhook channels are signed")
    return hmac.new(secret_key.encode(), f"draftdesk-alerts:{channel.secret_nonce}".encode(), hashlib.sha256).hexdigest()


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """Return the signature header value of a webhook body: v1=hex(HMAC-SHA256(secret, timestamp + '.' + body))."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def matches(channel: AlertChannel, item: AlertItem) -> bool:
    """Tell whether a channel receives an item (its topics, and resolved messages only if it wants them)."""
    if item.get("state") == "resolved" and not channel.send_resolved:
        return False
    topics = set(channel.topics or [TOPIC_ALL])
    if TOPIC_ALL in topics or item["topic"] in topics:
        return True
    return "metrics" in topics and item["kind"] in ("metric", "no_data")

