"""Human grading: next item and reservations, grades and their history, blind visibility,
disagreement and adjudication, final grades, references, exports and agreement statistics."""

from __future__ import annotations

import csv
import datetime as dt
import io
import itertools
import json
import statistics
from collections import defaultdict
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import case as sql_case
from sqlalchemy import delete, func, or_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from webapp.auth.models import User
from webapp.auth.service import Principal
from webapp.checks.models import DraftCheck
from webapp.datasets.models import EvalCase
from webapp.evaluator.models import EvaluatorJudgeScore
from webapp.grading.models import (
    Adjudication,
    FinalGrade,
    Grade,
    GradeChange,
    GradingSkip,
    GradingSlot,
    ReferenceGrade,
    ReferenceVersion,
)
from webapp.grading.stats import cohen_kappa, exact_agreement
from webapp.kb.models import KbRevision
from webapp.runs.models import Draft
from webapp.spec import RUBRIC_COLUMNS, Criterion, EvalSpec
from webapp.timeutil import as_utc, utcnow

GRADER_ROLES = ("labeler", "lead")
# A second name for grade, for queries that compare a grade with the other grades of its draft.
GradeOfDraft = aliased(Grade)
# The grade tables' score columns; the spec's rubric must name exactly these (checked at start-up).
SCALE_KEYS = tuple(k for k, kind in RUBRIC_COLUMNS.items() if kind == "scale")
FACTUAL_KEY = "factual_accuracy"


# ---------------------------------------------------------------------------------------------
# Errors (routes map them to HTTP statuses)


class GradingError(Exception):
    """Base of grading errors; `status` is the HTTP status a route answers with."""

    status = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class GradeInvalid(GradingError):
    """A score or the rationale is not acceptable; `field` names it."""

    status = 422


class AlreadyGraded(GradingError):
    """The grader already graded this draft (revise instead)."""

    status = 409


class NoPlaceLeft(GradingError):
    """The draft already has the graders it needs (grades plus live reservations)."""

    status = 409


class GradeLocked(GradingError):
    """The grade cannot change now: the draft was adjudicated, or its disagreement waits for the lead."""

    status = 409


class GradesHidden(GradingError):
    """Blind grading: the caller may not see other grades of this draft yet."""

    status = 403


class NotAllowed(GradingError):
    """The caller may not do this (e.g. revise another grader's grade)."""

    status = 403


class NotFound(GradingError):
    """No such draft, grade, adjudication or reference."""

    status = 404


# ---------------------------------------------------------------------------------------------
# Scores


@dataclass(frozen=True)
class Scores:
    """A validated set of rubric scores with the rationale."""

    factual_accuracy: str
    citation_relevance: int
    tone: int
    completeness: int
    rationale: str = ""
    unsupported_claim: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Return the scores as a plain dict (for history and exports)."""
        return asdict(self)


def validate_scores(*, spec: EvalSpec, data: dict[str, Any], require_rationale: bool = False) -> Scores:
    """Check raw scores against the spec's rubric; raise GradeInvalid naming the first bad field."""
    factual = str(data.get(FACTUAL_KEY) or "").strip().lower()
    if factual not in ("pass", "fail"):
        raise GradeInvalid(
            f"{FACTUAL_KEY}: choose pass or fail (got {data.get(FACTUAL_KEY)!r})", field=FACTUAL_KEY
        )
    values: dict[str, int] = {}
    for criterion in spec.rubric.scales:
        raw = data.get(criterion.key)
        try:
            value = int(str(raw).strip()) if raw is not None and not isinstance(raw, bool) else None
            if value is not None and isinstance(raw, float) and raw != value:
                value = None
        except ValueError:
            value = None
        assert criterion.min is not None and criterion.max is not None
        if value is None or not criterion.min <= value <= criterion.max:
            raise GradeInvalid(
                f"{criterion.key}: score must be a whole number from {criterion.min} to {criterion.max} (got {raw!r})",
                field=criterion.key,
            )
        values[criterion.key] = value
    rationale = str(data.get("rationale") or "").strip()
    if require_rationale and not rationale:
        raise GradeInvalid("rationale: write a short rationale", field="rationale")
    claim = str(data.get("unsupported_claim") or "").strip() or None
    if factual == "fail" and not claim:
        raise GradeInvalid(
            "unsupported_claim: a factual 'fail' needs the claim that is not in the KB, quoted from the draft",
            field="unsupported_claim",
        )
    return Scores(
        factual_accuracy=factual,
        citation_relevance=values["citation_relevance"],
        tone=values["tone"],
        completeness=values["completeness"],
        rationale=rationale,
        unsupported_claim=claim if factual == "fail" else None,
    )


def _check_claim_in_draft(draft: Draft, scores: Scores) -> None:
    """A quoted claim must come from the draft, so the lead can find it (whitespace and case forgiven)."""
    if scores.unsupported_claim and draft.draft_text:
        needle = " ".join(scores.unsupported_claim.strip("\"'“”").split()).lower()
        hay = " ".join(draft.draft_text.split()).lower()
        if needle not in hay:
            raise GradeInvalid(
                "unsupported_claim: quote the claim exactly as it appears in the draft",
                field="unsupported_claim",
            )


def scores_of(grade: Grade | ReferenceGrade) -> dict[str, Any]:
    """Return a grade's scores and rationale as a plain dict."""
    return {
        FACTUAL_KEY: grade.factual_accuracy,
        "citation_relevance": grade.citation_relevance,
        "tone": grade.tone,
        "completeness": grade.completeness,
        "rationale": grade.rationale,
        "unsupported_claim": grade.unsupported_claim,
    }


# ---------------------------------------------------------------------------------------------
# Disagreement


