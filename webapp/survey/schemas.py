"""JSON API shapes of the agents' survey."""

from __future__ import annotations

from pydantic import BaseModel

from webapp.core.public import PublicModel
from webapp.survey.models import Helpful


class SurveyAnswerPublic(PublicModel):
    """An agent's recorded answer and how many times they answered this round."""

    agent_id: str
    helpful: Helpful
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
