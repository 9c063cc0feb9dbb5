"""Production events, their per-day aggregates, and agent-flagged hallucination reports."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar, Literal

from sqlalchemy import JSON, Column, Index, Text, UniqueConstraint, func, text, true
from sqlmodel import Field, SQLModel
from sqlmodel.sql.sqltypes import AutoString

from webapp.core.timeutil import aware_datetime_type, utcnow

# Segment value meaning "every value" in the aggregate table, and the stored stand-in for "no value".
ALL = "*"
NONE = ""

# A hallucination report's state: filed (pending) until the lead confirms or dismisses it.
HallucinationStatus = Literal["pending", "confirmed", "dismissed"]


class Event(SQLModel, table=True):
    """One ticket on which the assistant ran, as reported by the agents' drafting tool."""

    __tablename__: ClassVar[str] = "metric_event"
    __table_args__ = (
        UniqueConstraint("event_id", name="uq_metric_event_event_id"),
        Index("ix_metric_event_day_intent", "day", "intent"),
        Index("ix_metric_event_day_agent", "day", "agent_id"),
        # the events not yet merged into their day's stored aggregates: few, found without a scan
        Index("ix_metric_event_pending_day", "day", postgresql_where=text("pending"), sqlite_where=text("pending")),
        # covers the rebuild's read of a day's latencies for its p95 (aggregates.latency_p95): no row is read
        Index("ix_metric_event_day_latency", "day", "draft_shown", "latency_ms", "intent", "plan", "agent_id", "pending"),
    )

    id: int | None = Field(default=None, primary_key=True)
    event_id: str = Field(max_length=200)
    ticket_id: str = Field(max_length=200)
    occurred_at: dt.datetime = Field(sa_type=aware_datetime_type())
    # Calendar day of occurred_at in the spec's time zone, fixed at ingestion (rebuild after a zone change).
    day: dt.date  # indexed by ix_metric_event_day_intent (day first)
    intent: str | None = Field(default=None, max_length=100)
    plan: str | None = Field(default=None, max_length=100)
    agent_id: str | None = Field(default=None, max_length=100)
    model_version: str | None = Field(default=None, max_length=200)
    prompt_version: str | None = Field(default=None, max_length=200)
    draft_shown: bool
    action: str | None = Field(default=None, max_length=20)
    draft_text: str | None = Field(default=None, sa_column=Column(Text))
    sent_text: str | None = Field(default=None, sa_column=Column(Text))
    customer_message: str | None = Field(default=None, sa_column=Column(Text))
    confidence: float | None = None
    latency_ms: float | None = None
    handle_time_s: float | None = None
    cost_usd: float | None = None
    escalated: bool
    edit_distance: float | None = None
    received_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    # True until the rebuild merges the event into its day's aggregates (aggregates.merge_pending);
    # a server default, so every writer (the API's COPY, the file import) stores new events as pending.
    pending: bool = Field(default=True, sa_column_kwargs={"server_default": true()})


class DailyAggregate(SQLModel, table=True):
    """Sums and counts of one day's events for one segment ("*" = all values of that dimension).

    Brought up to date after events of that day arrive (the day is marked in StaleDay until
    then, and readers flag it): the rows aggregate exactly the day's events that are not pending,
    the new events are merged in by aggregates.merge_pending, and a full recompute gives the same. Full (intent, plan, agent) combinations are not
    stored (see aggregates.ROLLUPS): such narrow queries are computed from the raw events directly.
    """

    __tablename__: ClassVar[str] = "metric_daily_aggregate"
    __table_args__ = (UniqueConstraint("intent", "plan", "agent_id", "day", name="uq_metric_daily_segment"),)

    id: int | None = Field(default=None, primary_key=True)
    day: dt.date = Field(index=True)
    intent: str = Field(max_length=100)
    plan: str = Field(max_length=100)
    agent_id: str = Field(max_length=100)
    n_events: int = 0
    n_shown: int = 0
    n_accept: int = 0  # accept, or edit within the minor-edit limit
    n_reject: int = 0
    ed_sum: float = 0.0
    ed_n: int = 0
    n_escalated: int = 0
    ht_sum: float = 0.0
    ht_n: int = 0
    lat_n: int = 0
    lat_p95_s: float | None = None
    cost_sum: float = 0.0
    cost_n: int = 0
    # [[count, sum of confidence, accepted], ...] per confidence bin
    calib: list[list[float]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    # {"model_version": {value: count}, "prompt_version": {...}} (only on the all-segments row)
    versions: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))


