"""JSON API shapes of the agents' survey."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class SurveyAnswerPublic(BaseModel):
    """An agent's recorded answer and how many times they answered this round."""

    agent_id: str
    helpful: Literal["yes", "no", "neutral"]
    times_answered: int


class SurveyCountsPublic(BaseModel):
    """The newest round's counts and net score (yes minus no); round null before any round."""

    round: str | None
    yes: int
    no: int
    neutral: int
    total: int
    net: int
    net_positive: bool
