"""Grading pages: queues, batch overview, the grading page, adjudication, agreement and references."""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel
from sqlmodel import Session, col, select

from webapp.auth.models import User
from webapp.auth.service import Principal
from webapp.datasets.models import EvalCase
from webapp.db import SessionDep
from webapp.deps import SpecDep, require_role
from webapp.grading import service as gs
from webapp.grading.models import (
    Adjudication,
    FinalGrade,
    Grade,
    GradingSlot,
    ReferenceGrade,
    ReferenceVersion,
)
from webapp.runs.models import Draft, Run
from webapp.spec import EvalSpec
from webapp.templating import is_htmx, render
from webapp.timeutil import as_utc, utcnow

router = APIRouter(prefix="/grading")

GRADERS = require_role(*gs.GRADER_ROLES)
LEAD = require_role("lead")

# Keys for every score: one keyboard row per criterion, so a grade is a handful of keystrokes.
SHORTCUTS: dict[str, list[str]] = {
    "citation_relevance": ["1", "2", "3", "4", "5"],
    "tone": ["q", "w", "e", "r", "t"],
    "completeness": ["a", "s", "d", "f", "g"],
}
FACTUAL_KEYS = {"pass": "p", "fail": "x"}


def _batch_from(params: Any, run_id: int) -> gs.BatchFilter:
    golden_raw = (params.get("golden") or "").strip()
    return gs.BatchFilter(
        run_id=run_id,
        category=(params.get("category") or "").strip() or None,
        intent=(params.get("intent") or "").strip() or None,
        golden=None if golden_raw == "" else golden_raw in ("1", "true", "yes", "on"),
    )


def _users(session: SessionDep) -> dict[int, str]:
    return {u.id: (u.name or u.email) for u in session.exec(select(User))}  # type: ignore[misc]


def _see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def _draft_or_404(session: Session, draft_id: int) -> Draft:
    draft = session.get(Draft, draft_id)
    if draft is None:
        raise HTTPException(status_code=404, detail=f"draft {draft_id} does not exist")
    return draft


class BatchForm(BaseModel):
    """The batch filter a grading form carries along (hidden fields)."""

    category: str = ""
    intent: str = ""
    golden: str = ""

    def batch(self, run_id: int) -> gs.BatchFilter:
        """Return the batch filter for the run."""
        return _batch_from(self.model_dump(), run_id)


class ScoresForm(BaseModel):
    """Rubric scores as typed in a form (the service checks them against the spec and names a bad field)."""

    factual_accuracy: str = ""
    citation_relevance: str = ""
    tone: str = ""
    completeness: str = ""
    rationale: str = ""
    unsupported_claim: str = ""

    def scores_data(self) -> dict[str, Any]:
        """Return the raw scores for validate_scores."""
        return {k: getattr(self, k) or None for k in ("factual_accuracy", *gs.SCALE_KEYS)} | {
            "rationale": self.rationale,
            "unsupported_claim": self.unsupported_claim,
        }


class GradeForm(ScoresForm, BatchForm):
    """The grading form: scores, the batch it came from, and next=1 for save-and-next."""

    next: str = ""


class SkipForm(BatchForm):
    """Skip a draft: a reason from the short list, and a few words for "other"."""

    reason: str = ""
    detail: str = ""


@router.get("", response_class=HTMLResponse)
def queues(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(GRADERS)
) -> HTMLResponse:
    """Show my queues: the next item of each batch, grades returned to me, my recent grades."""
    runs = list(session.exec(select(Run).order_by(col(Run.created_at).desc(), col(Run.id).desc())))
    batches = [
        (run, gs.batch_progress(session=session, spec=spec, batch=gs.BatchFilter(run_id=run.id)))
        for run in runs
    ]  # type: ignore[arg-type]
    returned = gs.returned_grades(session=session, grader_id=principal.user_id)
    mine = list(
        session.exec(
            select(Grade)
            .where(Grade.grader_id == principal.user_id)
            .order_by(col(Grade.updated_at).desc())
            .limit(15)
        )
    )
    held = list(
        session.exec(
            select(GradingSlot).where(
                GradingSlot.grader_id == principal.user_id,
                col(GradingSlot.grade_id).is_(None),
                col(GradingSlot.expires_at) > utcnow(),
            )
        )
    )
    return render(
        request,
        "grading/queues.html",
        {
            "batches": [(r, p) for r, p in batches if p.drafts],
            "returned": returned,
            "mine": mine,
            "held": held,
            "waiting": gs.waiting_for_grader(session=session, spec=spec, grader_id=principal.user_id),
            "flash": request.query_params.get("flash"),
            "my_pace": next(iter(gs.grading_pace(session=session, grader_ids=[principal.user_id])), None),
            # The lead sees everyone's pace; a labeler only their own.
            "team_pace": gs.grading_pace(session=session) if principal.has_role("lead") else None,
        },
    )