class StaleDay(SQLModel, table=True):
    """A day whose stored aggregates may lag its raw events: written with the events, in their transaction.

    Rows are only inserted (one per batch and day, so writers never wait for each other) and
    deleted by the rebuild that read every event they stand for (see stale.rebuild_stale).
    """

    __tablename__: ClassVar[str] = "metric_stale_day"

    id: int | None = Field(default=None, primary_key=True)
    day: dt.date = Field(index=True)
    # When the mark was written (its events' transaction, by the database's clock): how long the
    # day's figures have lagged, shown as "updating since" (API, /metrics, home card).
    created_at: dt.datetime = Field(
        default_factory=utcnow, sa_type=aware_datetime_type(), sa_column_kwargs={"server_default": func.now()}
    )


class HallucinationReport(SQLModel, table=True):
    """A factual error an agent flagged on an event; counts only once the lead confirms it."""

    __tablename__: ClassVar[str] = "hallucination_report"

    id: int | None = Field(default=None, primary_key=True)
    event_id: str = Field(foreign_key="metric_event.event_id", index=True, max_length=200)
    note: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    reported_by: int | None = Field(default=None, foreign_key="app_user.id")
    # Filed with a token an admin minted for the reporter (auth.service.create_token): that admin, so
    # a report filed in an agent's name by someone else says so; None when the reporter's own token.
    minted_by: int | None = Field(default=None, foreign_key="app_user.id")
    status: HallucinationStatus = Field(default="pending", sa_type=AutoString(length=20), index=True)
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    decided_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    decided_by: int | None = Field(default=None, foreign_key="app_user.id")
    decision_note: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    # The KB revisions the flagged draft cited, as the drafting tool sent them: [{"article_id", "revision"}].
    citations: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON))


class HallucinationDecision(SQLModel, table=True):
    """One decision on a hallucination report (confirm, dismiss, or an undo back to an earlier state).

    Decisions are only ever added: the report's `status` is the newest decision's, and the rows
    are its history.
    """

    __tablename__: ClassVar[str] = "hallucination_decision"

    id: int | None = Field(default=None, primary_key=True)
    report_id: int = Field(foreign_key="hallucination_report.id", index=True, ondelete="CASCADE")
    decision: HallucinationStatus = Field(sa_type=AutoString(length=20))  # pending: an undo back to waiting
    note: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    decided_by: int | None = Field(default=None, foreign_key="app_user.id")
    decided_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    undoes: int | None = Field(default=None)  # id of the decision this one reverts



class RetentionWatermark(SQLModel, table=True):
    """The retention watermark: events of days before `pruned_before` may have been pruned (one row, id 1).

    Set by the prune (webapp/ops/retention.py) before it deletes, and only ever moved forward. The
    daily figures of days before it are final: no rebuild touches them, and events dated before it
    are refused at ingestion (see webapp/metrics/watermark.py).
    """

    __tablename__: ClassVar[str] = "metric_retention_watermark"

    id: int = Field(default=1, primary_key=True)
    pruned_before: dt.date
    updated_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class RebuildProgress(SQLModel, table=True):
    """How far `draftdesk metrics rebuild` got (one row, id 1, while a rebuild is unfinished; issue 41).

    The rebuild works a day per short transaction, first giving each event its day in the spec's
    time zone (`phase` "days"), then recomputing each day's figures ("figures"); `done_through` is
    the last day finished in the phase. A killed rebuild is continued from there by the next one
    (webapp/metrics/rebuild.py); the row goes when the rebuild ends.
    """

    __tablename__: ClassVar[str] = "metric_rebuild_progress"

    id: int = Field(default=1, primary_key=True)
    tz: str = Field(max_length=100)  # the time zone the days are computed in: another one restarts the rebuild
    phase: str = Field(max_length=10)  # days | figures
    done_through: dt.date | None = None
    marks_upto: int = 0  # the stale-day marks that existed at the start: covered by this rebuild
    started_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    updated_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
