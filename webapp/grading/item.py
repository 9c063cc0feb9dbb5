"""The grading page's item: a draft with its case, KB, reference, the grades the caller may see, and the queue around it.

`grading_item` builds one `GradingItemView` from named reads (webapp.grading.item_reads, the
outcome's and the queue's readers). It writes only to reserve the grader's next draft, in a short
committed write section (webapp.grading.writes).

The page renders the view's fields as the template's names (`GradingItemView.context`): the
template reads `draft`, `own`, `counts`... as before, and every one of them is typed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from markupsafe import Markup
from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow
from webapp.grading.evidence import CitedKbText, JudgeLookup, ModelSignals, cited_kb_texts, model_signals
from webapp.grading.grades import lock_reason, sees_all_grades
from webapp.grading.item_reads import (
    ItemCase,
    ItemDraft,
    ItemHead,
    Place,
    RunRef,
    ShownReference,
    history_of,
    item_head,
    places_of,
    previous_draft,
    shown_reference,
    user_names,
)
from webapp.grading.models import Adjudication, FinalGrade, Grade, GradeChange
from webapp.grading.outcome import adjudication_of, final_of, grades_of
from webapp.grading.queue import (
    BatchCounts,
    BatchFilter,
    Held,
    batch_counts,
    held_next,
    needs_extension,
    reserve_next,
)
from webapp.grading.scores import scores_of
from webapp.grading.writes import write_section
from webapp.web.page_view import PageView

# What the rubric form shows: a grade's scores, or what the grader typed (text as posted).
FormValues = Mapping[str, object]


@dataclass(frozen=True)
class GradingItemView(PageView):
    """Everything the grading page shows for one draft, and the page's own state (flash, errors, typed values)."""

    draft: ItemDraft
    case: ItemCase
    run: RunRef
    batch: BatchFilter
    cited: list[CitedKbText]
    reference: ShownReference | None
    own: Grade | None
    others: list[Grade]
    show_others: bool
    others_folded: bool  # a lead who grades the draft too can keep it blind: others' grades start folded
    signals: ModelSignals | None  # shown only once the caller has graded the draft (blind), unless the spec says
    history: list[GradeChange]
    adjudication: Adjudication | None
    final: FinalGrade | None
    locked: str | None  # why the caller may not change a grade now
    has_place: bool
    reservation: Place | None
    counts: BatchCounts
    upcoming: int | None
    previous: int | None
    users: dict[int, str]
    values: FormValues
    saved_draft_id: int | None = None
    saved_signals: ModelSignals | None = None
    # the page's state, set by webapp.grading.pages
    flash: str | None = None
    error: str | None = None
    error_field: str | None = None
    skip_error: str | None = None
    skip_values: Mapping[str, str] | None = None
    htmx_fragment: bool = False
    blank_rubric: Markup | None = None

    @property
    def batch_qs(self) -> str:
        """Return the batch's filters as a query string (links back to the batch and to the next item)."""
        return self.batch.query_string()

    @property
    def draft_url(self) -> str:
        """Return the page's URL (pushed into the history when save-and-next swaps it in)."""
        qs = self.batch_qs
        return f"/grading/drafts/{self.draft.id}" + (f"?{qs}" if qs else "")


def reserve_upcoming(
    *,
    session: Session,
    spec: EvalSpec,
    grader_id: int,
    batch: BatchFilter,
    draft_id: int,
    held: Held | None,
) -> int | None:
    """Return the grader's next draft after this one, reserving it now (in a short write section) unless already held.

    `held` is held_next(exclude=(draft_id,)), read by the caller with its other reads.
    """
    now = utcnow()
    if held is not None and not needs_extension(spec=spec, expires=held[1], now=now):
        return held[0]
    with write_section(session):
        return reserve_next(
            session=session,
            spec=spec,
            grader_id=grader_id,
            batch=batch,
            exclude=(draft_id,),
            now=now,
            held=held,  # extended there when it is one
        )


@dataclass(frozen=True)
class _Seen:
    """What of the draft's grades and places the caller sees (blind grading) and may do."""

    own: Grade | None
    others: list[Grade]
    see_all: bool
    slot: Place | None
    has_place: bool


def _seen(*, spec: EvalSpec, principal: Principal, grades: list[Grade], places: list[Place]) -> _Seen:
    """Apply blind grading to the grades and find the caller's place (a draft has graders_per_draft of them)."""
    me = principal.user_id
    own = next((g for g in grades if g.grader_id == me), None)
    see_all = sees_all_grades(principal=principal, has_own_grade=own is not None)
    others = [g for g in grades if g.grader_id != me] if see_all else []
    now = utcnow()
    slot = next((x for x in places if x.grader_id == me), None)
    live = [x for x in places if x.grade_id is not None or (x.expires_at is not None and as_utc(x.expires_at) > now)]
    has_place = own is not None or slot is not None or len(live) < spec.grading.graders_per_draft
    return _Seen(own=own, others=others, see_all=see_all, slot=slot, has_place=has_place)


@dataclass(frozen=True)
class _Outcome:
    """The draft's adjudication, final grade and history, as far as the caller may see them."""

    adjudication: Adjudication | None
    final: FinalGrade | None
    history: list[GradeChange]


