"""Sending outbox messages: claims with a lease, retries with backoff and jitter, Retry-After, give-up after 24 h.

The retry policy (which answers are transient, the backoff) is the shared one of
`webapp.core.retry_policy`; the schedule itself is kept in the outbox, so a retry survives a restart.

At least once: a message is claimed (committed) before it is sent and marked sent only after the
receiver accepted it; a worker that dies in between leaves a claim that expires, and the message is
sent again with the same Idempotency-Key.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import hashlib
import json
import logging
import os
import re
import secrets
import smtplib
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path

import httpx
from sqlalchemy import select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from webapp.alerts import messages, targets
from webapp.alerts.channels import check_password_env, sign, signing_secret
from webapp.alerts.items import AlertPayload, EmailConfig, email_config, payload_of
from webapp.alerts.models import AlertChannel, AlertOutbox
from webapp.core.db import stored_id, table_of
from webapp.core.retry_policy import backoff, is_transient_status, wait_after
from webapp.core.timeutil import as_utc, utcnow

log = logging.getLogger(__name__)
GIVE_UP_AFTER = dt.timedelta(hours=24)
# 30 s doubling, capped at 1 h, each wait in [50%, 100%] of its step
BACKOFF = backoff(base=30.0, cap=3600.0)
CLAIM_S = 120.0  # a claim outlives any single send (HTTP and SMTP timeouts 10 s)
HTTP_TIMEOUT_S = 10.0
SMTP_TIMEOUT_S = 10.0
USER_AGENT = "DraftDesk-Alerts/1"


@dataclass
class SendResult:
    """What a receiver answered."""

    ok: bool
    status: int | None = None
    error: str = ""
    retry_after_s: float | None = None
    permanent: bool = False


def parse_retry_after(value: str | None, now: dt.datetime) -> float | None:
    """Return a Retry-After header as seconds from now (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - now).total_seconds())


def _http(url: str, body: bytes, headers: dict[str, str], *, allow_private: bool) -> SendResult:
    """Post to a webhook/Slack URL at an address checked now (see webapp.alerts.targets).

    The answer is reported by its status alone: an answer's body, or which way a connection failed
    (refused, timed out, reset), would tell an admin what listens where on the server's network.
    """
    try:
        target = httpx.URL(url)
    except httpx.InvalidURL:  # stored before the save parsed URLs with this same parser (issue 41)
        return SendResult(False, None, "url: not a valid URL", permanent=True)
    host = target.host
    try:
        resolved = targets.resolve(host, target.port or (443 if target.scheme == "https" else 80), allow_private=allow_private)
    except targets.TargetRefused as exc:
        return SendResult(False, None, str(exc), permanent=True)
    except OSError:
        return SendResult(False, None, f"could not connect to {host}")
    request_headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, "Host": target.netloc.decode("ascii"), **headers}
    # the TLS server name (and the certificate check) stays the URL's name when the request goes to its address
    extensions = {"sni_hostname": host} if target.scheme == "https" else {}
    for address in resolved.addresses:
        try:
            with httpx.Client(timeout=HTTP_TIMEOUT_S, follow_redirects=False) as client:
                r = client.post(target.copy_with(host=address), content=body, headers=request_headers, extensions=extensions)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            continue  # the name's next address, as a browser would
        except httpx.HTTPError as exc:
            log.info("alerts: %s answered no HTTP (%s)", host, exc.__class__.__name__)
            break
        return _http_answer(r)
    return SendResult(False, None, f"could not connect to {host}")


def _http_answer(r: httpx.Response) -> SendResult:
    if 200 <= r.status_code < 300:
        return SendResult(True, r.status_code)
    return SendResult(
        False,
        r.status_code,
        f"HTTP {r.status_code}",
        retry_after_s=parse_retry_after(r.headers.get("Retry-After"), utcnow()),
        permanent=not is_transient_status(r.status_code),
    )


MSGID_DOMAIN = "draftdesk.alerts"
_DOT_ATOM = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*")


def message_id(key: str) -> str:
    """Return the RFC 5322 Message-ID of a message key: `<key@draftdesk.alerts>` when the key is a
    dot-atom (the outbox's "dd-<hex>", a test's "test-3-<hex>"), else a digest of it (a key with a
    colon or space may not be the id's left part); the same key always gives the same id."""
    left = key if _DOT_ATOM.fullmatch(key) else "dd-" + hashlib.sha256(key.encode()).hexdigest()[:40]
    return f"<{left}@{MSGID_DOMAIN}>"