@router.post("/runs/{run_id}/next")
def take_next(
    run_id: int,
    form: Annotated[BatchForm, Form()],
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(GRADERS),
) -> Response:
    """Reserve my next draft of the batch and open it (or say the batch is done)."""
    batch = form.batch(run_id)
    draft = gs.next_item(session=session, spec=spec, grader_id=principal.user_id, batch=batch)
    qs = batch.query_string()
    if draft is None:
        return _see_other(f"/grading/runs/{run_id}?done=1" + (f"&{qs}" if qs else ""))
    return _see_other(f"/grading/drafts/{draft.id}" + (f"?{qs}" if qs else ""))


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def batch_overview(
    run_id: int, request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(GRADERS)
) -> HTMLResponse:
    """Show a batch: progress overall and per grader, filters, and where each draft stands."""
    run = session.get(Run, run_id)
    if run is None:
        raise HTTPException(status_code=404, detail=f"run {run_id} does not exist")
    batch = _batch_from(request.query_params, run_id)
    progress = gs.batch_progress(session=session, spec=spec, batch=batch)
    status = gs.grading_status(session=session, run_id=run_id)
    rows = list(session.exec(gs.batch_drafts_stmt(batch)))
    own = {
        g.draft_id: g
        for g in session.exec(
            select(Grade).where(
                Grade.grader_id == principal.user_id, col(Grade.draft_id).in_([d.id for d, _ in rows])
            )
        )
    }
    count_by_draft: dict[int, int] = {}
    for draft_id in session.exec(
        select(Grade.draft_id).where(col(Grade.draft_id).in_([d.id for d, _ in rows]))
    ):
        count_by_draft[draft_id] = count_by_draft.get(draft_id, 0) + 1
    cases = session.exec(select(EvalCase).where(EvalCase.dataset_id == run.dataset_id))
    categories = sorted({c.category for c in cases if c.category})
    intents = sorted(
        {
            c.intent
            for c in session.exec(select(EvalCase).where(EvalCase.dataset_id == run.dataset_id))
            if c.intent
        }
    )
    return render(
        request,
        "grading/batch.html",
        {
            "run": run,
            "batch": batch,
            "progress": progress,
            "status": status,
            "rows": rows,
            "own": own,
            "count_by_draft": count_by_draft,
            "categories": categories,
            "intents": intents,
            "is_lead": principal.has_role("lead"),
            "skips": gs.skip_counts(session=session, draft_ids=[d.id for d, _ in rows])
            if principal.has_role("lead")
            else {},
            "done": request.query_params.get("done") == "1",
        },
    )


