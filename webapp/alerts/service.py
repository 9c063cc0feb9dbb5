"""Notification channels, transition detection into the outbox, the evaluator lease, and delivery history.

A transition (a metric alert going to firing or resolved, "no data", a regression alert, a confirmed
hallucination report) is recorded once in the `alert_notice` ledger; the same transaction writes one
outbox message per subscribed channel, grouping every transition found in that pass. The delivery
worker (webapp/alerts/delivery.py) sends the outbox.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from webapp.alerts.models import CHANNEL_KINDS, TOPIC_ALL, AlertChannel, AlertLease, AlertNotice, AlertOutbox
from webapp.db import stored_id, table_of
from webapp.metrics import alert_states as metrics_alert_states
from webapp.metrics import daily as metrics_daily
from webapp.metrics import ingest as metrics_ingest
from webapp.metrics import targets as metrics_targets
from webapp.metrics.models import Event, HallucinationReport
from webapp.regression.models import RegressionAlert
from webapp.runs.models import Run
from webapp.spec import METRIC_NAMES, EvalSpec
from webapp.timeutil import as_utc, utcnow

log = logging.getLogger(__name__)

# Topics a channel may subscribe to, besides each metric's name.
GROUP_TOPICS: tuple[str, ...] = (TOPIC_ALL, "metrics", "no_data", "regression", "hallucination")
SECURITY_MODES: tuple[str, ...] = ("starttls", "tls", "none")
EVALUATOR_LEASE = "alerts-evaluator"
SEGMENT_ALL = "all traffic"


class AlertsError(ValueError):
    """Bad channel settings or an unknown channel; the message names the field."""


# --- channels ----------------------------------------------------------------------------------------


def valid_topics() -> tuple[str, ...]:
    """Return every topic a channel may subscribe to."""
    return GROUP_TOPICS + METRIC_NAMES


def _check_url(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise AlertsError(f"url: must be an http(s) URL, not {url!r}")
    return url.strip()


def add_channel(
    *,
    session: Session,
    name: str,
    kind: str,
    target: str = "",
    topics: list[str] | None = None,
    send_resolved: bool = True,
    email: dict[str, Any] | None = None,
) -> AlertChannel:
    """Create a channel after checking its settings; each field error names the field."""
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
    config: dict[str, Any] = {}
    if kind in ("slack", "webhook"):
        target = _check_url(target)
    elif kind == "file":
        if not target.strip():
            raise AlertsError("path: required for a file channel")
        target = target.strip()
    else:
        config = _email_config(email or {})
        target = ""
    channel = AlertChannel(
        name=name,
        kind=kind,
        target=target,
        config=config,
        topics=topics,
        send_resolved=send_resolved,
        secret_nonce=secrets.token_hex(16) if kind == "webhook" else "",
    )
    session.add(channel)
    session.flush()
    return channel


def _email_config(raw: dict[str, Any]) -> dict[str, Any]:
    host = str(raw.get("host") or "").strip()
    if not host:
        raise AlertsError("smtp_host: required for an email channel")
    security = str(raw.get("security") or "starttls")
    if security not in SECURITY_MODES:
        raise AlertsError(f"security: must be one of {', '.join(SECURITY_MODES)}, not {security!r}")
    default_port = {"starttls": 587, "tls": 465, "none": 25}[security]
    try:
        port = int(raw.get("port") or default_port)
    except (TypeError, ValueError):
        raise AlertsError(f"smtp_port: must be a number, not {raw.get('port')!r}") from None
    if not 0 < port < 65536:
        raise AlertsError(f"smtp_port: out of range: {port}")
    from_addr = str(raw.get("from_addr") or "").strip()
    if "@" not in from_addr:
        raise AlertsError("from: an email address is required")
    to = raw.get("to") or []
    if isinstance(to, str):
        to = [a.strip() for a in to.replace(";", ",").split(",")]
    to = [a for a in to if a]
    if not to or any("@" not in a for a in to):
        raise AlertsError("to: one or more email addresses, separated by commas")
    username = str(raw.get("username") or "").strip()
    password_env = str(raw.get("password_env") or "").strip()
    if username and not password_env:
        raise AlertsError("password_env: name the environment variable holding the SMTP password")
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
    if isinstance(ref, int) or str(ref).isdigit():
        channel = session.get(AlertChannel, int(ref))
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


def matches(channel: AlertChannel, item: dict[str, Any]) -> bool:
    """Tell whether a channel receives an item (its topics, and resolved messages only if it wants them)."""
    if item.get("state") == "resolved" and not channel.send_resolved:
        return False
    topics = set(channel.topics or [TOPIC_ALL])
    if TOPIC_ALL in topics or item["topic"] in topics:
        return True
    return "metrics" in topics and item["kind"] in ("metric", "no_data")


# --- transitions -------------------------------------------------------------------------------------


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if metric.endswith("_rate"):
        return f"{value * 100:.1f}%"
    if metric == "cost_per_draft":
        return f"${value:.4f}"
    if metric == "hallucination_reports":
        return f"{value:g}"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def _window_words(rule: Any) -> str:
    if rule.window == "trailing_mean":
        return f"mean of the trailing {rule.days} days"
    return "1 day" if rule.days == 1 else f"{rule.days} consecutive days"


def _metrics_path(start: dt.date, end: dt.date) -> str:
    return "/metrics?" + urlencode({"start": start.isoformat(), "end": end.isoformat()})


def metric_items(*, session: Session, spec: EvalSpec) -> list[dict[str, Any]]:
    """Return every notifiable transition of the metric alerts (to firing; firing to resolved), over all traffic."""
    bounds = metrics_ingest.event_days(session)
    if bounds is None:
        return []
    days = metrics_daily.daily_metrics(session=session, spec=spec, start=bounds[0], end=bounds[1])
    data_days = {d.day: d for d in days}
    out: list[dict[str, Any]] = []
    for status in metrics_alert_states.evaluate_alerts(days, spec):
        rule = status.rule
        op = ">" if rule.op == "above_baseline" else rule.op
        label = metrics_targets.METRIC_LABELS.get(status.metric, status.metric)
        for t in status.history:
            if t.to_state == "firing":
                state = "firing"
            elif t.from_state == "firing" and t.to_state == "resolved":
                state = "resolved"
            else:
                continue
            window = _window_days(status.metric, rule, t.day, state, data_days, spec)
            out.append(
                {
                    "key": f"metric:{status.metric}:{t.day.isoformat()}:{t.from_state}>{t.to_state}",
                    "kind": "metric",
                    "topic": status.metric,
                    "state": state,
                    "alert": label,
                    "rule": status.describe(),
                    "window": _window_words(rule),
                    "value": t.value,
                    "threshold": status.threshold,
                    "op": op,
                    "value_text": _fmt(status.metric, t.value),
                    "threshold_text": _fmt(status.metric, status.threshold),
                    "days": [d.isoformat() for d in window],
                    "segment": SEGMENT_ALL,
                    "path": _metrics_path(window[0], window[-1]),
                }
            )
    return out


def _window_days(
    metric: str, rule: Any, day: dt.date, state: str, data_days: dict[dt.date, Any], spec: EvalSpec
) -> list[dt.date]:
    """Return the days behind a transition: the breaching run or trailing window when firing, the day itself when resolved."""
    if state == "resolved":
        return [day]
    if rule.window == "trailing_mean":
        return [day - dt.timedelta(days=i) for i in range(rule.days - 1, -1, -1)]
    run: list[dt.date] = []
    d = day
    first = min(data_days)
    while d >= first and len(run) < rule.days:
        dm = data_days.get(d)
        value = None if dm is None else dm.value(metric)
        if value is not None:
            if not metrics_targets.alert_breached(rule, float(value), spec):
                break
            run.append(d)
        d -= dt.timedelta(days=1)
    return sorted(run) or [day]


def no_data_items(*, session: Session, spec: EvalSpec, now: dt.datetime) -> list[dict[str, Any]]:
    """Return the "no data" transition due now: firing after alerts.no_data_hours without events, resolved when they arrive."""
    tz = spec.tz
    pilot_start = dt.datetime.combine(spec.online_metrics.pilot.start, dt.time(), tzinfo=tz).astimezone(dt.UTC)
    if now < pilot_start:
        return []  # silence before the pilot starts is expected
    # The newest row's receipt time: ids grow with insertion, so the primary key answers this at
    # once where max(received_at) would scan a million rows on every ingested batch.
    last_raw = session.execute(select(col(Event.received_at)).order_by(col(Event.id).desc()).limit(1)).scalar()
    last = as_utc(last_raw) if last_raw is not None else None
    latest = session.execute(
        select(AlertNotice).where(col(AlertNotice.kind) == "no_data").order_by(col(AlertNotice.id).desc()).limit(1)
    ).scalars().first()
    hours = spec.alerts.no_data_hours
    base = {
        "kind": "no_data",
        "topic": "no_data",
        "alert": "No data",
        "rule": f"no event received for {hours:g} hours",
        "window": f"{hours:g} hours",
        "threshold": hours,
        "op": ">=",
        "threshold_text": f"{hours:g} h",
        "segment": SEGMENT_ALL,
    }
    if latest is not None and latest.state == "firing":
        since = dt.datetime.fromisoformat(latest.key.split(":", 1)[1].rsplit(":", 1)[0])
        if last is not None and last > since:
            gap = (last - since).total_seconds() / 3600
            day = last.astimezone(tz).date()
            return [
                {
                    **base,
                    "key": f"no_data:{since.isoformat()}:resolved",
                    "state": "resolved",
                    "value": gap,
                    "value_text": f"{gap:.1f} h without events",
                    "days": [day.isoformat()],
                    "path": _metrics_path(day, day),
                }
            ]
        return []
    since = max(last, pilot_start) if last is not None else pilot_start
    gap = (now - since).total_seconds() / 3600
    if gap < hours:
        return []
    first_day, last_day = since.astimezone(tz).date(), now.astimezone(tz).date()
    return [
        {
            **base,
            "key": f"no_data:{since.isoformat()}:firing",
            "state": "firing",
            "value": gap,
            "value_text": f"{gap:.1f} h since the last event ({since.strftime('%Y-%m-%d %H:%M')} UTC)"
            if last is not None
            else f"{gap:.1f} h since the pilot started, no event yet",
            "days": [(first_day + dt.timedelta(days=i)).isoformat() for i in range((last_day - first_day).days + 1)],
            "path": _metrics_path(first_day, last_day),
        }
    ]


def regression_items(*, session: Session, spec: EvalSpec) -> list[dict[str, Any]]:
    """Return every regression alert (golden factual failure, pass-rate drop) as a notifiable item."""
    rows = session.execute(
        select(RegressionAlert, col(Run.name)).join(Run, col(Run.id) == col(RegressionAlert.run_id)).order_by(col(RegressionAlert.id))
    ).all()
    out = []
    for alert, run_name in rows:
        ev = alert.evidence or {}
        drop, limit = ev.get("drop"), ev.get("threshold")
        # (drop, limit) when both are numbers: a tuple keeps them typed as numbers where they are used.
        figures = (
            (drop, limit)
            if alert.kind == "pass_rate_drop" and isinstance(drop, (int, float)) and isinstance(limit, (int, float))
            else None
        )
        day = as_utc(alert.created_at).astimezone(spec.tz).date()
        out.append(
            {
                "key": f"regression:{alert.id}",
                "kind": "regression",
                "topic": "regression",
                "state": "raised",
                "alert": "Regression: " + ("pass-rate drop" if alert.kind == "pass_rate_drop" else "golden factual failure"),
                "rule": alert.message,
                "window": f"run {run_name}",
                "value": figures[0] if figures else None,
                "threshold": figures[1] if figures else None,
                "op": ">",
                "value_text": f"pass rate down {figures[0] * 100:.1f} points" if figures else "golden example fails",
                "threshold_text": f"{figures[1] * 100:.0f} points" if figures else "0 failures allowed",
                "days": [day.isoformat()],
                "segment": f"run {run_name}",
                "path": "/regression/alerts",
            }
        )
    return out


def hallucination_items(*, session: Session, spec: EvalSpec) -> list[dict[str, Any]]:
    """Return every confirmed hallucination report as a notifiable item."""
    rows = session.execute(
        select(HallucinationReport, Event)
        .join(Event, col(Event.event_id) == HallucinationReport.event_id)
        .where(col(HallucinationReport.status) == "confirmed")
        .order_by(col(HallucinationReport.id))
    ).all()
    out = []
    for report, event in rows:
        parts = [f"{k}={v}" for k, v in (("intent", event.intent), ("plan", event.plan), ("agent", event.agent_id)) if v]
        out.append(
            {
                "key": f"hallucination:{report.id}",
                "kind": "hallucination",
                "topic": "hallucination",
                "state": "confirmed",
                "alert": "Confirmed hallucination",
                "rule": f"event {event.event_id}: {report.note or 'no note'}",
                "window": "1 day",
                "value": 1,
                "threshold": 0,
                "op": "==",
                "value_text": "1 confirmed report",
                "threshold_text": "0 allowed",
                "days": [event.day.isoformat()],
                "segment": ", ".join(parts) or SEGMENT_ALL,
                "path": "/metrics/hallucinations?status=confirmed",
            }
        )
    return out


def _insert(session: Session, table: Any) -> Any:
    return (sqlite_insert if session.get_bind().dialect.name == "sqlite" else pg_insert)(table)


def _claim_new(session: Session, items: list[dict[str, Any]], now: dt.datetime) -> list[dict[str, Any]]:
    """Record items in the ledger; return those not recorded before (concurrent passes claim each key once)."""
    if not items:
        return []
    keys = [it["key"] for it in items]
    known: set[str] = set()
    for i in range(0, len(keys), 500):
        chunk = keys[i : i + 500]
        known.update(session.execute(select(col(AlertNotice.key)).where(col(AlertNotice.key).in_(chunk))).scalars())
    fresh = [it for it in items if it["key"] not in known]
    if not fresh:
        return []
    table = table_of(AlertNotice)
    stmt = _insert(session, table).on_conflict_do_nothing(index_elements=["key"]).returning(table.c.key)
    claimed: set[str] = set()
    for it in fresh:
        row = session.execute(stmt, {"key": it["key"], "kind": it["kind"], "state": it["state"], "created_at": now}).first()
        if row is not None:
            claimed.add(row[0])
    return [it for it in fresh if it["key"] in claimed]


def idempotency_key(channel_id: int, item_keys: list[str]) -> str:
    """Return the stable key of one message: the same transitions for the same channel give the same key."""
    raw = f"{channel_id}|" + "\n".join(sorted(item_keys))
    return "dd-" + hashlib.sha256(raw.encode()).hexdigest()[:40]


def _fired_at(session: Session, item: dict[str, Any]) -> dt.datetime | None:
    """Return when the firing that a resolved item ends was recorded (None if it predates the ledger)."""
    if item["kind"] == "no_data":
        stmt = select(col(AlertNotice.created_at)).where(col(AlertNotice.key) == item["key"].rsplit(":", 1)[0] + ":firing")
    else:
        stmt = (
            select(col(AlertNotice.created_at))
            .where(col(AlertNotice.key).startswith(f"metric:{item['topic']}:", autoescape=True), col(AlertNotice.state) == "firing")
            .order_by(col(AlertNotice.id).desc())
            .limit(1)
        )
    value = session.execute(stmt).scalar()
    return as_utc(value) if value is not None else None


def enqueue(*, session: Session, items: list[dict[str, Any]], now: dt.datetime | None = None) -> list[AlertOutbox]:
    """Write one outbox message per enabled channel that receives any of the items (grouped).

    A "resolved" goes only to channels that existed when the alert fired: a channel is never told
    that something it never heard of is over.
    """
    now = now or utcnow()
    fired = {it["key"]: _fired_at(session, it) for it in items if it["state"] == "resolved"}
    out = []
    for channel in list_channels(session=session):
        if not channel.enabled:
            continue
        created = as_utc(channel.created_at)
        chosen = [
            it for it in items
            if matches(channel, it) and ((at := fired.get(it["key"])) is None or created <= at)
        ]
        if not chosen:
            continue
        msg = AlertOutbox(
            channel_id=stored_id(channel.id),
            idempotency_key=idempotency_key(stored_id(channel.id), [it["key"] for it in chosen]),
            payload={"items": chosen, "created_at": now.isoformat()},
            next_attempt_at=now,
            created_at=now,
        )
        session.add(msg)
        out.append(msg)
    session.flush()
    return out


@dataclass
class EvaluationResult:
    """What one evaluation pass found and queued."""

    transitions: list[dict[str, Any]]
    messages: list[AlertOutbox]


def record_transitions(*, session: Session, spec: EvalSpec, now: dt.datetime | None = None) -> EvaluationResult:
    """Find transitions not notified yet, record them, and queue grouped messages, all in the session's transaction."""
    now = now or utcnow()
    items = (
        metric_items(session=session, spec=spec)
        + no_data_items(session=session, spec=spec, now=now)
        + regression_items(session=session, spec=spec)
        + hallucination_items(session=session, spec=spec)
    )
    new = _claim_new(session, items, now)
    return EvaluationResult(new, enqueue(session=session, items=new, now=now) if new else [])