def _email(channel: AlertChannel, payload: AlertPayload, key: str, base_url: str, *, allow_private: bool) -> SendResult:
    cfg = email_config(channel)
    password = ""
    if cfg.get("username"):
        env = cfg.get("password_env", "")
        # again at send time: a channel saved before these rules must not mail the server's secrets either
        refusal = check_password_env(env, cfg.get("security", ""))
        if refusal:
            return SendResult(False, None, refusal, permanent=True)
        if env not in os.environ:
            return SendResult(False, None, f"environment variable {env} (SMTP password) is not set")
        password = os.environ[env]
    msg = EmailMessage()
    msg["Subject"] = messages.subject(payload)
    msg["From"] = cfg["from_addr"]
    msg["To"] = ", ".join(cfg["to"])
    msg["Date"] = email.utils.formatdate(localtime=False)
    # The same Message-ID on every attempt: mail systems drop duplicates by it.
    msg["Message-ID"] = message_id(key)
    msg["X-Idempotency-Key"] = key
    msg.set_content(messages.text(payload, base_url))
    return _smtp_send(cfg, msg, password, allow_private=allow_private)


class _CheckedSMTP(smtplib.SMTP):
    """smtplib.SMTP connecting to an address checked by targets.resolve, while its name stays the host's.

    smtplib opens its socket in `_get_socket` (the hook SMTP_SSL overrides too) and uses the host it
    was given as the TLS server name, so the certificate is verified against the name while the
    connection goes to the address that passed the public-address check, never a second lookup.
    """

    def __init__(self, *, name: str, address: str, timeout: float) -> None:
        super().__init__(timeout=timeout)
        self._host = name  # STARTTLS verifies the certificate against it (smtplib sets it only when it connects itself)
        self.address = address

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        return socket.create_connection((self.address, port), timeout, self.source_address)


