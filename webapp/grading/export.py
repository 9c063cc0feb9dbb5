"""Export of a run's final grades with both graders' scores (CSV and JSON Lines)."""

from __future__ import annotations

import json

from sqlmodel import Session, col, select

from webapp.auth.models import User
from webapp.core.csv_export import csv_dict_text
from webapp.core.timeutil import as_utc
from webapp.datasets.models import EvalCase
from webapp.grading.models import (
    FinalGrade,
    Grade,
)
from webapp.grading.schemas import FinalGradeRow
from webapp.grading.scores import scores_of
from webapp.runs.models import Draft

EXPORT_COLUMNS = [
    "draft_id",
    "case_id",
    "category",
    "final_source",
    "final_factual_accuracy",
    "final_citation_relevance",
    "final_tone",
    "final_completeness",
    "decided_at",
    "adjudication_note",
    "adjudicated_by",
    "grader_1",
    "grader_1_factual_accuracy",
    "grader_1_citation_relevance",
    "grader_1_tone",
    "grader_1_completeness",
    "grader_1_rationale",
    "grader_1_unsupported_claim",
    "grader_2",
    "grader_2_factual_accuracy",
    "grader_2_citation_relevance",
    "grader_2_tone",
    "grader_2_completeness",
    "grader_2_rationale",
    "grader_2_unsupported_claim",
]


def export_rows(*, session: Session, run_id: int) -> list[FinalGradeRow]:
    """Return one row per finally graded draft of a run: the final grade, both graders' scores, the adjudication."""
    users = {u.id: u.email for u in session.exec(select(User))}
    rows: list[FinalGradeRow] = []
    stmt = (
        select(FinalGrade, Draft, EvalCase)
        .join(Draft, col(Draft.id) == FinalGrade.draft_id)
        .join(EvalCase, col(EvalCase.id) == Draft.case_pk)
        .where(Draft.run_id == run_id)
        .order_by(col(EvalCase.position), col(Draft.id))
    )
    for final, draft, case in session.exec(stmt):
        grades = list(session.exec(select(Grade).where(Grade.draft_id == draft.id).order_by(col(Grade.id))))
        row: dict[str, object] = {
            "draft_id": draft.id,
            "case_id": case.case_id,
            "category": case.category,
            "final_source": final.source,
            "final_factual_accuracy": final.factual_accuracy,
            "final_citation_relevance": final.citation_relevance,
            "final_tone": final.tone,
            "final_completeness": final.completeness,
            "decided_at": as_utc(final.decided_at).isoformat(),
            "adjudication_note": final.note,
            "adjudicated_by": users.get(final.decided_by) if final.decided_by else None,
        }
        for i, g in enumerate(grades[:2], start=1):
            row[f"grader_{i}"] = users.get(g.grader_id)
            for key, value in scores_of(g).items():
                row[f"grader_{i}_{key}"] = value
        rows.append(FinalGradeRow.model_validate({c: row.get(c) for c in EXPORT_COLUMNS}))
    return rows


def export_csv(*, session: Session, run_id: int) -> str:
    """Return the run's final grades as CSV text."""
    # Rationales, notes and case ids are other people's text: the shared writer neutralises formulas.
    return csv_dict_text(EXPORT_COLUMNS, [row.model_dump() for row in export_rows(session=session, run_id=run_id)])


def export_jsonl(*, session: Session, run_id: int) -> str:
    """Return the run's final grades as JSON Lines."""
    return "".join(
        json.dumps(row.model_dump(), ensure_ascii=False) + "\n" for row in export_rows(session=session, run_id=run_id)
    )
