"""JSON API: agents' survey answers and the counts."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, Field

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.survey import service
from webapp.survey.models import Helpful
from webapp.survey.schemas import SurveyAnswerPublic, SurveyCountsPublic
from webapp.web.deps import require_role, require_scope

router = APIRouter(tags=["survey"])
READERS = ("support_lead", "pm", "lead", "ml_lead", "admin")


class SurveyAnswerIn(BaseModel):
    agent_id: str = Field(min_length=1, max_length=120)
    helpful: Helpful
    comment: str = Field(default="", max_length=4000)
    round: str | None = None


@router.post(
    "/survey",
    summary="Record an agent's survey answer",
    description=(
        "An agent tool (an `ingest` token), the support lead or the admin records an agent's answer to "
        "the pilot survey; a repeat replaces the earlier answer."
    ),
    status_code=200,
)
def post_answer(
    body: SurveyAnswerIn,
    session: SessionDep,
    principal: Principal = Depends(require_scope("ingest", "support_lead", "admin")),
) -> SurveyAnswerPublic:
    """Record an agent's answer (an agent tool's `ingest` token); a repeat replaces the earlier answer."""
    try:
        answer = service.record_answer(
            session=session, agent_id=body.agent_id, helpful=body.helpful, comment=body.comment, round_name=body.round
        )
    except service.SurveyError as exc:
        field, _, msg = str(exc).partition(": ")
        raise HTTPException(422, detail=[{"field": field, "message": msg}]) from exc
    return SurveyAnswerPublic.of(answer)


@router.get(
    "/survey",
    summary="Read the survey's counts",
    description=(
        "The support lead, the PM and leads read the newest survey round's counts and net score for the "
        "gates."
    ),
)
def get_counts(session: SessionDep, principal: Principal = Depends(require_role(*READERS))) -> SurveyCountsPublic:
    """Return the newest round's counts and net score."""
    c = service.counts(session=session)
    return SurveyCountsPublic(
        round=c.round_name, yes=c.yes, no=c.no, neutral=c.neutral, total=c.total, net=c.net, net_positive=c.net_positive
    )
