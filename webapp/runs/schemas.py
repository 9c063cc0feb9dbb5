"""JSON API shapes of runs and drafts."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from webapp.core.public import PublicModel
from webapp.datasets.models import EvalCase
from webapp.runs.models import Draft, DraftBase, RunBase
from webapp.runs.service import RunRow
from webapp.web.api_schemas import Timestamp


class DatasetRef(PublicModel):
    """The dataset version a run was made over."""

    id: int
    name: str
    version: int


class RunPublic(RunBase, PublicModel):
    """A run with its dataset and draft counts."""

    id: int
    model_version: str = Field(description="The model that drafted: the same as `model` (the pipeline's name for it)")
    state: Literal["open", "closed"] = Field(description="open: takes drafts; closed: completed, its drafts no longer change")
    closed_at: Timestamp | None = Field(description="When the run was completed (null while open)")
    created_at: Timestamp
    dataset: DatasetRef | None
    drafts: int
    escalated: int
    fallbacks: int

    @classmethod
    def of_row(cls, summary: RunRow) -> RunPublic:
        """Return a run of the runs list as the API answers it: the run's row, its state, dataset and counts."""
        r, ds = summary.run, summary.dataset
        return cls.of(
            r,
            model_version=r.model,
            state="open" if r.closed_at is None else "closed",
            dataset=None if ds is None else DatasetRef.of(ds),
            drafts=summary.drafts,
            escalated=summary.escalated,
            fallbacks=summary.fallbacks,
        )


class DraftPublic(DraftBase, PublicModel):
    """A draft with its case's id, category and golden flag."""

    id: int
    case_id: str
    category: str | None
    golden: bool
    created_at: Timestamp
    signals_hidden: bool = Field(
        description="True while blind grading hides the draft's confidence and raw output (null) until the caller grades it"
    )

    @classmethod
    def of_case(cls, draft: Draft, case_row: EvalCase, *, signals_hidden: bool = False) -> DraftPublic:
        """Return a draft as the API answers it: its row, with its case's id, category and golden flag.

        With `signals_hidden` (blind grading) the confidence and the raw output, which carries it, are null.
        """
        hidden: dict[str, object] = {"confidence": None, "raw_output": None} if signals_hidden else {}
        return cls.of(
            draft, case_id=case_row.case_id, category=case_row.category, golden=case_row.golden, signals_hidden=signals_hidden, **hidden
        )


class RunDraftsPublic(BaseModel):
    """A run and every draft of it."""

    run: RunPublic
    drafts: list[DraftPublic]


# --- the pipeline's API (webapp/runs/pipeline.py) ---------------------------------------------------

class RunCreate(BaseModel):
    """What the team's CI says about a run it is about to push."""

    name: str = Field(max_length=200, description="The run's name, unique (e.g. the CI job's build id)", examples=["ci-4711"])
    dataset: str = Field(
        max_length=210,
        description="The dataset the run drafted over: a name (its newest version), `name@version`, or an id",
        examples=["support-eval@3"],
    )
    model_version: str | None = Field(default=None, max_length=200, description="The model that drafted (stored as `model`)")
    prompt_version: str | None = Field(default=None, max_length=200, description="The prompt's version")
    retrieval_version: str | None = Field(default=None, max_length=200, description="The retrieval pipeline's version")
    commit: str | None = Field(default=None, max_length=200, description="The drafting code's commit (a git SHA)")
    notes: str | None = Field(default=None, max_length=10_000, description="Free text shown on the run's page")


class DraftBatchPublic(BaseModel):
    """What a batch of drafts did: each record created, already stored as sent, or replaced."""

    created: int = Field(description="Drafts stored for the first time")
    unchanged: int = Field(description="Drafts already stored with exactly this content (a retried batch)")
    replaced: int = Field(description="Stored drafts given new content (only with replace=true, while the run is open)")
