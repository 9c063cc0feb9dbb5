"""JSON API shapes of runs and drafts."""

from __future__ import annotations

from pydantic import BaseModel, Field

from webapp.runs.models import DraftBase, RunBase
from webapp.web.api_schemas import Timestamp


class DatasetRef(BaseModel):
    """The dataset version a run was made over."""

    id: int
    name: str
    version: int


class RunPublic(RunBase):
    """A run with its dataset and draft counts."""

    id: int
    created_at: Timestamp
    dataset: DatasetRef | None
    drafts: int
    escalated: int
    fallbacks: int


class DraftPublic(DraftBase):
    """A draft with its case's id, category and golden flag."""

    id: int
    case_id: str
    category: str | None
    golden: bool
    created_at: Timestamp
    signals_hidden: bool = Field(
        description="True while blind grading hides the draft's confidence and raw output (null) until the caller grades it"
    )


class RunDraftsPublic(BaseModel):
    """A run and every draft of it."""

    run: RunPublic
    drafts: list[DraftPublic]
