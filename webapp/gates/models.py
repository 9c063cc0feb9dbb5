"""Sign-offs of a launch-gate decision: who, when, and the report exactly as it was."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import JSON, Column, Index, Text
from sqlmodel import Field, SQLModel

from webapp.core.timeutil import aware_datetime_type, utcnow

# One sign-off per person per gate and run, enforced by the database: two requests that pass the
# service's "already signed?" check at the same moment (PostgreSQL) cannot both store a row, and a
# person holding both required roles (PM and ML lead) cannot sign twice to meet the two-person rule alone.
SIGNOFF_PERSON_INDEX = "uq_gate_signoff_person"


class GateSignoff(SQLModel, table=True):
    __tablename__: ClassVar[str] = "gate_signoff"
    __table_args__ = (Index(SIGNOFF_PERSON_INDEX, "gate", "run_id", "user_id", unique=True),)

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
