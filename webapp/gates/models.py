"""Sign-offs of a launch-gate decision: who, when, and the report exactly as it was."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import JSON, Column, Text
from sqlmodel import Field, SQLModel

from webapp.timeutil import aware_datetime_type, utcnow


class GateSignoff(SQLModel, table=True):
    __tablename__: ClassVar[str] = "gate_signoff"

    id: int | None = Field(default=None, primary_key=True)
    gate: str = Field(max_length=12, index=True)  # pilot | production
    run_id: int = Field(foreign_key="run.id", index=True)
    user_id: int = Field(foreign_key="app_user.id")
    role: str = Field(max_length=20)  # lead | pm
    verdict: str = Field(max_length=12)  # the report's status when signed
    decision: str = Field(max_length=12)  # go | no_go
    note: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    report: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    signed_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