def disagreement_reasons(*, spec: EvalSpec, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Return why two grades disagree under the spec's rules (empty when they agree)."""
    rules = spec.grading.disagreement
    reasons: list[str] = []
    if a[FACTUAL_KEY] != b[FACTUAL_KEY]:
        reasons.append(f"{FACTUAL_KEY}: {a[FACTUAL_KEY]} vs {b[FACTUAL_KEY]}")
    for criterion in spec.rubric.scales:
        x, y = a[criterion.key], b[criterion.key]
        if abs(x - y) >= rules.scale_difference:
            reasons.append(f"{criterion.key}: {x} vs {y} differ by {abs(x - y)}")
        elif rules.opposite_sides_of_threshold and (x >= criterion.pass_threshold) != (
            y >= criterion.pass_threshold  # type: ignore[operator]
        ):
            reasons.append(
                f"{criterion.key}: {x} vs {y} on opposite sides of the pass threshold {criterion.pass_threshold}"
            )
    return reasons


def _all_reasons(spec: EvalSpec, grades: list[Grade]) -> list[str]:
    reasons: list[str] = []
    for g1, g2 in itertools.combinations(grades, 2):
        reasons.extend(disagreement_reasons(spec=spec, a=scores_of(g1), b=scores_of(g2)))
    return reasons


def _upsert_final(session: Session, spec: EvalSpec, draft_id: int, values: dict[str, Any]) -> FinalGrade:
    final = session.exec(select(FinalGrade).where(FinalGrade.draft_id == draft_id)).first()
    if final is None:
        final = FinalGrade(draft_id=draft_id, **values)
    else:
        for key, value in values.items():
            setattr(final, key, value)
    session.add(final)
    session.flush()
    if final.factual_accuracy == "fail":
        _alert_if_golden(session, spec, draft_id)
    return final


def _alert_if_golden(session: Session, spec: EvalSpec, draft_id: int) -> None:
    """A golden example graded factual "fail" is a regression: raise the run's alerts now, not at the next check."""
    row = session.exec(
        select(Draft.run_id, EvalCase.golden).join(EvalCase, col(EvalCase.id) == Draft.case_pk).where(Draft.id == draft_id)
    ).first()
    if row is not None and row[1]:
        from webapp.regression.service import raise_alerts_for_run

        raise_alerts_for_run(session=session, spec=spec, run_id=row[0])


def evaluate_draft(*, session: Session, spec: EvalSpec, draft_id: int, now: dt.datetime | None = None) -> str:
    """Recompute a draft's outcome from its grades; return needs_grades, rework, in_adjudication or final."""
    now = now or utcnow()
    adjudication = session.exec(select(Adjudication).where(Adjudication.draft_id == draft_id)).first()
    if adjudication is not None and adjudication.status == "resolved":
        return "final"
    grades = list(session.exec(select(Grade).where(Grade.draft_id == draft_id).order_by(col(Grade.id))))
    final = session.exec(select(FinalGrade).where(FinalGrade.draft_id == draft_id)).first()
    if any(g.status == "returned" for g in grades):
        if adjudication is not None:
            adjudication.status = "rework"
            session.add(adjudication)
        return "rework"
    if len(grades) < spec.grading.graders_per_draft:
        return "needs_grades"
    reasons = _all_reasons(spec, grades)
    if not reasons and adjudication is not None and adjudication.status == "open":
        # Only the revision of a grade the lead returned (status "rework") may dissolve a disagreement.
        return "in_adjudication"
    if not reasons:
        n = len(grades)
        _upsert_final(
            session,
            spec,
            draft_id,
            {
                FACTUAL_KEY: "pass" if all(g.factual_accuracy == "pass" for g in grades) else "fail",
                "citation_relevance": sum(g.citation_relevance for g in grades) / n,
                "tone": sum(g.tone for g in grades) / n,
                "completeness": sum(g.completeness for g in grades) / n,
                "source": "agreement",
                "decided_by": None,
                "note": None,
                "decided_at": now,
            },
        )
        if adjudication is not None and adjudication.status in ("open", "rework"):
            adjudication.status = "dissolved"  # the reworked grades now agree: no decision needed
            adjudication.resolved_at = now
            session.add(adjudication)
        session.flush()
        return "final"
    if final is not None:
        session.delete(final)  # a revision broke an earlier agreement
    if adjudication is None:
        adjudication = Adjudication(draft_id=draft_id, opened_at=now)
    adjudication.status = "open"
    adjudication.reasons = reasons
    adjudication.resolved_at = None
    session.add(adjudication)
    session.flush()
    return "in_adjudication"


# ---------------------------------------------------------------------------------------------
# Batches, reservations and next item


@dataclass(frozen=True)
class BatchFilter:
    """A grading batch: a run, optionally narrowed by category, intent or golden cases."""

    run_id: int
    category: str | None = None
    intent: str | None = None
    golden: bool | None = None

    def query_string(self) -> str:
        """Return the filter as a URL query string (without the run)."""
        parts = []
        if self.category:
            parts.append(f"category={self.category}")
        if self.intent:
            parts.append(f"intent={self.intent}")
        if self.golden is not None:
            parts.append(f"golden={'1' if self.golden else '0'}")
        return "&".join(parts)


def _gradable(stmt: Any) -> Any:
    # Escalations and fallbacks carry no draft text: there is nothing to grade against the rubric.
    return stmt.where(col(Draft.draft_text).is_not(None), col(Draft.escalated).is_(False))


def _batch_where(stmt: Any, batch: BatchFilter, *, join_case: bool = True) -> Any:
    if join_case or batch.category or batch.intent or batch.golden is not None:
        stmt = stmt.join(EvalCase, col(EvalCase.id) == Draft.case_pk)
    stmt = _gradable(stmt.where(Draft.run_id == batch.run_id))
    if batch.category:
        stmt = stmt.where(EvalCase.category == batch.category)
    if batch.intent:
        stmt = stmt.where(or_(EvalCase.intent == batch.intent, Draft.intent == batch.intent))
    if batch.golden is not None:
        stmt = stmt.where(col(EvalCase.golden).is_(batch.golden))
    return stmt


def batch_drafts_stmt(batch: BatchFilter) -> Any:
    """Return a select of (Draft, EvalCase) in the batch, oldest first (case position, sample, id)."""
    stmt = _batch_where(select(Draft, EvalCase), batch)
    return stmt.order_by(col(EvalCase.position), col(Draft.sample_index), col(Draft.id))


@dataclass(frozen=True)
class BatchCounts:
    """The grading page's progress: drafts in the batch, grades in against needed, and mine."""

    drafts: int
    grades_done: int
    grades_needed: int
    mine: int

    @property
    def share(self) -> float:
        """Return the share of needed grades that are in."""
        return self.grades_done / self.grades_needed if self.grades_needed else 0.0

    @property
    def mine_share(self) -> float:
        """Return the share of the batch's drafts the grader has graded."""
        return self.mine / self.drafts if self.drafts else 0.0


def batch_counts(*, session: Session, spec: EvalSpec, batch: BatchFilter, grader_id: int) -> BatchCounts:
    """Return the batch's progress in one aggregate query (the grading page shows it on every item)."""
    n = spec.grading.graders_per_draft
    per_draft = (
        _batch_where(
            select(
                col(Draft.id),
                func.count(col(Grade.id)).label("c"),
                func.coalesce(func.sum(sql_case((col(Grade.grader_id) == grader_id, 1), else_=0)), 0).label("m"),
            ),
            batch,
            join_case=False,
        )
        .join(Grade, col(Grade.draft_id) == Draft.id, isouter=True)
        .group_by(col(Draft.id))
        .subquery()
    )
    drafts, done, mine = session.exec(
        select(
            func.count(),
            func.coalesce(func.sum(sql_case((per_draft.c.c > n, n), else_=per_draft.c.c)), 0),
            func.coalesce(func.sum(per_draft.c.m), 0),
        )
    ).one()
    return BatchCounts(drafts=int(drafts), grades_done=int(done), grades_needed=int(drafts) * n, mine=int(mine))


def draft_locked(*, session: Session, draft_id: int) -> bool:
    """Tell whether the draft's grades can no longer change (the lead has adjudicated it)."""
    return _locked(session, draft_id)


def _insert_ignore(session: Session, table: Any, values: dict[str, Any]) -> bool:
    """INSERT ... ON CONFLICT DO NOTHING; True when the row went in (the conditional insert both databases honour)."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    # RETURNING tells apart "inserted" and "did nothing" on both drivers (rowcount is not reliable with it).
    stmt = insert(table).values(**values).on_conflict_do_nothing().returning(table.c.id)
    return session.connection().execute(stmt).first() is not None


def release_expired(*, session: Session, now: dt.datetime | None = None) -> int:
    """Delete reservations whose time is up; return how many were released."""
    now = now or utcnow()
    result = session.connection().execute(
        delete(GradingSlot).where(col(GradingSlot.grade_id).is_(None), col(GradingSlot.expires_at) < now)
    )
    return result.rowcount or 0


def claim_slot(
    *,
    session: Session,
    spec: EvalSpec,
    draft_id: int,
    grader_id: int,
    now: dt.datetime | None = None,
    release: bool = True,
) -> GradingSlot | None:
    """Reserve one of the draft's places for the grader (or refresh theirs); None when none is free.

    release=False when the caller has just released expired reservations itself.
    """
    now = now or utcnow()
    expires = now + dt.timedelta(minutes=spec.grading.reservation_minutes)
    conn = session.connection()
    if release:
        release_expired(session=session, now=now)
    mine = session.exec(
        select(GradingSlot)
        .where(GradingSlot.draft_id == draft_id, GradingSlot.grader_id == grader_id)
        .execution_options(populate_existing=True)
    ).first()
    if mine is not None:
        if mine.grade_id is None:
            conn.execute(update(GradingSlot).where(col(GradingSlot.id) == mine.id).values(expires_at=expires))
            session.refresh(mine)
        return mine
    for slot in range(spec.grading.graders_per_draft):
        # The unique (draft_id, slot) and (draft_id, grader_id) constraints decide races: a losing
        # insert does nothing, on SQLite and PostgreSQL alike, and we try the next place.
        values = {
            "draft_id": draft_id,
            "slot": slot,
            "grader_id": grader_id,
            "reserved_at": now,
            "expires_at": expires,
        }
        if _insert_ignore(session, GradingSlot.__table__, values):
            break
    return session.exec(
        select(GradingSlot)
        .where(GradingSlot.draft_id == draft_id, GradingSlot.grader_id == grader_id)
        .execution_options(populate_existing=True)
    ).first()


def release_reservation(*, session: Session, draft_id: int, grader_id: int) -> None:
    """Give back the grader's reservation of a draft (a skip)."""
    session.connection().execute(
        delete(GradingSlot).where(
            GradingSlot.draft_id == draft_id,
            GradingSlot.grader_id == grader_id,
            col(GradingSlot.grade_id).is_(None),
        )
    )


def next_item(
    *,
    session: Session,
    spec: EvalSpec,
    grader_id: int,
    batch: BatchFilter,
    exclude: Collection[int] = (),
    now: dt.datetime | None = None,
) -> Draft | None:
    """Reserve and return the oldest draft of the batch the grader has not graded that still needs grades.

    A draft the grader already holds comes first; drafts in `exclude` (the one on screen) are passed
    over; drafts the grader skipped come only when nothing else is left.
    """
    draft_id = reserve_next(
        session=session, spec=spec, grader_id=grader_id, batch=batch, exclude=exclude, now=now
    )
    return session.get(Draft, draft_id) if draft_id is not None else None


def reserve_next(
    *,
    session: Session,
    spec: EvalSpec,
    grader_id: int,
    batch: BatchFilter,
    exclude: Collection[int] = (),
    now: dt.datetime | None = None,
) -> int | None:
    """Do what next_item does and return only the draft's id (the grading page pre-reserves with it)."""
    now = now or utcnow()
    window = dt.timedelta(minutes=spec.grading.reservation_minutes)
    # Ids only: every grading page asks this, and loading the rows (JSON columns) would cost more than the query.
    held_stmt = (
        _batch_where(select(Draft.id, GradingSlot.expires_at), batch)
        .join(GradingSlot, col(GradingSlot.draft_id) == Draft.id)
        .where(GradingSlot.grader_id == grader_id, col(GradingSlot.grade_id).is_(None))
        .order_by(col(EvalCase.position), col(Draft.sample_index), col(Draft.id))
    )
    if exclude:
        held_stmt = held_stmt.where(col(Draft.id).not_in(list(exclude)))
    held = session.exec(held_stmt).first()
    if held is not None:
        draft_id, expires = held
        # Still mine. Extend it only when less than half the window is left, so that re-reading a
        # page that holds its next item writes nothing.
        if expires is None or as_utc(expires) < now + window / 2:
            session.connection().execute(
                update(GradingSlot)
                .where(GradingSlot.draft_id == draft_id, GradingSlot.grader_id == grader_id)
                .values(expires_at=now + window)
            )
        return int(draft_id)
    release_expired(session=session, now=now)
    taken = (
        select(GradingSlot.draft_id)
        .group_by(col(GradingSlot.draft_id))
        .having(func.count() >= spec.grading.graders_per_draft)
    )
    mine = select(GradingSlot.draft_id).where(GradingSlot.grader_id == grader_id)
    skipped = select(GradingSkip.draft_id).where(GradingSkip.grader_id == grader_id)
    stmt = (
        _batch_where(select(Draft.id), batch)
        .where(col(Draft.id).not_in(taken), col(Draft.id).not_in(mine))
        .order_by(col(EvalCase.position), col(Draft.sample_index), col(Draft.id))
    )
    if exclude:
        stmt = stmt.where(col(Draft.id).not_in(list(exclude)))
    # Skipped drafts go to the end of this grader's queue: offered again only when nothing else is left.
    for candidates in (stmt.where(col(Draft.id).not_in(skipped)), stmt.where(col(Draft.id).in_(skipped))):
        for draft_id in session.exec(candidates.limit(50)):
            # The candidate query left out drafts where this grader has a place, so only free places
            # are tried; the unique constraints decide a race (see claim_slot).
            for slot in range(spec.grading.graders_per_draft):
                values = {
                    "draft_id": draft_id,
                    "slot": slot,
                    "grader_id": grader_id,
                    "reserved_at": now,
                    "expires_at": now + window,
                }
                if _insert_ignore(session, GradingSlot.__table__, values):
                    return int(draft_id)
    return None


# Reasons a grader may give for skipping a draft (key -> label); "other" needs a few words.
SKIP_REASONS: dict[str, str] = {
    "domain": "needs domain knowledge",
    "kb_missing": "KB missing",
    "unclear_ticket": "unclear ticket",
    "other": "other",
}


def skip_draft(
    *,
    session: Session,
    draft_id: int,
    grader_id: int,
    reason: str,
    detail: str = "",
    now: dt.datetime | None = None,
) -> GradingSkip:
    """Record that the grader skips the draft (with a reason) and give back their reservation."""
    reason = (reason or "").strip()
    if reason not in SKIP_REASONS:
        raise GradeInvalid(
            f"reason: choose one of {', '.join(SKIP_REASONS)} (got {reason!r})", field="reason"
        )
    detail = (detail or "").strip()
    if reason == "other" and not detail:
        raise GradeInvalid("detail: say in a few words why you skip this draft", field="detail")
    if len(detail) > 500:
        raise GradeInvalid("detail: at most 500 characters", field="detail")
    if session.get(Draft, draft_id) is None:
        raise NotFound(f"draft {draft_id} does not exist")
    if own_grade(session=session, draft_id=draft_id, grader_id=grader_id) is not None:
        raise AlreadyGraded(f"you already graded draft {draft_id}; there is nothing to skip")
    release_reservation(session=session, draft_id=draft_id, grader_id=grader_id)
    row = GradingSkip(
        draft_id=draft_id, grader_id=grader_id, reason=reason, detail=detail, skipped_at=now or utcnow()
    )
    session.add(row)
    session.flush()
    return row


def skip_counts(*, session: Session, draft_ids: Collection[int]) -> dict[int, int]:
    """Return how many times each draft was skipped (drafts never skipped are absent)."""
    if not draft_ids:
        return {}
    rows = session.exec(
        select(GradingSkip.draft_id, func.count())
        .where(col(GradingSkip.draft_id).in_(list(draft_ids)))
        .group_by(col(GradingSkip.draft_id))
    )
    return {int(d): int(n) for d, n in rows}


# ---------------------------------------------------------------------------------------------
# Grades


def _history(
    session: Session, grade: Grade, by: int, action: str, before: Any, comment: str | None, now: dt.datetime
) -> None:
    session.add(
        GradeChange(
            grade_id=grade.id,  # type: ignore[arg-type]
            changed_by=by,
            action=action,
            before=before,
            after=scores_of(grade),
            comment=comment,
            changed_at=now,
        )
    )


def _locked(session: Session, draft_id: int) -> bool:
    adj = session.exec(select(Adjudication).where(Adjudication.draft_id == draft_id)).first()
    return adj is not None and adj.status == "resolved"


def grade_lock(*, session: Session, grade: Grade) -> str | None:
    """Return why the grade cannot be revised now (None when its grader may revise it).

    Once the lead resolved the draft, no grade changes. While its grades disagree and the
    adjudication is open (or in rework), only a grade the lead returned for rework may change:
    otherwise a grader who has seen the other grade could copy it and end the disagreement.
    """
    adj = session.exec(select(Adjudication).where(Adjudication.draft_id == grade.draft_id)).first()
    if adj is None:
        return None
    if adj.status == "resolved":
        return f"draft {grade.draft_id} has been adjudicated; its grades can no longer change"
    if adj.status in ("open", "rework") and grade.status != "returned":
        return (
            f"the grades of draft {grade.draft_id} disagree and wait for the lead: the lead decides or returns "
            "this grade for rework, and only a returned grade can be revised"
        )
    return None


def _lock_draft(session: Session, draft_id: int) -> Draft | None:
    """Lock the draft's row for this transaction so grades of one draft are evaluated one at a time.

    PostgreSQL takes a row lock (FOR NO KEY UPDATE); SQLite ignores it, but there the first write of a
    transaction takes the database's single write lock, which serialises the same work. NO KEY
    UPDATE, not UPDATE: the same transaction reserves the grader's next draft, and that insert's
    foreign-key check takes KEY SHARE on the other draft's row. Under FOR UPDATE two graders saving
    drafts X and Y while each reserves the other's draft would deadlock; NO KEY UPDATE still
    serialises the grades of one draft but lets those reservations through.
    """
    return session.exec(
        select(Draft)
        .where(Draft.id == draft_id)
        .with_for_update(key_share=True)
        .execution_options(populate_existing=True)
    ).first()


def record_grade(
    *,
    session: Session,
    spec: EvalSpec,
    draft_id: int,
    grader_id: int,
    scores: Scores,
    now: dt.datetime | None = None,
) -> Grade:
    """Record a grader's first grade of a draft; raise AlreadyGraded, NoPlaceLeft, GradeLocked or NotFound."""
    now = now or utcnow()
    draft = _lock_draft(session, draft_id)
    if draft is None:
        raise NotFound(f"draft {draft_id} does not exist")
    _check_claim_in_draft(draft, scores)
    existing = session.exec(
        select(Grade).where(Grade.draft_id == draft_id, Grade.grader_id == grader_id)
    ).first()
    if existing is not None:
        raise AlreadyGraded(f"you already graded draft {draft_id}; revise grade {existing.id} instead")
    if _locked(session, draft_id):
        raise GradeLocked(f"draft {draft_id} has been adjudicated")
    # A grader usually saves the draft reserved for them: use that place as it is (it is taken by
    # the grade at once, so extending the reservation first would be wasted work).
    slot = session.exec(
        select(GradingSlot)
        .where(GradingSlot.draft_id == draft_id, GradingSlot.grader_id == grader_id)
        .execution_options(populate_existing=True)
    ).first()
    if slot is None:
        slot = claim_slot(session=session, spec=spec, draft_id=draft_id, grader_id=grader_id, now=now)
    if slot is None:
        raise NoPlaceLeft(
            f"draft {draft_id} already has the {spec.grading.graders_per_draft} graders it needs; take the next item"
        )
    if slot.grade_id is not None:
        raise AlreadyGraded(f"you already graded draft {draft_id}")
    values = {
        "draft_id": draft_id,
        "grader_id": grader_id,
        **scores.as_dict(),
        "status": "submitted",
        "created_at": now,
        "updated_at": now,
    }
    if not _insert_ignore(session, Grade.__table__, values):
        raise AlreadyGraded(f"you already graded draft {draft_id}")
    grade = session.exec(
        select(Grade)
        .where(Grade.draft_id == draft_id, Grade.grader_id == grader_id)
        .execution_options(populate_existing=True)
    ).one()
    session.connection().execute(
        update(GradingSlot).where(col(GradingSlot.id) == slot.id).values(grade_id=grade.id, expires_at=None)
    )
    _history(session, grade, grader_id, "create", None, None, now)
    session.flush()
    evaluate_draft(session=session, spec=spec, draft_id=draft_id, now=now)
    return grade


def revise_grade(
    *,
    session: Session,
    spec: EvalSpec,
    grade_id: int,
    grader_id: int,
    scores: Scores,
    now: dt.datetime | None = None,
) -> Grade:
    """Change one's own grade (not while the lead adjudicates it, unless returned), keeping the change in the history."""
    now = now or utcnow()
    grade = session.get(Grade, grade_id)
    if grade is None:
        raise NotFound(f"grade {grade_id} does not exist")
    if grade.grader_id != grader_id:
        raise NotAllowed("you can only revise your own grade")
    _lock_draft(session, grade.draft_id)
    session.refresh(grade)
    reason = grade_lock(session=session, grade=grade)
    if reason is not None:
        raise GradeLocked(reason)
    draft = session.get(Draft, grade.draft_id)
    assert draft is not None
    _check_claim_in_draft(draft, scores)
    before = scores_of(grade)
    for key, value in scores.as_dict().items():
        setattr(grade, key, value)
    was_returned = grade.status == "returned"
    grade.status = "submitted"
    grade.updated_at = now
    session.add(grade)
    session.flush()
    if before != scores_of(grade) or was_returned:
        _history(session, grade, grader_id, "revise", before, "rework" if was_returned else None, now)
    session.flush()
    evaluate_draft(session=session, spec=spec, draft_id=grade.draft_id, now=now)
    return grade


def own_grade(*, session: Session, draft_id: int, grader_id: int) -> Grade | None:
    """Return the grader's grade of the draft, if any."""
    return session.exec(select(Grade).where(Grade.draft_id == draft_id, Grade.grader_id == grader_id)).first()


def can_see_grades(*, session: Session, draft_id: int, principal: Principal) -> bool:
    """Tell whether the caller may see all grades of the draft (the lead, or a grader who has graded it)."""
    if principal.has_role("lead"):
        return True
    return own_grade(session=session, draft_id=draft_id, grader_id=principal.user_id) is not None


def grades_visible_to(*, session: Session, draft_id: int, principal: Principal) -> list[Grade]:
    """Return every grade of the draft, or raise GradesHidden while the caller has not graded it (blind)."""
    if session.get(Draft, draft_id) is None:
        raise NotFound(f"draft {draft_id} does not exist")
    if not can_see_grades(session=session, draft_id=draft_id, principal=principal):
        raise GradesHidden("grading is blind: submit your own grade of this draft before you see others'")
    return list(session.exec(select(Grade).where(Grade.draft_id == draft_id).order_by(col(Grade.id))))


def grade_history(
    *, session: Session, draft_id: int, principal: Principal, can_see: bool | None = None
) -> list[GradeChange]:
    """Return the changes of the draft's grades the caller may see (own only, until blind ends), oldest first.

    `can_see` is can_see_grades() when the caller has worked it out already.
    """
    stmt = (
        select(GradeChange)
        .join(Grade, col(Grade.id) == GradeChange.grade_id)
        .where(Grade.draft_id == draft_id)
    )
    if can_see is None:
        can_see = can_see_grades(session=session, draft_id=draft_id, principal=principal)
    if not can_see:
        stmt = stmt.where(Grade.grader_id == principal.user_id)
    return list(session.exec(stmt.order_by(col(GradeChange.changed_at), col(GradeChange.id))))


def returned_grades(*, session: Session, grader_id: int) -> list[Grade]:
    """Return the grader's grades the lead sent back for rework."""
    return list(
        session.exec(
            select(Grade)
            .where(Grade.grader_id == grader_id, Grade.status == "returned")
            .order_by(col(Grade.id))
        )
    )


def previous_grade(
    *, session: Session, spec: EvalSpec, grader_id: int, exclude_draft: int | None = None
) -> Grade | None:
    """Return the grader's last grade when it may still be revised: its draft still waits for other grades.

    Only the most recent grade counts ("Previous" is an undo, not a history browser); once the
    draft has all its grades it is evaluated (agreed, or locked in adjudication) and is no longer offered.
    """
    others = select(func.count()).where(col(Grade.draft_id) == col(GradeOfDraft.draft_id)).scalar_subquery()
    row = session.exec(
        select(GradeOfDraft, others)
        .where(GradeOfDraft.grader_id == grader_id, *([GradeOfDraft.draft_id != exclude_draft] if exclude_draft else []))
        .order_by(col(GradeOfDraft.created_at).desc(), col(GradeOfDraft.id).desc())
        .limit(1)
    ).first()
    if row is None or row[0].status != "submitted":
        return None
    last, n = row
    # The lock rule (grade_lock) must allow the revision too; a draft still short of grades has no
    # adjudication, so today this only guards against a future rule.
    if int(n) >= spec.grading.graders_per_draft or grade_lock(session=session, grade=last) is not None:
        return None
    return last


@dataclass(frozen=True)
class Pace:
    """A grader's day: first grades submitted today and the median seconds spent per grade."""

    grader_id: int
    name: str
    grades_today: int
    median_seconds: float | None


def grading_pace(
    *, session: Session, grader_ids: Collection[int] | None = None, now: dt.datetime | None = None
) -> list[Pace]:
    """Return today's (UTC) grades and median seconds per grade, per grader who graded today.

    A grade's time runs from when the grader could start it, the later of its reservation and the
    grader's previous grade, to its submission; revisions are not counted.
    """
    now = now or utcnow()
    midnight = dt.datetime.combine(now.date(), dt.time(), tzinfo=dt.UTC)
    stmt = (
        select(Grade.grader_id, Grade.created_at, GradingSlot.reserved_at)
        .join(GradingSlot, col(GradingSlot.grade_id) == Grade.id, isouter=True)
        .where(col(Grade.created_at) >= midnight)
        .order_by(col(Grade.grader_id), col(Grade.created_at), col(Grade.id))
    )
    if grader_ids is not None:
        if not grader_ids:
            return []
        stmt = stmt.where(col(Grade.grader_id).in_(list(grader_ids)))
    durations: dict[int, list[float]] = defaultdict(list)
    previous: dict[int, dt.datetime] = {}
    for grader_id, created, reserved in session.exec(stmt):
        created = as_utc(created)
        starts = [as_utc(t) for t in (reserved, previous.get(grader_id)) if t is not None]
        durations[grader_id].append(max(0.0, (created - max(starts)).total_seconds()) if starts else float("nan"))
        previous[grader_id] = created
    if not durations:
        return []
    names = {
        u.id: (u.name or u.email)
        for u in session.exec(select(User).where(col(User.id).in_(list(durations))))
    }
    out = []
    for grader_id, values in durations.items():
        known = [v for v in values if v == v]  # NaN: no reservation and no earlier grade to start from
        out.append(
            Pace(
                grader_id=grader_id,
                name=names.get(grader_id, "?"),
                grades_today=len(values),
                median_seconds=statistics.median(known) if known else None,
            )
        )
    return sorted(out, key=lambda p: p.name.lower())


# ---------------------------------------------------------------------------------------------
# Adjudication


def list_adjudications(*, session: Session, status: str | None = "open") -> list[Adjudication]:
    """Return adjudications with the status (all when None), oldest first."""
    stmt = select(Adjudication)
    if status:
        stmt = stmt.where(Adjudication.status == status)
    return list(session.exec(stmt.order_by(col(Adjudication.opened_at), col(Adjudication.id))))


def resolve_adjudication(
    *,
    session: Session,
    spec: EvalSpec,
    adjudication_id: int,
    lead_id: int,
    scores: Scores,
    note: str,
    now: dt.datetime | None = None,
) -> FinalGrade:
    """Set the final grade of a disagreeing draft with the lead's note; its grades are then locked."""
    now = now or utcnow()
    adj = session.get(Adjudication, adjudication_id)
    if adj is None:
        raise NotFound(f"adjudication {adjudication_id} does not exist")
    _lock_draft(session, adj.draft_id)
    session.refresh(adj)
    if adj.status not in ("open", "rework"):
        raise GradeLocked(f"adjudication {adjudication_id} is {adj.status}, not open")
    note = (note or "").strip()
    if not note:
        raise GradeInvalid("note: explain the decision in a note", field="note")
    final = _upsert_final(
        session,
        spec,
        adj.draft_id,
        {
            FACTUAL_KEY: scores.factual_accuracy,
            "citation_relevance": float(scores.citation_relevance),
            "tone": float(scores.tone),
            "completeness": float(scores.completeness),
            "source": "adjudication",
            "decided_by": lead_id,
            "note": note,
            "decided_at": now,
        },
    )
    adj.status = "resolved"
    adj.note = note
    adj.resolved_at = now
    adj.resolved_by = lead_id
    session.add(adj)
    session.flush()
    return final


def return_grade(
    *,
    session: Session,
    adjudication_id: int,
    grade_id: int,
    lead_id: int,
    comment: str,
    now: dt.datetime | None = None,
) -> Grade:
    """Send one grade of a disagreeing draft back to its grader with a comment; it shows in their queue."""
    now = now or utcnow()
    adj = session.get(Adjudication, adjudication_id)
    grade = session.get(Grade, grade_id)
    if adj is None or grade is None or grade.draft_id != adj.draft_id:
        raise NotFound(f"grade {grade_id} is not part of adjudication {adjudication_id}")
    _lock_draft(session, adj.draft_id)
    session.refresh(adj)
    if adj.status not in ("open", "rework"):
        raise GradeLocked(f"adjudication {adjudication_id} is {adj.status}, not open")
    comment = (comment or "").strip()
    if not comment:
        raise GradeInvalid("comment: tell the grader what to look at again", field="comment")
    before = scores_of(grade)
    grade.status = "returned"
    grade.return_comment = comment
    grade.updated_at = now
    session.add(grade)
    session.flush()
    _history(session, grade, lead_id, "return", before, comment, now)
    adj.status = "rework"
    session.add(adj)
    session.flush()
    return grade


# ---------------------------------------------------------------------------------------------
# Final grades and status (the contract other domains call)


@dataclass(frozen=True)
class FinalGradeView:
    """A draft's final grade as other domains read it."""

    draft_id: int
    factual_accuracy: str
    citation_relevance: float
    tone: float
    completeness: float
    source: str
    decided_at: dt.datetime


def final_grades(*, session: Session, run_id: int) -> dict[int, FinalGradeView]:
    """Return the final grades of a run's drafts, keyed by draft id."""
    rows = session.exec(
        select(FinalGrade).join(Draft, col(Draft.id) == FinalGrade.draft_id).where(Draft.run_id == run_id)
    )
    return {
        f.draft_id: FinalGradeView(
            draft_id=f.draft_id,
            factual_accuracy=f.factual_accuracy,
            citation_relevance=f.citation_relevance,
            tone=f.tone,
            completeness=f.completeness,
            source=f.source,
            decided_at=as_utc(f.decided_at),
        )
        for f in rows
    }


@dataclass
class GradingStatus:
    """Where each gradable draft of a run stands: needs_grades, in_adjudication or final."""

    run_id: int
    states: dict[int, str] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        """Return how many drafts are in each state (all three keys present) and the total."""
        out = {"needs_grades": 0, "in_adjudication": 0, "final": 0}
        for state in self.states.values():
            out[state] += 1
        out["total"] = len(self.states)
        return out

    def drafts_in(self, state: str) -> list[int]:
        """Return the ids of drafts in a state, in id order."""
        return sorted(d for d, s in self.states.items() if s == state)


def grading_status(*, session: Session, run_id: int) -> GradingStatus:
    """Return the grading state of every gradable draft of a run (escalations and fallbacks are not graded)."""
    draft_ids = list(session.exec(_gradable(select(Draft.id).where(Draft.run_id == run_id))))
    finals = set(session.exec(select(FinalGrade.draft_id).where(col(FinalGrade.draft_id).in_(draft_ids))))
    adjudicating = set(
        session.exec(
            select(Adjudication.draft_id).where(
                col(Adjudication.draft_id).in_(draft_ids), col(Adjudication.status).in_(("open", "rework"))
            )
        )
    )
    status = GradingStatus(run_id=run_id)
    for d in draft_ids:
        status.states[d] = (
            "final" if d in finals else "in_adjudication" if d in adjudicating else "needs_grades"
        )
    return status


# ---------------------------------------------------------------------------------------------
# Progress


@dataclass
class GraderProgress:
    grader_id: int
    name: str
    graded: int
    reserved: int


@dataclass
class BatchProgress:
    """Progress of a batch: grades in against grades needed, per grader, and draft outcomes."""

    drafts: int
    grades_needed: int
    grades_done: int
    final: int
    in_adjudication: int
    graders: list[GraderProgress]

    @property
    def share(self) -> float:
        """Return the share of needed grades that are in."""
        return self.grades_done / self.grades_needed if self.grades_needed else 0.0


def batch_progress(
    *, session: Session, spec: EvalSpec, batch: BatchFilter, now: dt.datetime | None = None
) -> BatchProgress:
    """Return how far grading of a batch has come, overall and per grader."""
    now = now or utcnow()
    ids = [d.id for d, _ in session.exec(batch_drafts_stmt(batch))]
    n = spec.grading.graders_per_draft
    grades = list(session.exec(select(Grade).where(col(Grade.draft_id).in_(ids)))) if ids else []
    slots = list(session.exec(select(GradingSlot).where(col(GradingSlot.draft_id).in_(ids)))) if ids else []
    per_draft: dict[int, int] = defaultdict(int)
    for g in grades:
        per_draft[g.draft_id] += 1
    finals = (
        set(session.exec(select(FinalGrade.draft_id).where(col(FinalGrade.draft_id).in_(ids))))
        if ids
        else set()
    )
    adj = (
        set(
            session.exec(
                select(Adjudication.draft_id).where(
                    col(Adjudication.draft_id).in_(ids), col(Adjudication.status).in_(("open", "rework"))
                )
            )
        )
        if ids
        else set()
    )
    by_grader: dict[int, GraderProgress] = {}
    users = {u.id: u for u in session.exec(select(User))}
    for g in grades:
        u = users.get(g.grader_id)
        p = by_grader.setdefault(
            g.grader_id, GraderProgress(g.grader_id, (u.name or u.email) if u else "?", 0, 0)
        )
        p.graded += 1
    for s in slots:
        if s.grade_id is None and s.expires_at is not None and as_utc(s.expires_at) > now:
            u = users.get(s.grader_id)
            p = by_grader.setdefault(
                s.grader_id, GraderProgress(s.grader_id, (u.name or u.email) if u else "?", 0, 0)
            )
            p.reserved += 1
    return BatchProgress(
        drafts=len(ids),
        grades_needed=len(ids) * n,
        grades_done=sum(min(c, n) for c in per_draft.values()),
        final=len(finals),
        in_adjudication=len(adj),
        graders=sorted(by_grader.values(), key=lambda p: p.name.lower()),
    )


def waiting_for_grader(
    *, session: Session, spec: EvalSpec, grader_id: int, now: dt.datetime | None = None
) -> int:
    """Count drafts (all runs) the grader has not graded that still have a free place."""
    now = now or utcnow()
    full = (
        select(GradingSlot.draft_id)
        .where(or_(col(GradingSlot.grade_id).is_not(None), col(GradingSlot.expires_at) > now))
        .group_by(col(GradingSlot.draft_id))
        .having(func.count() >= spec.grading.graders_per_draft)
    )
    graded = select(Grade.draft_id).where(Grade.grader_id == grader_id)
    stmt = _gradable(select(func.count()).select_from(Draft)).where(
        col(Draft.id).not_in(full), col(Draft.id).not_in(graded)
    )
    return int(session.exec(stmt).one())


# ---------------------------------------------------------------------------------------------
# The grading page's context


@dataclass
class CitedRevision:
    article_id: str
    revision: int | None
    title: str | None
    body: str | None
    status: str | None  # None: that revision is not in the KB
    current_revision: int | None = None  # the article's current revision, when it has one

    @property
    def flagged(self) -> bool:
        """Tell whether the cited revision is not the current one (or missing)."""
        return self.status != "current"


def cited_revisions(*, session: Session, draft: Draft) -> list[CitedRevision]:
    """Return the KB revisions the draft cites, with their text, status and the article's current revision."""
    citations = draft.citations or []
    articles = sorted({str(c.get("article_id", "")) for c in citations})
    revs: dict[tuple[str, int], KbRevision] = {}
    current: dict[str, KbRevision] = {}
    if articles:
        for rev in session.exec(select(KbRevision).where(col(KbRevision.article_id).in_(articles))):
            revs[(rev.article_id, rev.revision)] = rev
            if rev.status == "current":
                current[rev.article_id] = rev
    out: list[CitedRevision] = []
    for c in citations:
        article = str(c.get("article_id", ""))
        number = c.get("revision")
        try:
            rev = revs.get((article, int(number))) if number is not None else current.get(article)
        except (TypeError, ValueError):
            rev = None
        now_current = current.get(article)
        out.append(
            CitedRevision(
                article_id=article,
                revision=rev.revision if rev else number,
                title=rev.title if rev else None,
                body=rev.body if rev else None,
                status=rev.status if rev else None,
                current_revision=now_current.revision if now_current else None,
            )
        )
    return out


@dataclass(frozen=True)
class ModelSignals:
    """What the machine thinks of a draft: its confidence, the LLM judge's scores, the automated checks."""

    confidence: float | None
    judge_scores: dict[str, Any] | None
    judge_rationale: str | None
    checks: list[DraftCheck]


def model_signals(
    *, session: Session, spec: EvalSpec, draft: Draft, has_graded: bool
) -> ModelSignals | None:
    """Return the draft's model signals, or None while blind grading hides them (before the grader submits)."""
    if not has_graded and not spec.grading.show_model_signals_before_grading:
        return None
    judge = session.exec(
        select(EvaluatorJudgeScore).where(EvaluatorJudgeScore.draft_id == draft.id)
    ).first()
    checks = list(
        session.exec(select(DraftCheck).where(DraftCheck.draft_id == draft.id).order_by(col(DraftCheck.key)))
    )
    return ModelSignals(
        confidence=draft.confidence,
        judge_scores=judge.scores if judge else None,
        judge_rationale=judge.rationale if judge else None,
        checks=checks,
    )


# ---------------------------------------------------------------------------------------------
# References


def reference_versions(*, session: Session, case_pk: int) -> list[ReferenceVersion]:
    """Return every version of a case's reference response, newest first."""
    return list(
        session.exec(
            select(ReferenceVersion)
            .where(ReferenceVersion.case_pk == case_pk)
            .order_by(col(ReferenceVersion.version).desc())
        )
    )


def current_reference(*, session: Session, case_pk: int) -> ReferenceVersion | None:
    """Return the latest approved version of a case's reference, or else its latest version."""
    versions = reference_versions(session=session, case_pk=case_pk)
    approved = [v for v in versions if v.approved_at is not None]
    return approved[0] if approved else (versions[0] if versions else None)


def save_reference(
    *,
    session: Session,
    case_pk: int,
    author_id: int,
    text: str,
    note: str = "",
    now: dt.datetime | None = None,
) -> ReferenceVersion:
    """Save a new version of a case's reference response (every edit is kept)."""
    now = now or utcnow()
    text = (text or "").strip()
    if not text:
        raise GradeInvalid("text: the reference response is empty", field="text")
    if session.get(EvalCase, case_pk) is None:
        raise NotFound(f"test case {case_pk} does not exist")
    latest = session.exec(
        select(func.max(ReferenceVersion.version)).where(ReferenceVersion.case_pk == case_pk)
    ).one()
    version = ReferenceVersion(
        case_pk=case_pk,
        version=(latest or 0) + 1,
        text=text,
        note=note.strip()[:500],
        author_id=author_id,
        created_at=now,
    )
    session.add(version)
    session.flush()
    return version


def approve_reference(
    *, session: Session, reference_id: int, lead_id: int, now: dt.datetime | None = None
) -> ReferenceVersion:
    """Approve a reference version (the lead)."""
    ref = session.get(ReferenceVersion, reference_id)
    if ref is None:
        raise NotFound(f"reference {reference_id} does not exist")
    ref.approved_by = lead_id
    ref.approved_at = now or utcnow()
    session.add(ref)
    session.flush()
    return ref


def references_to_approve(*, session: Session) -> list[ReferenceVersion]:
    """Return, per case, its latest reference version when that one is not approved."""
    latest = (
        select(ReferenceVersion.case_pk, func.max(ReferenceVersion.version).label("v"))
        .group_by(col(ReferenceVersion.case_pk))
        .subquery()
    )
    stmt = (
        select(ReferenceVersion)
        .join(
            latest,
            (col(ReferenceVersion.case_pk) == latest.c.case_pk)
            & (col(ReferenceVersion.version) == latest.c.v),
        )
        .where(col(ReferenceVersion.approved_at).is_(None))
        .order_by(col(ReferenceVersion.case_pk))
    )
    return list(session.exec(stmt))


def grade_reference(
    *, session: Session, reference_id: int, grader_id: int, scores: Scores, now: dt.datetime | None = None
) -> ReferenceGrade:
    """Grade a reference version against the rubric (once per grader; a second grade replaces the first)."""
    ref = session.get(ReferenceVersion, reference_id)
    if ref is None:
        raise NotFound(f"reference {reference_id} does not exist")
    row = session.exec(
        select(ReferenceGrade).where(
            ReferenceGrade.reference_id == reference_id, ReferenceGrade.grader_id == grader_id
        )
    ).first()
    if row is None:
        row = ReferenceGrade(reference_id=reference_id, grader_id=grader_id, **scores.as_dict())
    else:
        for key, value in scores.as_dict().items():
            setattr(row, key, value)
    row.created_at = now or utcnow()
    session.add(row)
    session.flush()
    return row


# ---------------------------------------------------------------------------------------------
# Export


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


def export_rows(*, session: Session, run_id: int) -> list[dict[str, Any]]:
    """Return one row per finally graded draft of a run: the final grade, both graders' scores, the adjudication."""
    users = {u.id: u.email for u in session.exec(select(User))}
    rows: list[dict[str, Any]] = []
    stmt = (
        select(FinalGrade, Draft, EvalCase)
        .join(Draft, col(Draft.id) == FinalGrade.draft_id)
        .join(EvalCase, col(EvalCase.id) == Draft.case_pk)
        .where(Draft.run_id == run_id)
        .order_by(col(EvalCase.position), col(Draft.id))
    )
    for final, draft, case in session.exec(stmt):
        grades = list(session.exec(select(Grade).where(Grade.draft_id == draft.id).order_by(col(Grade.id))))
        row: dict[str, Any] = {
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
        rows.append({c: row.get(c) for c in EXPORT_COLUMNS})
    return rows


def export_csv(*, session: Session, run_id: int) -> str:
    """Return the run's final grades as CSV text."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=EXPORT_COLUMNS)
    writer.writeheader()
    for row in export_rows(session=session, run_id=run_id):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()


def export_jsonl(*, session: Session, run_id: int) -> str:
    """Return the run's final grades as JSON Lines."""
    return "".join(
        json.dumps(row, ensure_ascii=False) + "\n" for row in export_rows(session=session, run_id=run_id)
    )


# ---------------------------------------------------------------------------------------------
# Agreement


def _labels(criterion: Criterion) -> list[Any]:
    if criterion.kind == "pass_fail":
        return ["fail", "pass"]
    assert criterion.min is not None and criterion.max is not None
    return list(range(criterion.min, criterion.max + 1))


def _criterion_stats(
    criterion: Criterion, pairs: list[tuple[dict[str, Any], dict[str, Any]]]
) -> dict[str, Any]:
    a = [p[0][criterion.key] for p in pairs]
    b = [p[1][criterion.key] for p in pairs]
    weights = None if criterion.kind == "pass_fail" else "quadratic"
    return {
        "key": criterion.key,
        "name": criterion.name,
        "n": len(pairs),
        "exact_agreement": exact_agreement(a, b),
        "kappa": cohen_kappa(a, b, labels=_labels(criterion), weights=weights),
        "kappa_kind": "cohen" if weights is None else "quadratic_weighted",
    }


def _numeric_pass(x: Any) -> float:
    return 1.0 if x == "pass" else 0.0


def agreement_report(*, session: Session, spec: EvalSpec, run_id: int | None = None) -> dict[str, Any]:
    """Return agreement per criterion, per grader pair, per grader (mean, bias against final) and per ISO week."""
    stmt = select(Grade).order_by(col(Grade.draft_id), col(Grade.grader_id))
    if run_id is not None:
        stmt = stmt.join(Draft, col(Draft.id) == Grade.draft_id).where(Draft.run_id == run_id)
    grades = list(session.exec(stmt))
    # Agreement is measured on the grades as first submitted, while graders were still blind:
    # later revisions (after seeing the other grade, or after rework) would inflate it.
    firsts: dict[int, dict[str, Any]] = {}
    if grades:
        for change in session.exec(
            select(GradeChange)
            .where(col(GradeChange.grade_id).in_([g.id for g in grades]), GradeChange.action == "create")
            .order_by(col(GradeChange.id))
        ):
            firsts.setdefault(change.grade_id, change.after or {})
    users = {u.id: (u.name or u.email) for u in session.exec(select(User))}
    by_draft: dict[int, list[Grade]] = defaultdict(list)
    for g in grades:
        by_draft[g.draft_id].append(g)
    pairs_by_grader: dict[tuple[int, int], list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    all_pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    weeks: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for draft_grades in by_draft.values():
        for g1, g2 in itertools.combinations(sorted(draft_grades, key=lambda g: g.grader_id), 2):
            s1 = firsts.get(g1.id) or scores_of(g1)  # type: ignore[arg-type]
            s2 = firsts.get(g2.id) or scores_of(g2)  # type: ignore[arg-type]
            pair = (s1, s2)
            pairs_by_grader[(g1.grader_id, g2.grader_id)].append(pair)
            all_pairs.append(pair)
            year, week, _ = as_utc(max(g1.created_at, g2.created_at, key=as_utc)).isocalendar()
            weeks[f"{year}-W{week:02d}"].append(pair)

    def disagreement_rate(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> float | None:
        if not pairs:
            return None
        return sum(bool(disagreement_reasons(spec=spec, a=a, b=b)) for a, b in pairs) / len(pairs)

    criteria = spec.rubric.criteria
    report: dict[str, Any] = {
        "run_id": run_id,
        "n_pairs": len(all_pairs),
        "disagreement_rate": disagreement_rate(all_pairs),
        "criteria": [_criterion_stats(c, all_pairs) for c in criteria],
        "pairs": [
            {
                "grader_ids": [a, b],
                "graders": [users.get(a, "?"), users.get(b, "?")],
                "n": len(pairs),
                "disagreement_rate": disagreement_rate(pairs),
                "criteria": [_criterion_stats(c, pairs) for c in criteria],
            }
            for (a, b), pairs in sorted(pairs_by_grader.items())
        ],
        "weeks": [
            {
                "week": week,
                "n": len(pairs),
                "disagreement_rate": disagreement_rate(pairs),
                "criteria": [_criterion_stats(c, pairs) for c in criteria],
            }
            for week, pairs in sorted(weeks.items())
        ],
    }
    finals = (
        {
            f.draft_id: f
            for f in session.exec(select(FinalGrade).where(col(FinalGrade.draft_id).in_(list(by_draft))))
        }
        if by_draft
        else {}
    )
    per_grader: dict[int, list[Grade]] = defaultdict(list)
    for g in grades:
        per_grader[g.grader_id].append(g)
    graders_out = []
    for grader_id, own in sorted(per_grader.items(), key=lambda kv: users.get(kv[0], "").lower()):
        rows = []
        for c in criteria:
            value = _numeric_pass if c.kind == "pass_fail" else float
            values = [value(getattr(g, c.key)) for g in own]
            diffs = [
                value(getattr(g, c.key)) - value(getattr(finals[g.draft_id], c.key))
                for g in own
                if g.draft_id in finals
            ]
            rows.append(
                {
                    "key": c.key,
                    "name": c.name,
                    "mean": sum(values) / len(values) if values else None,
                    "bias": sum(diffs) / len(diffs) if diffs else None,
                    "n_final": len(diffs),
                }
            )
        graders_out.append(
            {"grader_id": grader_id, "grader": users.get(grader_id, "?"), "n": len(own), "criteria": rows}
        )
    report["graders"] = graders_out
    return report
