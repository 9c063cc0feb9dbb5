"""Knowledge-base articles and their revisions; a stored revision never changes.

A revision keeps the status it was stored with; the article's state is its newest revision's, and
what each older revision is now follows from it (webapp.kb.snapshot.revision_states). The mapper
refuses an UPDATE or DELETE of a stored revision (`_refuse_change`), so no code path can rewrite
one: a change is a new revision (webapp/kb/sync.py).
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar, Literal

from sqlalchemy import Column, Text, UniqueConstraint, event
from sqlmodel import Field, SQLModel
from sqlmodel.sql.sqltypes import AutoString

from webapp.core.timeutil import aware_datetime_type, utcnow

RevisionStatus = Literal["current", "deprecated", "deleted"]
REVISION_STATUSES: tuple[RevisionStatus, ...] = ("current", "deprecated", "deleted")


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
    )

    id: int | None = Field(default=None, primary_key=True)
    article_id: str = Field(foreign_key="kb_article.article_id", max_length=40, index=True)
    revision: int = Field(ge=1)
    title: str = Field(max_length=300)
    body: str = Field(sa_column=Column(Text, nullable=False))
    status: RevisionStatus = Field(sa_type=AutoString(length=12))
    effective_date: dt.date


class KbRevisionImmutable(RuntimeError):
    """Something tried to change or delete a stored KB revision."""


@event.listens_for(KbRevision, "before_update")
@event.listens_for(KbRevision, "before_delete")
def _refuse_change(mapper: object, connection: object, target: KbRevision) -> None:
    """Refuse to flush a change to a stored revision: stored revisions never change (issue 41)."""
    raise KbRevisionImmutable(
        f"{target.article_id} revision {target.revision} is stored and never changes: a change is a new revision"
    )