def notify_changes(*, session: Session, spec: EvalSpec) -> None:
    """Queue notifications for what just changed; a failure here never fails the caller (the periodic pass retries)."""
    try:
        with session.begin_nested():
            record_transitions(session=session, spec=spec)
    except Exception:
        log.exception("alerts: recording transitions failed; the periodic evaluation will pick them up")


# --- evaluator lease ---------------------------------------------------------------------------------


def acquire_lease(*, engine: Engine, holder: str, ttl_s: float, name: str = EVALUATOR_LEASE, now: dt.datetime | None = None) -> bool:
    """Take or renew the named lease for `holder` unless another holder's lease is still valid; commit at once."""
    now = now or utcnow()
    expires = now + dt.timedelta(seconds=ttl_s)
    table = table_of(AlertLease)
    with Session(engine) as session:
        inserted = session.execute(
            _insert(session, table).on_conflict_do_nothing(index_elements=["name"]).returning(table.c.name),
            {"name": name, "holder": holder, "expires_at": expires},
        ).first()
        if inserted is not None:
            session.commit()
            return True
        result = session.execute(
            update(table)
            .where(table.c.name == name, (table.c.holder == holder) | (table.c.expires_at < now))
            .values(holder=holder, expires_at=expires)
        )
        session.commit()
        return bool(result.rowcount)  # pyright: ignore[reportAttributeAccessIssue]  # a DML statement's result is a CursorResult; SQLModel's Session.execute is typed as Result


