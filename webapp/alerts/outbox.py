"""The notice ledger and the outbox: transitions recorded once, grouped messages queued per channel, the evaluator lease, delivery history.

A transition is recorded once in the `alert_notice` ledger; the same transaction writes one outbox
message per subscribed channel, grouping every transition found in that pass. The delivery worker
(webapp/alerts/delivery.py) sends the outbox.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import Table, func, select, update
from sqlalchemy.dialects.postgresql import Insert as PgInsert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import Insert as SqliteInsert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from webapp.alerts.channels import list_channels, matches
from webapp.alerts.items import AlertItem
from webapp.alerts.models import AlertChannel, AlertLease, AlertNotice, AlertOutbox
from webapp.alerts.transitions import (
    HUMAN_QUALITY,
    hallucination_items,
    human_quality_items,
    metric_items,
    no_data_items,
    regression_items,
)
from webapp.core.db import stored_id, table_of
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow

log = logging.getLogger(__name__)

EVALUATOR_LEASE = "alerts-evaluator"


def _insert(session: Session, table: Table) -> PgInsert | SqliteInsert:
    return (sqlite_insert if session.get_bind().dialect.name == "sqlite" else pg_insert)(table)


def _claim_new(session: Session, items: list[AlertItem], now: dt.datetime) -> list[AlertItem]:
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


def _fired_at(session: Session, item: AlertItem) -> dt.datetime | None:
    """Return when the firing that a resolved item ends was recorded (None if it predates the ledger)."""
    if item["kind"] in ("no_data", HUMAN_QUALITY):
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


def enqueue(*, session: Session, items: list[AlertItem], now: dt.datetime | None = None) -> list[AlertOutbox]:
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

    transitions: list[AlertItem]
    messages: list[AlertOutbox]


def record_transitions(
    *, session: Session, spec: EvalSpec, now: dt.datetime | None = None, human_quality: bool = True
) -> EvaluationResult:
    """Find transitions not notified yet, record them, and queue grouped messages, all in the session's transaction.

    `human_quality=False` leaves out the weekly human-graded quality (an estimate per production
    week): events and hallucination decisions never change it, so the passes they trigger skip
    that work; the periodic pass (and `alerts run-once`) includes it.
    """
    now = now or utcnow()
    items = (
        metric_items(session=session, spec=spec)
        + no_data_items(session=session, spec=spec, now=now)
        + regression_items(session=session, spec=spec)
        + hallucination_items(session=session, spec=spec)
        + (human_quality_items(session=session, spec=spec) if human_quality else [])
    )
    new = _claim_new(session, items, now)
    return EvaluationResult(new, enqueue(session=session, items=new, now=now) if new else [])


def notify_changes(*, session: Session, spec: EvalSpec) -> None:
    """Queue notifications for what just changed (events, a hallucination decision, a checked run); never fails the caller.

    The weekly human-graded quality is left to the periodic pass: nothing that calls this changes it.
    """
    try:
        with session.begin_nested():
            record_transitions(session=session, spec=spec, human_quality=False)
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


# A delivery in words, from its outbox row's status and attempts (delivery_state).
DeliveryState = Literal["sent", "retrying", "queued", "given up"]


@dataclass(frozen=True)
class Delivery:
    """One message sent (or being sent) to a channel, with its state in words."""

    message: AlertOutbox
    state: DeliveryState


@dataclass(frozen=True)
class ChannelDeliveries:
    """A channel with its last deliveries, newest first."""

    channel: AlertChannel
    deliveries: list[Delivery]


def channels_with_deliveries(*, session: Session, limit: int = 5) -> list[ChannelDeliveries]:
    """Return each channel with its last deliveries and their states, as the page and the API show them."""
    return [
        ChannelDeliveries(ch, [Delivery(m, delivery_state(m)) for m in last_deliveries(session=session, channel_id=stored_id(ch.id), limit=limit)])
        for ch in list_channels(session=session)
    ]


def delivery_state(msg: AlertOutbox) -> DeliveryState:
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
