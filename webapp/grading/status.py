"""Final grades and where each draft of a run stands (the contract other domains call)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from sqlmodel import Session, col, select

from webapp.core.db import stored_id
from webapp.core.timeutil import as_utc
from webapp.grading.models import (
    Adjudication,
    FinalGrade,
)
from webapp.grading.queue import gradable
from webapp.runs.models import Draft


@dataclass(frozen=True)
class FinalGradeView:
    """A draft's final grade as other domains read it."""

    draft_id: int
    factual_accuracy: str
    citation_relevance: float
    tone: float
    completeness: float
    source: str
    decided_at: dt.datetime


def final_grades(*, session: Session, run_id: int) -> dict[int, FinalGradeView]:
    """Return the final grades of a run's drafts, keyed by draft id."""
    rows = session.exec(
        select(FinalGrade).join(Draft, col(Draft.id) == FinalGrade.draft_id).where(Draft.run_id == run_id)
    )
    return {
        f.draft_id: FinalGradeView(
            draft_id=f.draft_id,
            factual_accuracy=f.factual_accuracy,
            citation_relevance=f.citation_relevance,
            tone=f.tone,
            completeness=f.completeness,
            source=f.source,
            decided_at=as_utc(f.decided_at),
        )
        for f in rows
    }


@dataclass
class GradingStatus:
    """Where each gradable draft of a run stands: needs_grades, in_adjudication or final."""

    run_id: int
    states: dict[int, str] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        """Return how many drafts are in each state (all three keys present) and the total."""
        out = {"needs_grades": 0, "in_adjudication": 0, "final": 0}
        for state in self.states.values():
            out[state] += 1
        out["total"] = len(self.states)
        return out

    def drafts_in(self, state: str) -> list[int]:
        """Return the ids of drafts in a state, in id order."""
        return sorted(d for d, s in self.states.items() if s == state)


def grading_status(*, session: Session, run_id: int, only: list[int] | None = None) -> GradingStatus:
    """Return the grading state of every gradable draft of a run (escalations and fallbacks are not graded).

    `only` narrows it to those drafts of the run (a page of the batch page). One query: the final
    grade and the adjudication (one each per draft at most, unique on draft_id) joined to the
    drafts, not two IN lists of every draft id (the gate sweep reads this for a whole run).
    """
    stmt = gradable(
        select(Draft.id, FinalGrade.draft_id, Adjudication.status)
        .outerjoin(FinalGrade, col(FinalGrade.draft_id) == Draft.id)
        .outerjoin(Adjudication, col(Adjudication.draft_id) == Draft.id)
        .where(Draft.run_id == run_id)
    )
    if only is not None:
        stmt = stmt.where(col(Draft.id).in_(only))
    status = GradingStatus(run_id=run_id)
    for draft_id, final, adjudication in session.exec(stmt):
        status.states[stored_id(draft_id)] = (
            "final" if final is not None else "in_adjudication" if adjudication in ("open", "rework") else "needs_grades"
        )
    return status
