"""Human grading: grades and their history, grading slots (reservations), final grades,
adjudications, and versioned reference responses."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar, Literal

from sqlalchemy import JSON, Column, Index, Text, UniqueConstraint
from sqlmodel import AutoString, Field, SQLModel

from webapp.core.timeutil import aware_datetime_type, utcnow

# The states and kinds grading stores, as strings in their columns (the attribute is typed, the column is text).
FactualVerdict = Literal["pass", "fail"]
GradeStatus = Literal["submitted", "returned"]
GradeAction = Literal["create", "revise", "return"]
AdjudicationStatus = Literal["open", "rework", "resolved", "dissolved"]
FinalSource = Literal["agreement", "adjudication"]


class Grade(SQLModel, table=True):
    """One grader's scores of one draft; at most one per (draft, grader)."""

    __tablename__: ClassVar[str] = "grade"
    __table_args__ = (
        UniqueConstraint("draft_id", "grader_id", name="uq_grade_draft_grader"),
        # a grader's grades newest first ("Previous" on every grading page): read from the index's
        # end, not sorted from all of them (2 ms per page for a grader with 3,000 grades)
        Index("ix_grade_grader_recent", "grader_id", "created_at", "id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    draft_id: int = Field(foreign_key="draft.id", index=True, ondelete="CASCADE")
    grader_id: int = Field(foreign_key="app_user.id")
    factual_accuracy: FactualVerdict = Field(sa_type=AutoString(length=4))
    citation_relevance: int
    tone: int
    completeness: int
    rationale: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    unsupported_claim: str | None = Field(default=None, sa_column=Column(Text))
    status: GradeStatus = Field(default="submitted", sa_type=AutoString(length=12))
    return_comment: str | None = Field(default=None, sa_column=Column(Text))
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    updated_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class GradeChange(SQLModel, table=True):
    """An entry of a grade's history: who changed it, when, and its scores before and after."""

    __tablename__: ClassVar[str] = "grade_change"

    id: int | None = Field(default=None, primary_key=True)
    grade_id: int = Field(foreign_key="grade.id", index=True, ondelete="CASCADE")
    changed_by: int = Field(foreign_key="app_user.id")
    action: GradeAction = Field(sa_type=AutoString(length=12))
    before: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    after: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    comment: str | None = Field(default=None, sa_column=Column(Text))
    changed_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class GradingSlot(SQLModel, table=True):
    """One of the graders_per_draft places of a draft: reserved until expires_at, or held by a grade.

    The unique (draft_id, slot) keeps live reservations plus grades at most graders_per_draft;
    the unique (draft_id, grader_id) keeps one place per grader.
    """

    __tablename__: ClassVar[str] = "grading_slot"
    __table_args__ = (
        UniqueConstraint("draft_id", "slot", name="uq_grading_slot_draft_slot"),
        UniqueConstraint("draft_id", "grader_id", name="uq_grading_slot_draft_grader"),
    )

    id: int | None = Field(default=None, primary_key=True)
    draft_id: int = Field(foreign_key="draft.id", index=True, ondelete="CASCADE")
    slot: int
    grader_id: int = Field(foreign_key="app_user.id", index=True)
    grade_id: int | None = Field(default=None, foreign_key="grade.id", ondelete="CASCADE")
    reserved_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    expires_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())


class Adjudication(SQLModel, table=True):
    """A draft whose grades disagree: open, sent back for rework, resolved by the lead, or dissolved."""

    __tablename__: ClassVar[str] = "adjudication"

    id: int | None = Field(default=None, primary_key=True)
    draft_id: int = Field(foreign_key="draft.id", unique=True, index=True, ondelete="CASCADE")
    status: AdjudicationStatus = Field(default="open", sa_type=AutoString(length=12), index=True)
    reasons: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    note: str | None = Field(default=None, sa_column=Column(Text))
    opened_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    resolved_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    resolved_by: int | None = Field(default=None, foreign_key="app_user.id")


class FinalGrade(SQLModel, table=True):
    """The grade a draft ends with: the mean of agreeing grades, or the lead's adjudication."""

    __tablename__: ClassVar[str] = "final_grade"

    id: int | None = Field(default=None, primary_key=True)
    draft_id: int = Field(foreign_key="draft.id", unique=True, index=True, ondelete="CASCADE")
    factual_accuracy: FactualVerdict = Field(sa_type=AutoString(length=4))
    citation_relevance: float
    tone: float
    completeness: float
    source: FinalSource = Field(sa_type=AutoString(length=12))
    decided_by: int | None = Field(default=None, foreign_key="app_user.id")
    note: str | None = Field(default=None, sa_column=Column(Text))
    decided_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class ReferenceVersion(SQLModel, table=True):
    """One version of the reference response of a test case; every edit is a new version."""

    __tablename__: ClassVar[str] = "reference_version"
    __table_args__ = (UniqueConstraint("case_pk", "version", name="uq_reference_case_version"),)

    id: int | None = Field(default=None, primary_key=True)
    case_pk: int = Field(foreign_key="eval_case.id", index=True, ondelete="CASCADE")
    version: int
    text: str = Field(sa_column=Column(Text, nullable=False))
    note: str = Field(default="", max_length=500)
    author_id: int = Field(foreign_key="app_user.id")
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    approved_by: int | None = Field(default=None, foreign_key="app_user.id")
    approved_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())


class ReferenceGrade(SQLModel, table=True):
    """A grade of a reference version against the rubric (one per grader and version)."""

    __tablename__: ClassVar[str] = "reference_grade"
    __table_args__ = (UniqueConstraint("reference_id", "grader_id", name="uq_reference_grade_grader"),)

    id: int | None = Field(default=None, primary_key=True)
    reference_id: int = Field(foreign_key="reference_version.id", index=True, ondelete="CASCADE")
    grader_id: int = Field(foreign_key="app_user.id")
    factual_accuracy: FactualVerdict = Field(sa_type=AutoString(length=4))
    citation_relevance: int
    tone: int
    completeness: int
    rationale: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    unsupported_claim: str | None = Field(default=None, sa_column=Column(Text))
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class GradingSkip(SQLModel, table=True):
    """A grader passed on a draft, with a reason; the draft goes to the end of that grader's queue."""

    __tablename__: ClassVar[str] = "grading_skip"

    id: int | None = Field(default=None, primary_key=True)
    draft_id: int = Field(foreign_key="draft.id", index=True, ondelete="CASCADE")
    grader_id: int = Field(foreign_key="app_user.id", index=True)
    reason: str = Field(max_length=20)  # a key of service.SKIP_REASONS
    detail: str = Field(default="", max_length=500)
    skipped_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class GradingPlan(SQLModel, table=True):
    """A draft a run's human-grading sample drew, and its place in the run's random grading order.

    When a run has any row here, only these drafts are gradable, in rank order (webapp.ppi draws
    the sample before grading and writes the plan); a run without rows is graded whole, in case order.
    A row with `closed_reason` is no longer gradable (a run graded until decided closed before it).
    """

    __tablename__: ClassVar[str] = "grading_plan"

    draft_id: int = Field(foreign_key="draft.id", primary_key=True, ondelete="CASCADE")
    run_id: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    rank: int
    closed_reason: str | None = Field(default=None, max_length=200)