def release_lease(*, engine: Engine, holder: str, name: str = EVALUATOR_LEASE) -> None:
    """Give the lease up (if held), so another process can evaluate at once."""
    table = table_of(AlertLease)
    with Session(engine) as session:
        session.execute(table.delete().where(table.c.name == name, table.c.holder == holder))
        session.commit()


# --- delivery history --------------------------------------------------------------------------------


def last_deliveries(*, session: Session, channel_id: int, limit: int = 5) -> list[AlertOutbox]:
    """Return a channel's latest messages, newest first."""
    stmt = (
        select(AlertOutbox)
        .where(col(AlertOutbox.channel_id) == channel_id)
        .order_by(col(AlertOutbox.created_at).desc(), col(AlertOutbox.id).desc())
        .limit(limit)
    )
    return list(session.execute(stmt).scalars())


def channels_with_deliveries(*, session: Session, limit: int = 5) -> list[dict[str, Any]]:
    """Return each channel with its last deliveries and their states, as the page and the API show them."""
    rows = []
    for ch in list_channels(session=session):
        msgs = last_deliveries(session=session, channel_id=stored_id(ch.id), limit=limit)
        rows.append({"channel": ch, "deliveries": [(m, delivery_state(m)) for m in msgs]})
    return rows


def delivery_state(msg: AlertOutbox) -> str:
    """Return sent, retrying, queued or given up for a message."""
    if msg.status == "sent":
        return "sent"
    if msg.status == "failed":
        return "given up"
    return "retrying" if msg.attempts else "queued"


def outbox_counts(*, session: Session) -> dict[str, int]:
    """Return how many messages are queued/retrying, sent and given up."""
    rows = session.execute(select(col(AlertOutbox.status), func.count()).group_by(col(AlertOutbox.status))).all()
    return {status: int(n) for status, n in rows}