def _outcome(*, session: Session, draft_id: int, seen: _Seen, me: int, graded: bool) -> _Outcome:
    """Read the outcome: nothing for a draft nobody graded; the final grade and all history only for who sees all."""
    if not graded:
        return _Outcome(adjudication=None, final=None, history=[])
    adjudication = adjudication_of(session=session, draft_id=draft_id)
    final: FinalGrade | None = None
    history: list[GradeChange] = []
    if seen.see_all:
        final = final_of(session=session, draft_id=draft_id)
        history = history_of(session=session, draft_id=draft_id)
    elif seen.own is not None:
        history = history_of(session=session, draft_id=draft_id, grader_id=me)
    return _Outcome(adjudication=adjudication, final=final, history=history)


def _locked(*, draft_id: int, own: Grade | None, adjudication: Adjudication | None) -> str | None:
    """Return why the caller may not change a grade now (resolved, or a disagreement the lead holds: the lock rule)."""
    status = adjudication.status if adjudication is not None else None
    if own is not None:
        return lock_reason(draft_id=draft_id, adjudication_status=status, grade_status=own.status)
    if status == "resolved":
        return "this draft has been adjudicated; grades can no longer change"
    return None


def _names(
    *, session: Session, principal: Principal, seen: _Seen, outcome: _Outcome, reference: ShownReference | None
) -> dict[int, str]:
    """Return the names the page shows (own and visible grades, history, reference author, decider).

    The caller's and the reference author's are known already; the others are read, in one query.
    """
    known = {principal.user_id: principal.name or principal.email}
    if reference is not None:
        known[reference.author_id] = reference.author_name or "?"
    wanted = {g.grader_id for g in seen.others} | {h.changed_by for h in outcome.history}
    if outcome.final is not None and outcome.final.decided_by:
        wanted.add(outcome.final.decided_by)
    return {**known, **user_names(session=session, user_ids=wanted - known.keys())}


def grading_item(
    *,
    session: Session,
    spec: EvalSpec,
    draft_id: int,
    principal: Principal,
    filters: BatchFilter,
    judge: JudgeLookup | None = None,
    saved: tuple[int, float | None] | None = None,
) -> GradingItemView | None:
    """Return what the grading page shows for a draft (None when it does not exist).

    `filters` narrow the grader's batch; its run is the draft's, whatever `filters.run_id` says.

    Blind grading holds: other grades, the outcome and others' history only once the caller has
    graded the draft (the lead always); the model's signals only after grading, unless the spec says.
    The grader's next draft is reserved now, while they read this one, so save-and-next only saves
    and swaps; only in a grading flow (this draft is reserved for or graded by the caller): merely
    looking at a draft takes no place from anyone.

    `saved` (draft id, confidence) is the draft a save-and-next just graded: its model signals come too.
    """
    head = item_head(session=session, draft_id=draft_id)
    if head is None:
        return None
    me = principal.user_id
    batch = replace(filters, run_id=head.draft.run_id)
    grades = grades_of(session=session, draft_id=draft_id)
    seen = _seen(spec=spec, principal=principal, grades=grades, places=places_of(session=session, draft_id=draft_id))
    reference = shown_reference(session=session, case_pk=head.draft.case_pk)
    outcome = _outcome(session=session, draft_id=draft_id, seen=seen, me=me, graded=bool(grades))
    return GradingItemView(
        draft=head.draft,
        case=head.case,
        run=head.run,
        batch=batch,
        cited=cited_kb_texts(session=session, citations=head.draft.citations),
        reference=reference,
        own=seen.own,
        others=seen.others,
        show_others=seen.see_all,
        others_folded=seen.own is None,
        signals=model_signals(
            session=session, spec=spec, draft_id=draft_id, confidence=head.draft.confidence, has_graded=seen.own is not None, judge=judge
        ),
        history=outcome.history,
        adjudication=outcome.adjudication if seen.see_all else None,
        final=outcome.final,
        locked=_locked(draft_id=draft_id, own=seen.own, adjudication=outcome.adjudication),
        has_place=seen.has_place,
        reservation=seen.slot if seen.slot is not None and seen.slot.grade_id is None else None,
        counts=batch_counts(session=session, spec=spec, batch=batch, grader_id=me),
        upcoming=_upcoming(session=session, spec=spec, head=head, batch=batch, me=me, slot=seen.slot),
        previous=previous_draft(session=session, spec=spec, grader_id=me, exclude_draft=draft_id),
        users=_names(session=session, principal=principal, seen=seen, outcome=outcome, reference=reference),
        values=scores_of(seen.own) if seen.own is not None else {},
        saved_draft_id=saved[0] if saved is not None else None,
        saved_signals=_saved_signals(session=session, spec=spec, saved=saved, judge=judge),
    )


def _upcoming(
    *, session: Session, spec: EvalSpec, head: ItemHead, batch: BatchFilter, me: int, slot: Place | None
) -> int | None:
    """Reserve the grader's next draft while they read this one, only in a grading flow (they hold a place here)."""
    if slot is None:
        return None
    held = held_next(session=session, spec=spec, grader_id=me, batch=batch, exclude=(head.draft.id,))
    return reserve_upcoming(session=session, spec=spec, grader_id=me, batch=batch, draft_id=head.draft.id, held=held)


def _saved_signals(
    *, session: Session, spec: EvalSpec, saved: tuple[int, float | None] | None, judge: JudgeLookup | None
) -> ModelSignals | None:
    """Return the model signals of the draft a save-and-next just graded (the grader has graded it: not blind)."""
    if saved is None:
        return None
    return model_signals(
        session=session, spec=spec, draft_id=saved[0], confidence=saved[1], has_graded=True, judge=judge
    )

