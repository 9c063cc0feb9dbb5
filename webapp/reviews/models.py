"""The PM's draft-vs-sent review: a stored random sample of sent drafts per period, and verdicts."""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

from sqlalchemy import Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from webapp.core.timeutil import aware_datetime_type, utcnow


class ReviewSample(SQLModel, table=True):
    """The sample of one period (ISO week "2026-W45" or month "2026-11"), fixed once drawn."""

    __tablename__: ClassVar[str] = "review_sample"

    id: int | None = Field(default=None, primary_key=True)
    period: str = Field(max_length=10, unique=True, index=True)
    cadence: str = Field(max_length=10)  # weekly | monthly
    start: dt.date
    end: dt.date
    wanted: int
    candidates: int  # sent drafts in the period when the sample was drawn
    seed: str = Field(max_length=60)
    drawn_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    drawn_by: int | None = Field(default=None, foreign_key="app_user.id")


class ReviewItem(SQLModel, table=True):
    """One sampled draft/sent pair and the reviewer's verdict on it."""

    __tablename__: ClassVar[str] = "review_item"
    __table_args__ = (UniqueConstraint("sample_id", "event_id", name="uq_review_item_sample_event"),)

    id: int | None = Field(default=None, primary_key=True)
    sample_id: int = Field(foreign_key="review_sample.id", index=True, ondelete="CASCADE")
    position: int
    event_id: str = Field(foreign_key="metric_event.event_id", max_length=200)
    verdict: str | None = Field(default=None, max_length=20)  # good | minor_issue | major_issue
    notes: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    reviewed_by: int | None = Field(default=None, foreign_key="app_user.id")
    reviewed_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    regression_case_id: str | None = Field(default=None, max_length=200)


class CadenceReview(SQLModel, table=True):
    """Someone marked one review of the plan's cadence done: which review, which period, who, when.

    kind: metrics_daily (a pilot day, "2026-11-03"), eval_weekly (an ISO week, "2026-W47") or
    eval_biweekly (two weeks named by their first Monday, "2026-11-16").
    """

    __tablename__: ClassVar[str] = "cadence_review"
    __table_args__ = (UniqueConstraint("kind", "period", "user_id", name="uq_cadence_review_kind_period_user"),)

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=20, index=True)
    period: str = Field(max_length=10)
    user_id: int = Field(foreign_key="app_user.id")
    role: str = Field(max_length=20)  # the role the person marked it as
    note: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    done_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
