"""JSON API shapes of grading: grades, their history, adjudications, agreement and final grades."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from webapp.core.public import PublicModel
from webapp.grading.models import AdjudicationStatus, FactualVerdict, FinalSource, GradeAction, GradeStatus
from webapp.web.api_schemas import Timestamp


class GradePublic(PublicModel):
    """One grader's scores of one draft."""

    id: int
    draft_id: int
    grader_id: int
    factual_accuracy: FactualVerdict
    citation_relevance: int
    tone: int
    completeness: int
    rationale: str
    unsupported_claim: str | None
    status: GradeStatus
    return_comment: str | None
    created_at: Timestamp
    updated_at: Timestamp


class GradeChangePublic(PublicModel):
    """An entry of a grade's history: who changed it, when, and its scores before and after."""

    grade_id: int
    action: GradeAction
    changed_by: int
    changed_at: Timestamp
    before: dict[str, object] | None  # JSON column: the scores before the change
    after: dict[str, object] | None  # JSON column: the scores after it
    comment: str | None


class DraftGradesPublic(BaseModel):
    """Every grade of a draft the caller may see, and their history."""

    draft_id: int
    grades: list[GradePublic]
    history: list[GradeChangePublic]


class ReservedPublic(BaseModel):
    """The draft reserved for the caller, and for how long."""

    draft_id: int
    reserved_minutes: int


class AdjudicationPublic(PublicModel):
    """An adjudication with both grades side by side (`grades`: those the lead sees, given to `of`)."""

    id: int
    draft_id: int
    status: AdjudicationStatus
    reasons: list[str]
    note: str | None
    opened_at: Timestamp
    resolved_at: Timestamp | None
    resolved_by: int | None
    grades: list[GradePublic]


# Which adjudications a list shows: one status, or all.
AdjudicationFilter = Literal[AdjudicationStatus, "all"]


class AdjudicationsPublic(BaseModel):
    """Adjudications in one status (or all)."""

    status: AdjudicationFilter
    items: list[AdjudicationPublic]


class FinalGradePublic(PublicModel):
    """A draft's final grade and where it came from (both graders agreeing, or the lead)."""

    draft_id: int
    factual_accuracy: FactualVerdict
    citation_relevance: float
    tone: float
    completeness: float
    source: FinalSource
    note: str | None


class ResolvedPublic(BaseModel):
    """The lead resolved the adjudication with this final grade."""

    action: Literal["resolve"]
    final: FinalGradePublic


class ReturnedPublic(BaseModel):
    """The lead returned this grade to its grader for rework."""

    action: Literal["return"]
    grade: GradePublic


# What the lead did, told apart by `action`.
DecisionPublic = Annotated[ResolvedPublic | ReturnedPublic, Field(discriminator="action")]


class CriterionAgreementPublic(BaseModel):
    """Agreement on one criterion: exact agreement and Cohen's kappa (quadratic-weighted on scales)."""

    key: str
    name: str
    n: int
    exact_agreement: float | None
    kappa: float | None
    kappa_kind: Literal["cohen", "quadratic_weighted"]


class PairAgreementPublic(BaseModel):
    """Agreement of one pair of graders."""

    grader_ids: list[int]
    graders: list[str]
    n: int
    disagreement_rate: float | None
    criteria: list[CriterionAgreementPublic]


class WeekAgreementPublic(BaseModel):
    """Agreement of the pairs graded in one ISO week."""

    week: str
    n: int
    disagreement_rate: float | None
    criteria: list[CriterionAgreementPublic]


class GraderCriterionPublic(BaseModel):
    """A grader's mean score on one criterion and bias against the final grade."""

    key: str
    name: str
    mean: float | None
    bias: float | None
    n_final: int


class GraderPublic(BaseModel):
    """One grader's means and biases."""

    grader_id: int
    grader: str
    n: int
    criteria: list[GraderCriterionPublic]


class AgreementPublic(BaseModel):
    """Agreement per criterion, grader pair, grader and ISO week (the agreement page's numbers)."""

    run_id: int | None
    n_pairs: int
    disagreement_rate: float | None
    criteria: list[CriterionAgreementPublic]
    pairs: list[PairAgreementPublic]
    graders: list[GraderPublic]
    weeks: list[WeekAgreementPublic]


class FinalGradeRow(BaseModel):
    """A finally graded draft as exported: the final grade, the adjudication, both graders' scores (null when absent)."""

    draft_id: int
    case_id: str
    category: str | None
    final_source: str
    final_factual_accuracy: str
    final_citation_relevance: float
    final_tone: float
    final_completeness: float
    decided_at: Timestamp
    adjudication_note: str | None
    adjudicated_by: str | None
    grader_1: str | None
    grader_1_factual_accuracy: str | None
    grader_1_citation_relevance: int | None
    grader_1_tone: int | None
    grader_1_completeness: int | None
    grader_1_rationale: str | None
    grader_1_unsupported_claim: str | None
    grader_2: str | None
    grader_2_factual_accuracy: str | None
    grader_2_citation_relevance: int | None
    grader_2_tone: int | None
    grader_2_completeness: int | None
    grader_2_rationale: str | None
    grader_2_unsupported_claim: str | None


class FinalGradesPublic(BaseModel):
    """A run's grading counts and one row per finally graded draft (the export's columns)."""

    run_id: int
    counts: dict[str, int] = Field(description="Drafts needing grades, in adjudication, final, and the total")
    items: list[FinalGradeRow]
