"""The agent feedback survey: rounds, and one answer per agent per round (the latest counts)."""

from __future__ import annotations

import datetime as dt
from typing import ClassVar, Literal, get_args

from sqlalchemy import Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel
from sqlmodel.sql.sqltypes import AutoString

from webapp.core.timeutil import aware_datetime_type, utcnow

Helpful = Literal["yes", "no", "neutral"]
HELPFUL_CHOICES: tuple[Helpful, ...] = get_args(Helpful)


class SurveyRound(SQLModel, table=True):
    __tablename__: ClassVar[str] = "survey_round"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=120, unique=True)
    opened_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    closed_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())


class SurveyAnswer(SQLModel, table=True):
    __tablename__: ClassVar[str] = "survey_answer"
    __table_args__ = (UniqueConstraint("round_id", "agent_id", name="uq_survey_answer_round_agent"),)

    id: int | None = Field(default=None, primary_key=True)
    round_id: int = Field(foreign_key="survey_round.id", index=True)
    agent_id: str = Field(max_length=120)
    helpful: Helpful = Field(sa_type=AutoString(length=8))
    comment: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    answered_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    times_answered: int = 1
