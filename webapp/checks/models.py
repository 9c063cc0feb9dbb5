"""Stored results of the automated checks: one row per draft and check, replaced on re-check."""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

from sqlalchemy import Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel
from sqlmodel.sql.sqltypes import AutoString

from webapp.checks.types import CheckStatus
from webapp.core.timeutil import aware_datetime_type, utcnow


class DraftCheck(SQLModel, table=True):
    """The result of one check on one draft, with the KB state it was computed against."""

    __tablename__: ClassVar[str] = "draft_check"
    __table_args__ = (UniqueConstraint("draft_id", "key", name="uq_draft_check_draft_key"),)

    id: int | None = Field(default=None, primary_key=True)
    draft_id: int = Field(foreign_key="draft.id", index=True, ondelete="CASCADE")
    # Denormalised so that a run's results are one indexed query, not a join through draft.
    run_id: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    key: str = Field(max_length=40)
    status: CheckStatus = Field(sa_type=AutoString(length=16))
    reason: str = Field(sa_column=Column(Text, nullable=False))
    checked_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    # A digest of every KB revision and its status when the check ran: a different digest now
    # means the KB changed since, and the run should be re-checked.
    kb_version: str = Field(max_length=80)