def _item_context(
    session: Session,
    spec: EvalSpec,
    draft: Draft,
    principal: Principal,
    batch: gs.BatchFilter,
    *,
    values: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the grading item (the part save-and-next swaps) and reserve the grader's next draft."""
    draft_id: int = draft.id  # type: ignore[assignment]
    case = session.get(EvalCase, draft.case_pk)
    run = session.get(Run, draft.run_id)
    is_lead = principal.has_role("lead")
    grades = list(session.exec(select(Grade).where(Grade.draft_id == draft_id).order_by(col(Grade.id))))
    own = next((g for g in grades if g.grader_id == principal.user_id), None)
    see_all = own is not None or is_lead
    # Blind: other grades only once the caller has graded the draft (the lead may open them anyway).
    others = [g for g in grades if g.grader_id != principal.user_id] if see_all else []
    adjudication = final = None
    if see_all:
        adjudication = session.exec(select(Adjudication).where(Adjudication.draft_id == draft_id)).first()
        final = session.exec(select(FinalGrade).where(FinalGrade.draft_id == draft_id)).first()
    # Why the caller may not change a grade now (resolved, or a disagreement the lead holds: the lock rule).
    locked: str | None = None
    if own is not None:
        locked = gs.grade_lock(session=session, grade=own)
    elif grades and gs.draft_locked(session=session, draft_id=draft_id):
        locked = "this draft has been adjudicated; grades can no longer change"
    now = utcnow()
    slots = list(session.exec(select(GradingSlot).where(GradingSlot.draft_id == draft_id)))
    slot = next((x for x in slots if x.grader_id == principal.user_id), None)
    live = [x for x in slots if x.grade_id is not None or (x.expires_at is not None and as_utc(x.expires_at) > now)]
    has_place = own is not None or slot is not None or len(live) < spec.grading.graders_per_draft
    # The next item is reserved now, while the grader reads this one, so save-and-next only saves and
    # swaps. Only in a grading flow (this draft is reserved for or graded by the caller): merely looking
    # at a draft takes no place from anyone.
    upcoming = None
    if slot is not None:
        upcoming = gs.reserve_next(
            session=session, spec=spec, grader_id=principal.user_id, batch=batch, exclude=(draft_id,)
        )
    previous = gs.previous_grade(session=session, spec=spec, grader_id=principal.user_id, exclude_draft=draft_id)
    history = gs.grade_history(session=session, draft_id=draft_id, principal=principal, can_see=see_all)
    user_ids = {g.grader_id for g in grades} | {h.changed_by for h in history}
    reference = gs.current_reference(session=session, case_pk=draft.case_pk)
    if reference is not None:
        user_ids.add(reference.author_id)
    if final is not None and final.decided_by:
        user_ids.add(final.decided_by)
    counts = gs.batch_counts(session=session, spec=spec, batch=batch, grader_id=principal.user_id)
    qs = batch.query_string()
    return {
        "draft": draft,
        "case": case,
        "run": run,
        "batch": batch,
        "batch_qs": qs,
        "cited": gs.cited_revisions(session=session, draft=draft),
        "reference": reference,
        "own": own,
        "others": others,
        "show_others": see_all,
        # A lead who grades the draft too can keep it blind: others' grades start folded away.
        "others_folded": own is None,
        "signals": gs.model_signals(session=session, spec=spec, draft=draft, has_graded=own is not None),
        "history": history,
        "adjudication": adjudication,
        "final": final,
        "locked": locked,
        "has_place": has_place,
        "reservation": slot if slot is not None and slot.grade_id is None else None,
        "counts": counts,
        "upcoming": upcoming,
        "previous": previous,
        "users": _names(session, user_ids),
        "shortcuts": SHORTCUTS,
        "factual_keys": FACTUAL_KEYS,
        "skip_reasons": gs.SKIP_REASONS,
        "as_utc": as_utc,
        "values": values if values is not None else (gs.scores_of(own) if own is not None else {}),
        "draft_url": f"/grading/drafts/{draft_id}" + (f"?{qs}" if qs else ""),
    }


def _names(session: Session, user_ids: set[int]) -> dict[int, str]:
    if not user_ids:
        return {}
    return {
        u.id: (u.name or u.email)  # type: ignore[misc]
        for u in session.exec(select(User).where(col(User.id).in_(list(user_ids))))
    }


def _item_response(
    request: Request, ctx: dict[str, Any], *, push: bool = False, status_code: int = 200
) -> HTMLResponse:
    """Render the grading page, or for htmx only the item, pushing its URL when it is a new draft."""
    headers = {"Vary": "HX-Request"}
    if push and is_htmx(request):
        headers["HX-Push-Url"] = ctx["draft_url"]
    ctx["htmx_fragment"] = is_htmx(request)
    return render(request, "grading/draft.html", ctx, block="item", status_code=status_code, headers=headers)


@router.get("/drafts/{draft_id}", response_class=HTMLResponse)
def grading_page(
    draft_id: int,
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(GRADERS),
) -> HTMLResponse:
    """Show a draft with its ticket, KB text, reference and the rubric form (htmx: only the item)."""
    draft = _draft_or_404(session, draft_id)
    ctx = _item_context(session, spec, draft, principal, _batch_from(request.query_params, draft.run_id))
    ctx["flash"] = request.query_params.get("flash")
    return _item_response(request, ctx)


def _open_next(
    request: Request,
    session: Session,
    spec: EvalSpec,
    principal: Principal,
    draft: Draft,
    batch: gs.BatchFilter,
    flash: str,
    extra: dict[str, Any] | None = None,
) -> Response:
    """Open the grader's next item after `draft`: htmx gets the item swapped in (URL pushed), a form a redirect."""
    qs = batch.query_string()
    nxt = gs.next_item(
        session=session, spec=spec, grader_id=principal.user_id, batch=batch, exclude=(draft.id,)  # type: ignore[arg-type]
    )
    if nxt is None:
        done = f"/grading/runs/{draft.run_id}?done=1" + (f"&{qs}" if qs else "")
        if is_htmx(request):
            return Response(status_code=204, headers={"HX-Location": done})
        return _see_other(done)
    if is_htmx(request):
        ctx = _item_context(session, spec, nxt, principal, batch)
        ctx.update({"flash": flash, **(extra or {})})
        return _item_response(request, ctx, push=True)
    return _see_other(f"/grading/drafts/{nxt.id}?" + urlencode({"flash": flash}) + (f"&{qs}" if qs else ""))


def _saved_flash(message: str, draft_id: int) -> str:
    return f"{message} (draft {draft_id}). Next item."


@router.post("/drafts/{draft_id}", response_class=HTMLResponse)
def submit_grade(
    draft_id: int,
    form: Annotated[GradeForm, Form()],
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(GRADERS),
) -> Response:
    """Save my grade of the draft (first grade or revision); with next=1 open my next item."""
    draft = _draft_or_404(session, draft_id)
    data = form.scores_data()
    batch = form.batch(draft.run_id)
    try:
        scores = gs.validate_scores(spec=spec, data=data)
        try:
            gs.record_grade(
                session=session, spec=spec, draft_id=draft_id, grader_id=principal.user_id, scores=scores
            )
            message = "Grade saved"
        except gs.AlreadyGraded:
            own = gs.own_grade(session=session, draft_id=draft_id, grader_id=principal.user_id)
            assert own is not None and own.id is not None
            gs.revise_grade(session=session, spec=spec, grade_id=own.id, grader_id=principal.user_id, scores=scores)
            message = "Grade revised"
    except gs.GradingError as exc:
        # Keep everything the grader typed: the item comes back with their values and the error
        # (200 for htmx, which swaps only successful answers; the URL stays on this draft).
        session.rollback()
        ctx = _item_context(session, spec, draft, principal, batch, values=data)
        ctx.update({"error": exc.message, "error_field": exc.field, "flash": None})
        return _item_response(request, ctx, status_code=200 if is_htmx(request) else exc.status)
    qs = batch.query_string()
    if form.next == "1":
        signals = gs.model_signals(session=session, spec=spec, draft=draft, has_graded=True)
        return _open_next(
            request, session, spec, principal, draft, batch, _saved_flash(message, draft_id),
            {"saved_signals": signals, "saved_draft_id": draft_id},
        )
    if is_htmx(request):
        ctx = _item_context(session, spec, draft, principal, batch)
        ctx["flash"] = f"{message}."
        return _item_response(request, ctx)
    return _see_other(
        f"/grading/drafts/{draft_id}?" + urlencode({"flash": f"{message}."}) + (f"&{qs}" if qs else "")
    )


@router.post("/drafts/{draft_id}/skip")
def skip(
    draft_id: int,
    form: Annotated[SkipForm, Form()],
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(GRADERS),
) -> Response:
    """Skip the draft with a reason: give back my reservation and open my next item."""
    draft = _draft_or_404(session, draft_id)
    batch = form.batch(draft.run_id)
    try:
        gs.skip_draft(
            session=session, draft_id=draft_id, grader_id=principal.user_id, reason=form.reason, detail=form.detail
        )
    except gs.GradingError as exc:
        if exc.status == 404:
            raise HTTPException(status_code=404, detail=exc.message) from exc
        session.rollback()
        ctx = _item_context(session, spec, draft, principal, batch)
        ctx.update({"skip_error": exc.message, "flash": None, "skip_values": form.model_dump()})
        return _item_response(request, ctx, status_code=200 if is_htmx(request) else exc.status)
    # The skipped draft is passed over now even if nothing else is left; it comes back later, last.
    return _open_next(
        request, session, spec, principal, draft, batch, f"Skipped draft {draft_id} ({gs.SKIP_REASONS[form.reason]})."
    )


_CLAIM_QUOTES = "\"'“”"


def highlight(text: str, claims: list[tuple[str, str]]) -> list[tuple[str, str | None]]:
    """Split text into (segment, label) pairs where each quoted claim is found (whitespace and case forgiven)."""
    found: dict[tuple[int, int], list[str]] = {}
    for claim, label in claims:
        words = claim.strip().strip(_CLAIM_QUOTES).split()
        if not words:
            continue
        for m in re.finditer(r"\s+".join(re.escape(w) for w in words), text, flags=re.IGNORECASE):
            found.setdefault((m.start(), m.end()), []).append(label)
    # Both graders quoting the same words is one mark with both letters.
    spans = sorted((start, end, "+".join(labels)) for (start, end), labels in found.items())
    out: list[tuple[str, str | None]] = []
    pos = 0
    for start, end, label in spans:
        if start < pos:  # overlapping quotes: the first one wins
            continue
        if start > pos:
            out.append((text[pos:start], None))
        out.append((text[start:end], label))
        pos = end
    if pos < len(text):
        out.append((text[pos:], None))
    return out


@router.get("/adjudication", response_class=HTMLResponse)
def adjudication_queue(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(LEAD)
) -> HTMLResponse:
    """Show disagreements with everything the graders saw, both grades, and the final-grade form."""
    status = request.query_params.get("status", "open")
    if status not in ("open", "rework", "resolved", "dissolved"):
        status = "open"
    take = request.query_params.get("take", "")  # "<adjudication id>:<grade id>": prefill with that grade
    items = []
    for adj in gs.list_adjudications(session=session, status=status):
        draft = session.get(Draft, adj.draft_id)
        case = session.get(EvalCase, draft.case_pk) if draft else None
        grades = gs.grades_visible_to(session=session, draft_id=adj.draft_id, principal=principal)
        final = session.exec(select(FinalGrade).where(FinalGrade.draft_id == adj.draft_id)).first()
        letters = {g.id: "AB"[i] if i < 2 else str(i + 1) for i, g in enumerate(grades)}
        claims = [(g.unsupported_claim, letters[g.id]) for g in grades if g.unsupported_claim]
        prefill: dict[str, Any] = {}
        taken_from = None
        for g in grades:
            if take == f"{adj.id}:{g.id}":
                prefill = gs.scores_of(g)
                taken_from = letters[g.id]
        items.append(
            {
                "adj": adj,
                "draft": draft,
                "case": case,
                "grades": grades,
                "letters": letters,
                "final": final,
                "cited": gs.cited_revisions(session=session, draft=draft) if draft else [],
                "segments": highlight(draft.draft_text or "", claims) if draft else [],
                "prefill": prefill,
                "taken_from": taken_from,
                "signals": gs.model_signals(session=session, spec=spec, draft=draft, has_graded=True) if draft else None,
            }
        )
    counts = {
        s: len(gs.list_adjudications(session=session, status=s))
        for s in ("open", "rework", "resolved", "dissolved")
    }
    return render(
        request,
        "grading/adjudication.html",
        {
            "items": items,
            "status": status,
            "counts": counts,
            "users": _users(session),
            "flash": request.query_params.get("flash"),
            "error": request.query_params.get("error"),
        },
        block="queue",
    )


class ResolveForm(ScoresForm):
    """The lead's final grade of a disagreement, with one note."""

    note: str = ""


@router.post("/adjudication/{adjudication_id}/resolve")
def resolve(
    adjudication_id: int,
    form: Annotated[ResolveForm, Form()],
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(LEAD),
) -> Response:
    """Set the final grade of a disagreement with a note."""
    data = form.scores_data()
    try:
        scores = gs.validate_scores(spec=spec, data=data)
        final = gs.resolve_adjudication(
            session=session,
            spec=spec,
            adjudication_id=adjudication_id,
            lead_id=principal.user_id,
            scores=scores,
            note=form.note,
        )
    except gs.GradingError as exc:
        session.rollback()
        return _see_other(
            "/grading/adjudication?" + urlencode({"error": f"Adjudication {adjudication_id}: {exc.message}"})
        )
    return _see_other(
        "/grading/adjudication?" + urlencode({"flash": f"Draft {final.draft_id}: final grade set."})
    )


class ReturnForm(BaseModel):
    """Return one grade of a disagreement to its grader."""

    grade_id: str = ""
    comment: str = ""


@router.post("/adjudication/{adjudication_id}/return")
def send_back(
    adjudication_id: int,
    form: Annotated[ReturnForm, Form()],
    session: SessionDep,
    principal: Principal = Depends(LEAD),
) -> Response:
    """Return one grade of a disagreement to its grader with a comment."""
    try:
        grade_id = int(form.grade_id or "0")
        grade = gs.return_grade(
            session=session,
            adjudication_id=adjudication_id,
            grade_id=grade_id,
            lead_id=principal.user_id,
            comment=form.comment,
        )
    except (gs.GradingError, ValueError) as exc:
        session.rollback()
        message = exc.message if isinstance(exc, gs.GradingError) else "grade_id: not a number"
        return _see_other(
            "/grading/adjudication?" + urlencode({"error": f"Adjudication {adjudication_id}: {message}"})
        )
    return _see_other(
        "/grading/adjudication?" + urlencode({"flash": f"Grade {grade.id} returned to its grader."})
    )


@router.get("/agreement", response_class=HTMLResponse)
def agreement_page(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(require_role("lead", "pm")),
) -> HTMLResponse:
    """Show inter-grader agreement per criterion, grader pair, grader and week."""
    raw = request.query_params.get("run_id") or ""
    run_id = int(raw) if raw.isdigit() else None
    report = gs.agreement_report(session=session, spec=spec, run_id=run_id)
    runs = list(session.exec(select(Run).order_by(col(Run.id).desc())))
    return render(request, "grading/agreement.html", {"report": report, "runs": runs, "run_id": run_id})


@router.get("/references", response_class=HTMLResponse)
def references(
    request: Request, session: SessionDep, principal: Principal = Depends(GRADERS)
) -> HTMLResponse:
    """List test cases with their reference responses: missing, waiting for approval, approved."""
    only = request.query_params.get("show", "all")
    latest: dict[int, ReferenceVersion] = {}
    approved: set[int] = set()
    for v in session.exec(select(ReferenceVersion).order_by(col(ReferenceVersion.version))):
        latest[v.case_pk] = v
        if v.approved_at is not None:
            approved.add(v.case_pk)
    cases = list(
        session.exec(select(EvalCase).order_by(col(EvalCase.dataset_id).desc(), col(EvalCase.position)))
    )
    rows = []
    for case in cases:
        v = latest.get(case.id)  # type: ignore[arg-type]
        state = "missing" if v is None else "approved" if v.approved_at is not None else "to approve"
        if only == "to_approve" and state != "to approve":
            continue
        if only == "golden" and not case.golden:
            continue
        rows.append({"case": case, "latest": v, "state": state, "has_approved": case.id in approved})
    return render(request, "grading/references.html", {"rows": rows[:500], "total": len(rows), "show": only})


def _kb_for_reference(session: Session, case: EvalCase, draft: Draft | None) -> list[gs.CitedRevision]:
    """Return the KB beside the reference editor: the draft's cited revisions, else the case's articles (current)."""
    if draft is not None and draft.citations:
        return gs.cited_revisions(session=session, draft=draft)
    articles = [str(a) for a in (case.kb_articles or [])]
    if not articles:
        return []
    stand_in = Draft(run_id=0, case_pk=case.id or 0, citations=[{"article_id": a} for a in articles])
    return gs.cited_revisions(session=session, draft=stand_in)


@router.get("/references/{case_pk}", response_class=HTMLResponse)
def reference_page(
    case_pk: int, request: Request, session: SessionDep, principal: Principal = Depends(GRADERS)
) -> HTMLResponse:
    """Show a case's reference editor beside its ticket, conversation and KB, with every version and grades."""
    case = session.get(EvalCase, case_pk)
    if case is None:
        raise HTTPException(status_code=404, detail=f"test case {case_pk} does not exist")
    raw = request.query_params.get("draft", "")
    draft = session.get(Draft, int(raw)) if raw.isdigit() else None
    if draft is not None and draft.case_pk != case_pk:
        draft = None
    versions = gs.reference_versions(session=session, case_pk=case_pk)
    ref_grades: dict[int, list[ReferenceGrade]] = {}
    if versions:
        for rg in session.exec(
            select(ReferenceGrade).where(col(ReferenceGrade.reference_id).in_([v.id for v in versions]))
        ):
            ref_grades.setdefault(rg.reference_id, []).append(rg)
    return render(
        request,
        "grading/reference.html",
        {
            "case": case,
            "draft": draft,
            "kb": _kb_for_reference(session, case, draft),
            "versions": versions,
            "ref_grades": ref_grades,
            "users": _users(session),
            "is_lead": principal.has_role("lead"),
            "flash": request.query_params.get("flash"),
            "error": request.query_params.get("error"),
            "shortcuts": SHORTCUTS,
            "factual_keys": FACTUAL_KEYS,
        },
    )


class ReferenceForm(BaseModel):
    """A new version of a reference response."""

    text: str = ""
    note: str = ""
    draft: str = ""


def _reference_url(case_pk: int, draft: str, **params: str) -> str:
    if draft.isdigit():
        params = {"draft": draft, **params}
    return f"/grading/references/{case_pk}?" + urlencode(params)


@router.post("/references/{case_pk}")
def save_reference(
    case_pk: int,
    form: Annotated[ReferenceForm, Form()],
    session: SessionDep,
    principal: Principal = Depends(GRADERS),
) -> Response:
    """Save a new version of the case's reference response."""
    try:
        v = gs.save_reference(
            session=session, case_pk=case_pk, author_id=principal.user_id, text=form.text, note=form.note
        )
    except gs.GradingError as exc:
        if exc.status == 404:
            raise HTTPException(status_code=404, detail=exc.message) from exc
        return _see_other(_reference_url(case_pk, form.draft, error=exc.message))
    return _see_other(_reference_url(case_pk, form.draft, flash=f"Version {v.version} saved."))


@router.post("/references/versions/{reference_id}/approve")
def approve_reference(
    reference_id: int, session: SessionDep, principal: Principal = Depends(LEAD)
) -> Response:
    """Approve a reference version (lead)."""
    try:
        v = gs.approve_reference(session=session, reference_id=reference_id, lead_id=principal.user_id)
    except gs.GradingError as exc:
        raise HTTPException(status_code=exc.status, detail=exc.message) from exc
    return _see_other(
        f"/grading/references/{v.case_pk}?" + urlencode({"flash": f"Version {v.version} approved."})
    )


@router.post("/references/versions/{reference_id}/grade")
def grade_reference(
    reference_id: int,
    form: Annotated[ScoresForm, Form()],
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(GRADERS),
) -> Response:
    """Grade a reference version against the rubric."""
    ref = session.get(ReferenceVersion, reference_id)
    if ref is None:
        raise HTTPException(status_code=404, detail=f"reference {reference_id} does not exist")
    data = form.scores_data()
    try:
        scores = gs.validate_scores(spec=spec, data=data)
        gs.grade_reference(
            session=session, reference_id=reference_id, grader_id=principal.user_id, scores=scores
        )
    except gs.GradingError as exc:
        return _see_other(f"/grading/references/{ref.case_pk}?" + urlencode({"error": exc.message}))
    return _see_other(f"/grading/references/{ref.case_pk}?" + urlencode({"flash": "Reference graded."}))