class _CheckedSMTPSSL(smtplib.SMTP_SSL):
    """smtplib.SMTP_SSL connecting to a checked address; the certificate is verified against the host's name."""

    def __init__(self, *, name: str, address: str, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(timeout=timeout, context=context)
        self._host = name
        self.address = address

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = socket.create_connection((self.address, port), timeout, self.source_address)
        return self.context.wrap_socket(sock, server_hostname=self._host)


def _smtp_send(cfg: EmailConfig, msg: EmailMessage, password: str, *, allow_private: bool) -> SendResult:
    """Send one message to the channel's SMTP host at an address checked now; report the status code only.

    Issue 41: the server's reply text, and which way a connection failed (refused, timed out, not an
    SMTP server), would tell an admin what listens where on the server's network; so a failure
    before an SMTP reply code reads "could not deliver", and a refusal reads "SMTP <code>".
    """
    host, port = cfg["host"], int(cfg["port"])
    try:
        resolved = targets.resolve(host, port, allow_private=allow_private, field="smtp_host")
    except targets.TargetRefused as exc:
        return SendResult(False, None, str(exc), permanent=True)
    except OSError:
        return SendResult(False, None, f"could not deliver to {host}:{port}")
    context = ssl.create_default_context(cafile=cfg.get("ca_file") or None)
    for address in resolved.addresses:
        smtp: smtplib.SMTP = (
            _CheckedSMTPSSL(name=host, address=address, timeout=SMTP_TIMEOUT_S, context=context)
            if cfg["security"] == "tls"
            else _CheckedSMTP(name=host, address=address, timeout=SMTP_TIMEOUT_S)
        )
        try:
            try:
                code, _ = smtp.connect(host, port)
            except OSError:
                continue  # the name's next address
            if code != 220:
                raise smtplib.SMTPConnectError(code, b"")
            if cfg["security"] == "starttls":
                smtp.starttls(context=context)
            if cfg.get("username"):
                smtp.login(cfg["username"], password)
            smtp.send_message(msg)
            smtp.quit()
        except smtplib.SMTPResponseException as exc:
            if exc.smtp_code < 200:  # no SMTP reply at all (smtplib's -1): something else listens there
                break
            # 5xx is permanent for SMTP (bad address, auth refused); 4xx asks to come back later
            return SendResult(False, exc.smtp_code, f"SMTP {exc.smtp_code}", permanent=exc.smtp_code >= 500)
        except (OSError, smtplib.SMTPException) as exc:
            log.info("alerts: SMTP to %s failed (%s)", host, exc.__class__.__name__)
            break
        finally:
            smtp.close()
        return SendResult(True, 250)
    return SendResult(False, None, f"could not deliver to {host}:{port}")


def _file(channel: AlertChannel, payload: AlertPayload, key: str, base_url: str) -> SendResult:
    line = json.dumps({"idempotency_key": key, "channel": channel.name, "text": messages.text(payload, base_url),
                       "items": payload["items"]}, sort_keys=True)
    try:
        path = Path(channel.target)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    except OSError as exc:
        return SendResult(False, None, f"{exc.__class__.__name__}: {exc}")
    return SendResult(True)


def send(
    channel: AlertChannel, payload: AlertPayload, key: str, *, base_url: str, secret_key: str,
    allow_private_targets: bool = False,
) -> SendResult:
    """Send one message to one channel (no database access); never raises for a receiver's failure."""
    if channel.kind == "slack":
        body = json.dumps(messages.slack_body(payload, base_url)).encode()
        return _http(channel.target, body, {"Idempotency-Key": key}, allow_private=allow_private_targets)
    if channel.kind == "webhook":
        body = messages.webhook_body(payload, base_url, key)
        ts = str(int(time.time()))
        secret = signing_secret(channel, secret_key)
        headers = {"Idempotency-Key": key, "X-DraftDesk-Timestamp": ts, "X-DraftDesk-Signature": sign(secret, ts, body)}
        return _http(channel.target, body, headers, allow_private=allow_private_targets)
    if channel.kind == "email":
        return _email(channel, payload, key, base_url, allow_private=allow_private_targets)
    if channel.kind == "file":
        return _file(channel, payload, key, base_url)
    return SendResult(False, None, f"unknown channel kind {channel.kind!r}", permanent=True)


def test_payload(channel: AlertChannel) -> AlertPayload:
    """Return the message that `channels test` sends."""
    return {
        "items": [
            {
                "key": f"test-{channel.id}-{secrets.token_hex(4)}",
                "kind": "test",
                "topic": "test",
                "state": "test",
                "alert": "Test message",
                "rule": f"channel {channel.name} is set up",
                "window": "none",
                "value": None,
                "threshold": None,
                "op": "",
                "days": [],
                "segment": "none",
                "path": "/admin/alerts",
            }
        ]
    }


def send_test(
    channel: AlertChannel, *, base_url: str, secret_key: str, allow_private_targets: bool = False,
    session: Session | None = None,
) -> SendResult:
    """Send a test message to a channel now (not through the outbox) and return the answer.

    With a `session`, the test is also recorded (flushed) among the channel's deliveries, sent or given
    up after its one attempt, so the channel's card shows it rather than "Nothing sent yet" right after a
    delivered test. It is never retried: the worker sends only pending messages.
    """
    payload = test_payload(channel)
    key = payload["items"][0]["key"]
    result = send(channel, payload, key, base_url=base_url, secret_key=secret_key,
                  allow_private_targets=allow_private_targets)
    if session is not None:
        now = utcnow()
        session.add(AlertOutbox(
            channel_id=stored_id(channel.id), idempotency_key=key, payload=dict(payload),
            status="sent" if result.ok else "failed", attempts=1, next_attempt_at=now,
            last_status=result.status, last_error="" if result.ok else result.error, created_at=now,
            sent_at=now if result.ok else None,
        ))
        session.flush()
    return result


# --- the worker pass ---------------------------------------------------------------------------------


_report_lock = threading.Lock()


@dataclass
class DeliveryReport:
    """What one delivery pass did."""

    sent: list[int] = field(default_factory=list)
    retrying: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


def claim_due(*, engine: Engine, now: dt.datetime, limit: int = 50, claim_s: float = CLAIM_S) -> tuple[str, list[int]]:
    """Claim due messages for this worker (committed); an expired claim of a dead worker is taken over."""
    token = secrets.token_hex(16)
    table = table_of(AlertOutbox)
    free = (table.c.claimed_until.is_(None)) | (table.c.claimed_until < now)
    with Session(engine) as session:
        ids = list(
            session.execute(
                select(table.c.id)
                .where(table.c.status == "pending", table.c.next_attempt_at <= now, free)
                .order_by(table.c.next_attempt_at, table.c.id)
                .limit(limit)
            ).scalars()
        )
        claimed = []
        for msg_id in ids:
            # the conditions again, atomically: a concurrent worker that claimed first wins
            res = session.execute(
                update(table)
                .where(table.c.id == msg_id, table.c.status == "pending", free)
                .values(claimed_until=now + dt.timedelta(seconds=claim_s), claim_token=token)
            )
            if res.rowcount:  # pyright: ignore[reportAttributeAccessIssue]  # a DML statement's result is a CursorResult; SQLModel's Session.execute is typed as Result
                claimed.append(msg_id)
        session.commit()
    return token, claimed


def deliver_due(
    *,
    engine: Engine,
    base_url: str,
    secret_key: str,
    now: dt.datetime | None = None,
    limit: int = 50,
    allow_private_targets: bool = False,
) -> DeliveryReport:
    """Claim due messages, send them (channels side by side), and record sent / retry at / given up."""
    now = now or utcnow()
    report = DeliveryReport()
    token, ids = claim_due(engine=engine, now=now, limit=limit)
    if not ids:
        return report
    by_channel: dict[int, list[tuple[AlertOutbox, AlertChannel]]] = {}
    with Session(engine, expire_on_commit=False) as session:
        for msg_id in ids:
            msg = session.get(AlertOutbox, msg_id)
            channel = session.get(AlertChannel, msg.channel_id) if msg else None
            if msg is not None and channel is not None:
                by_channel.setdefault(stored_id(channel.id), []).append((msg, channel))
    # One thread per channel: a slow or hanging receiver (up to its timeout per message) delays only its own messages.
    with ThreadPoolExecutor(max_workers=min(8, len(by_channel) or 1)) as pool:
        futures = [
            pool.submit(_deliver_channel, engine, items, token, now, base_url, secret_key, report, allow_private_targets)
            for items in by_channel.values()
        ]
        for f in futures:
            f.result()
    return report


def _deliver_channel(
    engine: Engine,
    items: list[tuple[AlertOutbox, AlertChannel]],
    token: str,
    now: dt.datetime,
    base_url: str,
    secret_key: str,
    report: DeliveryReport,
    allow_private_targets: bool,
) -> None:
    for i, (msg, channel) in enumerate(items):
        try:
            result = send(channel, payload_of(msg), msg.idempotency_key, base_url=base_url, secret_key=secret_key,
                          allow_private_targets=allow_private_targets)
        except Exception as exc:  # a bug in one channel must not stop the others
            result = SendResult(False, None, f"{exc.__class__.__name__}: {exc}"[:500])
        _record(engine, msg, token, result, now, report)
        if not result.ok and not result.permanent:
            # the receiver is in trouble: leave its other messages for the next pass instead of hammering it
            _release(engine, [stored_id(m.id) for m, _ in items[i + 1 :]], token)
            return


def _release(engine: Engine, ids: list[int], token: str) -> None:
    if not ids:
        return
    table = table_of(AlertOutbox)
    with Session(engine) as session:
        session.execute(
            update(table).where(table.c.id.in_(ids), table.c.claim_token == token).values(claimed_until=None, claim_token=None)
        )
        session.commit()


def _record(
    engine: Engine, msg: AlertOutbox, token: str, result: SendResult, now: dt.datetime, report: DeliveryReport
) -> None:
    attempts = msg.attempts + 1
    values: dict[str, object] = {"attempts": attempts, "last_status": result.status, "claimed_until": None, "claim_token": None}
    if result.ok:
        values |= {"status": "sent", "sent_at": now, "last_error": ""}
        bucket = report.sent
    else:
        wait = result.retry_after_s if result.retry_after_s is not None else wait_after(BACKOFF, attempts)
        next_at = now + dt.timedelta(seconds=wait)
        deadline = as_utc(msg.created_at) + GIVE_UP_AFTER
        if result.permanent or next_at > deadline:
            why = "permanent error" if result.permanent else "retried for 24 h"
            values |= {"status": "failed", "last_error": f"gave up ({why}) after {attempts} attempts: {result.error}"}
            bucket = report.failed
        else:
            values |= {"next_attempt_at": next_at, "last_error": result.error}
            bucket = report.retrying
    table = table_of(AlertOutbox)
    with Session(engine) as session:
        res = session.execute(update(table).where(table.c.id == msg.id, table.c.claim_token == token).values(**values))
        session.commit()
    if res.rowcount:  # pyright: ignore[reportAttributeAccessIssue]  # a DML statement's result is a CursorResult; SQLModel's Session.execute is typed as Result
        with _report_lock:
            bucket.append(stored_id(msg.id))


def pending_count(*, engine: Engine) -> int:
    """Return how many messages still wait for delivery."""
    with Session(engine) as session:
        return len(list(session.execute(select(col(AlertOutbox.id)).where(col(AlertOutbox.status) == "pending")).scalars()))
