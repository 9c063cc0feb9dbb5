"""Knowledge-base articles and their revisions; at most one revision of an article is current."""

from __future__ import annotations

import datetime as dt
from typing import ClassVar, Literal

from sqlalchemy import Column, Index, Text, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from webapp.core.timeutil import aware_datetime_type, utcnow

RevisionStatus = Literal["current", "deprecated", "deleted"]
REVISION_STATUSES: tuple[str, ...] = ("current", "deprecated", "deleted")


class KbArticle(SQLModel, table=True):
    __tablename__: ClassVar[str] = "kb_article"

    id: int | None = Field(default=None, primary_key=True)
    article_id: str = Field(max_length=40, unique=True, index=True)  # e.g. "KB-3001"
    intent: str | None = Field(default=None, max_length=60)
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class KbRevision(SQLModel, table=True):
    __tablename__: ClassVar[str] = "kb_revision"
    __table_args__ = (
        UniqueConstraint("article_id", "revision", name="uq_kb_revision_article_revision"),
        # "The current revision of an article" is a query that can return at most one row.
        Index(
            "uq_kb_revision_one_current",
            "article_id",
            unique=True,
            sqlite_where=text("status = 'current'"),
            postgresql_where=text("status = 'current'"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    article_id: str = Field(foreign_key="kb_article.article_id", max_length=40, index=True)
    revision: int = Field(ge=1)
    title: str = Field(max_length=300)
    body: str = Field(sa_column=Column(Text, nullable=False))
    status: str = Field(max_length=12)
    effective_date: dt.date
