"""Imported eval datasets (one row per version of a file) and their cases."""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

from pydantic import JsonValue
from sqlalchemy import JSON, Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from webapp.core.timeutil import aware_datetime_type, utcnow


class DatasetBase(SQLModel):
    """A dataset version's own fields, as stored and as the API shows them (webapp.datasets.schemas)."""

    name: str = Field(max_length=200, index=True)
    version: int = 1
    sha256: str = Field(max_length=71, index=True)  # "sha256:<64 hex>"
    format: str = Field(max_length=8)  # ".jsonl", ".yaml" or ".yml"
    count: int


class Dataset(DatasetBase, table=True):
    __tablename__: ClassVar[str] = "dataset"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_dataset_name_version"),)

    id: int | None = Field(default=None, primary_key=True)
    source_path: str = Field(default="", max_length=1000)
    imported_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class EvalCase(SQLModel, table=True):
    """One test case of a dataset: the format guide's fields, metadata, and typed support fields."""

    __tablename__: ClassVar[str] = "eval_case"
    __table_args__ = (
        UniqueConstraint("dataset_id", "case_id", name="uq_eval_case_dataset_case"),
        # The grading queue's order of a run without a plan (webapp/grading/queue.py, _in_batch).
        Index("ix_eval_case_dataset_position", "dataset_id", "position"),
    )

    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="dataset.id", index=True, ondelete="CASCADE")
    position: int
    case_id: str = Field(max_length=200)
    input: str = Field(sa_column=Column(Text, nullable=False))
    description: str | None = Field(default=None, sa_column=Column(Text))
    task: str | None = Field(default=None, sa_column=Column(Text))
    expected_constraints: str | None = Field(default=None, sa_column=Column(Text))
    reference: str | None = Field(default=None, sa_column=Column(Text))
    extra: dict[str, JsonValue] = Field(default_factory=dict, sa_column=Column("metadata", JSON, nullable=False))
    # Support-specific fields read from metadata where present.
    category: str | None = Field(default=None, max_length=20, index=True)
    intent: str | None = Field(default=None, max_length=60, index=True)
    account: dict[str, JsonValue] | None = Field(default=None, sa_column=Column(JSON))
    conversation: list[JsonValue] | None = Field(default=None, sa_column=Column(JSON))
    kb_articles: list[str] | None = Field(default=None, sa_column=Column(JSON))
    golden: bool = False
    expected_behavior: str | None = Field(default=None, max_length=20)  # draft | escalate | fallback
    # A case's expectations of the response, enforced by the `case_expectations` check.
    expected_confidence_above: float | None = None
    expected_confidence_min: float | None = None
    expected_confidence_max: float | None = None
    expected_citations: list[str] | None = Field(default=None, sa_column=Column(JSON))
