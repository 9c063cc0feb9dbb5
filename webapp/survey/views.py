"""The survey page's view model, built by a named query function."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session

from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.survey import service
from webapp.survey.models import SurveyAnswer, SurveyRound


@dataclass(frozen=True)
class SurveyView:
    """/survey: one round's counts and answers (the newest by default), every round's results, the forms."""

    round: SurveyRound | None  # the open round (answers go to it)
    shown: SurveyRound | None  # the round the page shows
    is_newest: bool
    counts: service.SurveyCounts
    answers: list[SurveyAnswer]
    round_results: list[tuple[SurveyRound, service.SurveyCounts]]
    min_responses: int
    can_write: bool
    error: str | None


def survey_view(
    *, session: Session, spec: EvalSpec, round_id: int | None, can_write: bool, error: str | None = None
) -> SurveyView:
    """Build the survey page for a round (None: the newest); raise LookupError for an unknown round."""
    results = service.round_results(session=session)
    newest = results[0][0] if results else None
    shown = next((r for r, _ in results if r.id == round_id), None) if round_id is not None else newest
    if round_id is not None and shown is None:
        raise LookupError(f"round: no survey round with id {round_id}")
    counts = next((c for r, c in results if shown is not None and r.id == shown.id), service.counts(session=session))
    return SurveyView(
        round=service.current_round(session=session),
        shown=shown,
        is_newest=shown is not None and newest is not None and shown.id == newest.id,
        counts=counts,
        answers=service.answers(session=session, round_id=stored_id(shown.id)) if shown else [],
        round_results=results,
        min_responses=spec.gates.production.survey_min_responses,
        can_write=can_write,
        error=error,
    )
