"""Notification channels, the ledger of notified transitions, the delivery outbox and the evaluator lease."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar, Literal, get_args

from sqlalchemy import JSON, Column, Index, Text
from sqlmodel import Field, SQLModel
from sqlmodel.sql.sqltypes import AutoString

from webapp.core.timeutil import aware_datetime_type, utcnow

ChannelKind = Literal["slack", "webhook", "email", "file"]
CHANNEL_KINDS: tuple[ChannelKind, ...] = get_args(ChannelKind)
# A notified transition: what it is about, and the state it reports.
NoticeKind = Literal["metric", "no_data", "regression", "hallucination", "human_quality"]
NoticeState = Literal["firing", "resolved", "raised", "confirmed"]
# A message in the outbox: waiting (first send or a retry), sent, or given up.
OutboxStatus = Literal["pending", "sent", "failed"]
# What a channel may subscribe to: "all", one metric's alert (by metric name), "no_data", "regression", "hallucination",
# "human_quality".
TOPIC_ALL = "all"


class AlertChannel(SQLModel, table=True):
    """Where notifications go: a Slack-compatible webhook, a signed JSON webhook, SMTP email, or a JSON-lines file."""

    __tablename__: ClassVar[str] = "alert_channel"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=100, unique=True)
    kind: ChannelKind = Field(sa_type=AutoString(length=20))
    # URL of a webhook, path of a file channel; empty for email (its settings are in config)
    target: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    # email: host, port, security (starttls | tls | none), username, password_env, from_addr, to, ca_file
    config: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    topics: list[str] = Field(default_factory=lambda: [TOPIC_ALL], sa_column=Column(JSON, nullable=False))
    send_resolved: bool = True
    # The signing secret is HMAC(app secret key, this nonce): retrievable by the app, never stored as such.
    secret_nonce: str = Field(default="", max_length=64)
    enabled: bool = True
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class AlertNotice(SQLModel, table=True):
    """One transition that was notified (or recorded before any channel existed): each is sent once."""

    __tablename__: ClassVar[str] = "alert_notice"

    id: int | None = Field(default=None, primary_key=True)
    # e.g. metric:accept_rate:2026-11-05:pending>firing, no_data:<last event time>:firing, regression:12
    key: str = Field(max_length=300, unique=True)
    kind: NoticeKind = Field(sa_type=AutoString(length=20))
    state: NoticeState = Field(sa_type=AutoString(length=20))
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class AlertOutbox(SQLModel, table=True):
    """One message for one channel, written with the transitions it reports and delivered by the worker."""

    __tablename__: ClassVar[str] = "alert_outbox"
    __table_args__ = (Index("ix_alert_outbox_due", "status", "next_attempt_at"),)

    id: int | None = Field(default=None, primary_key=True)
    channel_id: int = Field(foreign_key="alert_channel.id", index=True, ondelete="CASCADE")
    # Stable per (transitions, channel): sent as the Idempotency-Key header on every attempt.
    idempotency_key: str = Field(max_length=100, unique=True)
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    status: OutboxStatus = Field(default="pending", sa_type=AutoString(length=20))
    attempts: int = 0
    next_attempt_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    # A worker's claim: until it expires, no other worker sends this message (a crash lets it expire).
    claimed_until: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    claim_token: str | None = Field(default=None, max_length=64)
    last_status: int | None = None
    last_error: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    sent_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())


class AlertLease(SQLModel, table=True):
    """A named lease with expiry: only its holder runs the periodic evaluation (any number of processes)."""

    __tablename__: ClassVar[str] = "alert_lease"

    name: str = Field(primary_key=True, max_length=50)
    holder: str = Field(max_length=200)
    expires_at: dt.datetime = Field(sa_type=aware_datetime_type())
