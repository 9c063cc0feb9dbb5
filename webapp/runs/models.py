"""Runs of the drafting assistant over a dataset, and the drafts they produced."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from webapp.core.timeutil import aware_datetime_type, utcnow

# Run.source of a run made from one ISO week of production drafts (webapp/ppi/production.py): it is
# not a candidate for the launch gates or the regression suite, which read eval-dataset runs.
PRODUCTION_SOURCE = "production"


class RunBase(SQLModel):
    """A run's own fields, as stored and as the API shows them (webapp.runs.schemas.RunPublic)."""

    name: str = Field(max_length=200, unique=True, index=True)
    # The model that drafted; the pipeline's API calls it `model_version` (webapp/runs/pipeline.py).
    model: str = Field(default="", max_length=200)
    prompt_version: str = Field(default="", max_length=200)
    retrieval_version: str = Field(default="", max_length=200)
    # The drafting code's commit (e.g. a git SHA) the team's CI ran.
    commit: str = Field(default="", max_length=200)
    notes: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    source: str = Field(default="import", max_length=20)  # import | evaluator | demo | production
    is_baseline: bool = False


class Run(RunBase, table=True):
    __tablename__: ClassVar[str] = "run"

    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", index=True)
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    # When the run was completed (POST /api/v1/runs/{run}/complete): a closed run takes no more drafts.
    # NULL: the run is open.
    closed_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())


class DraftBase(SQLModel):
    """A draft's own fields, as stored and as the API shows them (webapp.runs.schemas.DraftPublic)."""

    run_id: int = Field(foreign_key="run.id", index=True, ondelete="CASCADE")
    sample_index: int = 0
    draft_text: str | None = Field(default=None, sa_column=Column(Text))
    # [{"article_id": "KB-3001", "revision": 4}, ...]
    citations: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    confidence: float | None = None
    intent: str | None = Field(default=None, max_length=60)
    escalated: bool = False
    latency_ms: int | None = None
    cost_usd: float | None = None
    raw_output: Any | None = Field(default=None, sa_column=Column(JSON))


class Draft(DraftBase, table=True):
    """One output of the assistant for one case (and sample): a draft, or a fallback, or an escalation."""

    __tablename__: ClassVar[str] = "draft"
    __table_args__ = (UniqueConstraint("run_id", "case_pk", "sample_index", name="uq_draft_run_case_sample"),)

    id: int | None = Field(default=None, primary_key=True)
    case_pk: int = Field(foreign_key="eval_case.id", index=True)
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
