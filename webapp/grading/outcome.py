"""A draft's outcome from its grades: needs grades, rework, in adjudication, or a final grade."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from functools import lru_cache

from sqlalchemy import bindparam, delete, func, update
from sqlalchemy import select as core_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Executable
from sqlmodel import Session, select

from webapp.core.db import table_of
from webapp.core.facts import record_fact
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow
from webapp.grading.models import (
    Adjudication,
    FinalGrade,
    Grade,
)
from webapp.grading.scores import FACTUAL_KEY, all_reasons


def upsert_final(session: Session, draft_id: int, values: Mapping[str, object]) -> FinalGrade:
    """Set the draft's final grade (insert or update) and return it; callers record `finalised` afterwards.

    The same upsert as a final grade by agreement (evaluate_draft), run now rather than deferred.
    """
    session.flush()
    stmt = _upsert_stmt(session.get_bind().dialect.name, _FINALS.name)
    session.connection().execute(stmt, {"draft_id": draft_id, **values})
    _expire_loaded(session, draft_id)
    return session.exec(select(FinalGrade).where(FinalGrade.draft_id == draft_id)).one()


def finalised(session: Session, draft_id: int, outcome: str | None = None) -> None:
    """Record "draft_finalised" after a grade, revision or adjudication of the draft, unless it still needs grades.

    `outcome` is the draft's outcome when the caller knows it: a draft that still needs grades has
    no final grade, so nothing reacts (most saves: a draft's first grade). The reactions
    (regression's golden alerts, ppi's sampled drop) read the final grade themselves.
    """
    if outcome != "needs_grades":
        record_fact(session, "draft_finalised", draft_id=draft_id)


_GRADES = table_of(Grade)
_ADJUDICATIONS = table_of(Adjudication)
# How many grades the draft has, how many were returned, and its adjudication's status: enough to
# tell "still needs grades" (most saves) without loading anything.
_SHORT_OF_GRADES = core_select(
    core_select(func.count()).where(_GRADES.c.draft_id == bindparam("draft_id")).scalar_subquery(),
    core_select(func.count())
    .where(_GRADES.c.draft_id == bindparam("draft_id"), _GRADES.c.status == "returned")
    .scalar_subquery(),
    core_select(_ADJUDICATIONS.c.status)
    .where(_ADJUDICATIONS.c.draft_id == bindparam("draft_id"))
    .scalar_subquery(),
)


_FINALS = table_of(FinalGrade)
_DRAFT = bindparam("draft_id")
# A draft's grades, adjudication and final grade: read here and by the grading page (webapp.grading.item).
GRADES_OF = core_select(_GRADES).where(_GRADES.c.draft_id == _DRAFT).order_by(_GRADES.c.id)
ADJUDICATION_OF = core_select(_ADJUDICATIONS).where(_ADJUDICATIONS.c.draft_id == _DRAFT)
FINAL_OF = core_select(_FINALS).where(_FINALS.c.draft_id == _DRAFT)


def grades_of(*, session: Session, draft_id: int) -> list[Grade]:
    """Return the draft's grades, oldest first, as detached rows (read with Core, nothing enters the session)."""
    rows = session.connection().execute(GRADES_OF, {"draft_id": draft_id}).mappings()
    return [Grade(**row) for row in rows]


def adjudication_of(*, session: Session, draft_id: int) -> Adjudication | None:
    """Return the draft's adjudication (None when its grades never disagreed), detached."""
    row = session.connection().execute(ADJUDICATION_OF, {"draft_id": draft_id}).mappings().first()
    return Adjudication(**row) if row is not None else None


def final_of(*, session: Session, draft_id: int) -> FinalGrade | None:
    """Return the draft's final grade (None while it has none), detached."""
    row = session.connection().execute(FINAL_OF, {"draft_id": draft_id}).mappings().first()
    return FinalGrade(**row) if row is not None else None


# (a write's parameters may not share a column's name: "d", not "draft_id")
_DISSOLVE = (
    update(_ADJUDICATIONS)
    .where(_ADJUDICATIONS.c.draft_id == bindparam("d"))
    .values(status="dissolved", resolved_at=bindparam("at"))
)
_REWORK = update(_ADJUDICATIONS).where(_ADJUDICATIONS.c.draft_id == bindparam("d")).values(status="rework")
_DROP_FINAL = delete(_FINALS).where(_FINALS.c.draft_id == bindparam("d"))


@lru_cache(maxsize=4)
def _upsert_stmt(dialect: str, table_name: str) -> Executable:
    """INSERT ... ON CONFLICT (draft_id) DO UPDATE of the final grade or the adjudication (one row per draft)."""
    table = {t.name: t for t in (_FINALS, _ADJUDICATIONS)}[table_name]
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(table)
    # An adjudication opened again keeps its opening time, note and decider; a final grade is replaced.
    kept = (
        {"id", "draft_id", "opened_at", "note", "resolved_by"}
        if table is _ADJUDICATIONS
        else {"id", "draft_id"}
    )
    return stmt.on_conflict_do_update(
        index_elements=[table.c.draft_id],
        set_={c.name: stmt.excluded[c.name] for c in table.c if c.name not in kept},
    )


def evaluate_draft(*, session: Session, spec: EvalSpec, draft_id: int, now: dt.datetime | None = None) -> str:
    """Recompute a draft's outcome from its grades; return needs_grades, rework, in_adjudication or final.

    Reads and writes with Core statements (a second grade of a draft ran eight ORM statements
    here). An Adjudication or FinalGrade of the draft already loaded in the session is
    expired, so that it is read again.
    """
    now = now or utcnow()
    n_grades, n_returned, status = session.connection().execute(_SHORT_OF_GRADES, {"draft_id": draft_id}).one()
    if status == "resolved":
        return "final"
    if not n_returned and n_grades < spec.grading.graders_per_draft:
        return "needs_grades"
    adjudication_row = adjudication_of(session=session, draft_id=draft_id)
    adjudication = adjudication_row.status if adjudication_row is not None else None
    grades = grades_of(session=session, draft_id=draft_id)
    has_final = final_of(session=session, draft_id=draft_id) is not None
    if adjudication == "resolved":
        return "final"
    _expire_loaded(session, draft_id)
    dialect = session.get_bind().dialect.name
    conn = session.connection()
    if any(g.status == "returned" for g in grades):
        if adjudication is not None:
            conn.execute(_REWORK, {"d": draft_id})
        return "rework"
    if len(grades) < spec.grading.graders_per_draft:
        return "needs_grades"
    reasons = all_reasons(spec, grades)
    if not reasons and adjudication == "open":
        # Only the revision of a grade the lead returned (status "rework") may dissolve a disagreement.
        return "in_adjudication"
    if not reasons:
        conn.execute(_upsert_stmt(dialect, _FINALS.name), _agreed_final(draft_id, grades, now))
        if adjudication in ("open", "rework"):
            # the reworked grades now agree: no decision needed
            conn.execute(_DISSOLVE, {"d": draft_id, "at": now})
        return "final"
    if has_final:
        conn.execute(_DROP_FINAL, {"d": draft_id})  # a revision broke an earlier agreement
    opened = {
        "draft_id": draft_id,
        "status": "open",
        "reasons": reasons,
        "opened_at": now,
        "resolved_at": None,
    }
    conn.execute(_upsert_stmt(dialect, _ADJUDICATIONS.name), opened)
    return "in_adjudication"


def _agreed_final(draft_id: int, grades: list[Grade], now: dt.datetime) -> dict[str, object]:
    """Return the final grade of agreeing grades: factual pass only if all pass, the mean of each scale."""
    n = len(grades)
    return {
        "draft_id": draft_id,
        FACTUAL_KEY: "pass" if all(g.factual_accuracy == "pass" for g in grades) else "fail",
        "citation_relevance": sum(g.citation_relevance for g in grades) / n,
        "tone": sum(g.tone for g in grades) / n,
        "completeness": sum(g.completeness for g in grades) / n,
        "source": "agreement",
        "decided_by": None,
        "note": None,
        "decided_at": now,
    }


def _expire_loaded(session: Session, draft_id: int) -> None:
    """Expire the draft's Adjudication and FinalGrade if the session has them loaded (they are written with Core)."""
    for obj in list(session.identity_map.values()):
        if isinstance(obj, Adjudication | FinalGrade) and obj.draft_id == draft_id:
            session.expire(obj)
