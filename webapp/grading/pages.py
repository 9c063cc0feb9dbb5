"""Grading pages: queues, batch overview, the grading page, adjudication, agreement and references."""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup
from pydantic import BaseModel
from sqlmodel import Session, col, select

from webapp.auth.models import User
from webapp.auth.service import Principal
from webapp.datasets.models import EvalCase
from webapp.db import SessionDep
from webapp.deps import SpecDep, require_role
from webapp.flows import after_grading, judge_verdict
from webapp.grading import references as reference_service
from webapp.grading.adjudication import list_adjudications, resolve_adjudication, return_grade
from webapp.grading.agreement import agreement_report
from webapp.grading.errors import GradingError
from webapp.grading.evidence import CitedKbText, cited_kb_texts, model_signals
from webapp.grading.grades import (
    grades_visible_to,
    returned_grades,
    save_grade,
)
from webapp.grading.item import grading_item, reserve_upcoming
from webapp.grading.models import (
    FinalGrade,
    Grade,
    GradingSlot,
    ReferenceGrade,
    ReferenceVersion,
)
from webapp.grading.progress import batch_progress, grading_pace, waiting_for_grader
from webapp.grading.queue import (
    SKIP_REASONS,
    BatchFilter,
    batch_drafts_stmt,
    draft_basics,
    next_item,
    reserve_next,
    skip_counts,
    skip_draft,
)
from webapp.grading.references import reference_versions
from webapp.grading.scores import GRADER_ROLES, SCALE_KEYS, scores_of, validate_scores
from webapp.grading.status import grading_status
from webapp.grading.writes import write_section
from webapp.runs.models import Draft, Run
from webapp.spec import EvalSpec
from webapp.templating import is_htmx, render, templates
from webapp.timeutil import as_utc, utcnow

router = APIRouter(prefix="/grading")

GRADERS = require_role(*GRADER_ROLES)
LEAD = require_role("lead")

# Keys for every score: one keyboard row per criterion, so a grade is a handful of keystrokes.
SHORTCUTS: dict[str, list[str]] = {
    "citation_relevance": ["1", "2", "3", "4", "5"],
    "tone": ["q", "w", "e", "r", "t"],
    "completeness": ["a", "s", "d", "f", "g"],
}
FACTUAL_KEYS = {"pass": "p", "fail": "x"}


def _batch_from(params: Any, run_id: int) -> BatchFilter:
    golden_raw = (params.get("golden") or "").strip()
    return BatchFilter(
        run_id=run_id,
        category=(params.get("category") or "").strip() or None,
        intent=(params.get("intent") or "").strip() or None,
        draft_intent=(params.get("draft_intent") or "").strip() or None,
        golden=None if golden_raw == "" else golden_raw in ("1", "true", "yes", "on"),
    )


def _users(session: SessionDep) -> dict[int, str]:
    return {u.id: (u.name or u.email) for u in session.exec(select(User))}  # type: ignore[misc]


def _see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


class BatchForm(BaseModel):
    """The batch filter a grading form carries along (hidden fields)."""

    category: str = ""
    intent: str = ""
    draft_intent: str = ""
    golden: str = ""

    def batch(self, run_id: int) -> BatchFilter:
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
        return {k: getattr(self, k) or None for k in ("factual_accuracy", *SCALE_KEYS)} | {
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
        (run, batch_progress(session=session, spec=spec, batch=BatchFilter(run_id=run.id)))
        for run in runs
    ]  # type: ignore[arg-type]
    returned = returned_grades(session=session, grader_id=principal.user_id)
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
            "waiting": waiting_for_grader(session=session, spec=spec, grader_id=principal.user_id),
            "flash": request.query_params.get("flash"),
            "my_pace": next(iter(grading_pace(session=session, grader_ids=[principal.user_id])), None),
            # The lead sees everyone's pace; a labeler only their own.
            "team_pace": grading_pace(session=session) if principal.has_role("lead") else None,
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
    draft = next_item(session=session, spec=spec, grader_id=principal.user_id, batch=batch)
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
    progress = batch_progress(session=session, spec=spec, batch=batch)
    status = grading_status(session=session, run_id=run_id)
    rows = list(session.exec(batch_drafts_stmt(batch)))
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
            "skips": skip_counts(session=session, draft_ids=[d.id for d, _ in rows])
            if principal.has_role("lead")
            else {},
            "done": request.query_params.get("done") == "1",
        },
    )


def _item_or_404(
    session: Session, spec: EvalSpec, principal: Principal, draft_id: int, filters: BatchFilter
) -> dict[str, Any]:
    """Return the grading item's template context (404 when the draft does not exist)."""
    ctx = grading_item(
        session=session, spec=spec, draft_id=draft_id, principal=principal, filters=filters, judge=judge_verdict
    )
    if ctx is None:
        raise HTTPException(status_code=404, detail=f"draft {draft_id} does not exist")
    ctx.update(
        {
            "shortcuts": SHORTCUTS,
            "factual_keys": FACTUAL_KEYS,
            "skip_reasons": SKIP_REASONS,
            "as_utc": as_utc,
            "blank_rubric": _blank_rubric(spec),
        }
    )
    return ctx


_blank_rubric_cache: tuple[EvalSpec, Markup] | None = None


def _blank_rubric(spec: EvalSpec) -> Markup:
    """Return the empty rubric form of the spec, rendered once (it is the same on every new item)."""
    global _blank_rubric_cache
    cached = _blank_rubric_cache
    if cached is None or cached[0] is not spec:
        macros: Any = templates.env.get_template("grading/_rubric.html").module
        cached = (spec, Markup(macros.rubric_fields(spec, {}, SHORTCUTS, FACTUAL_KEYS, None, compact=True)))
        _blank_rubric_cache = cached
    return cached[1]


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
    ctx = _item_or_404(session, spec, principal, draft_id, _batch_from(request.query_params, 0))
    ctx["flash"] = request.query_params.get("flash")
    return _item_response(request, ctx)


def _reserve_following(
    session: Session, spec: EvalSpec, principal: Principal, batch: BatchFilter, draft_id: int, *, htmx: bool
) -> int | None:
    """Reserve the grader's next draft after `draft_id` and, when htmx will show it now, the one after it."""
    nxt = reserve_next(session=session, spec=spec, grader_id=principal.user_id, batch=batch, exclude=(draft_id,))
    if nxt is not None and htmx:
        reserve_upcoming(session=session, spec=spec, grader_id=principal.user_id, batch=batch, draft_id=nxt)
    return nxt


def _open_next(
    request: Request,
    session: Session,
    spec: EvalSpec,
    principal: Principal,
    batch: BatchFilter,
    nxt: int | None,
    flash: str,
    extra: dict[str, Any] | None = None,
) -> Response:
    """Open the grader's next item (reserved already): htmx gets it swapped in (URL pushed), a form a redirect."""
    qs = batch.query_string()
    if nxt is None:
        done = f"/grading/runs/{batch.run_id}?done=1" + (f"&{qs}" if qs else "")
        if is_htmx(request):
            return Response(status_code=204, headers={"HX-Location": done})
        return _see_other(done)
    if is_htmx(request):
        ctx = _item_or_404(session, spec, principal, nxt, batch)
        ctx.update({"flash": flash, **(extra or {})})
        return _item_response(request, ctx, push=True)
    return _see_other(f"/grading/drafts/{nxt}?" + urlencode({"flash": flash}) + (f"&{qs}" if qs else ""))


def _saved_flash(message: str, draft_id: int) -> str:
    return f"{message} (draft {draft_id}). Next item."


def _draft_or_404(session: Session, draft_id: int) -> tuple[int, float | None]:
    basics = draft_basics(session=session, draft_id=draft_id)
    if basics is None:
        raise HTTPException(status_code=404, detail=f"draft {draft_id} does not exist")
    return basics


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
    run_id, confidence = _draft_or_404(session, draft_id)
    data = form.scores_data()
    batch = form.batch(run_id)
    following = form.next == "1"
    try:
        scores = validate_scores(spec=spec, data=data)
        # The writes, committed before anything is read for the page (see webapp.grading.writes).
        with write_section(session):
            _, created = save_grade(
                session=session, spec=spec, draft_id=draft_id, grader_id=principal.user_id, scores=scores
            )
            after_grading(session=session, spec=spec, draft_id=draft_id)
            nxt = (
                _reserve_following(session, spec, principal, batch, draft_id, htmx=is_htmx(request))
                if following
                else None
            )
    except GradingError as exc:
        # Keep everything the grader typed: the item comes back with their values and the error
        # (200 for htmx, which swaps only successful answers; the URL stays on this draft).
        session.rollback()
        ctx = _item_or_404(session, spec, principal, draft_id, batch)
        ctx.update({"values": data, "error": exc.message, "error_field": exc.field, "flash": None})
        return _item_response(request, ctx, status_code=200 if is_htmx(request) else exc.status)
    message = "Grade saved" if created else "Grade revised"
    qs = batch.query_string()
    if following:
        signals = model_signals(
            session=session, spec=spec, draft_id=draft_id, confidence=confidence, has_graded=True, judge=judge_verdict
        )
        return _open_next(
            request, session, spec, principal, batch, nxt, _saved_flash(message, draft_id),
            {"saved_signals": signals, "saved_draft_id": draft_id},
        )
    if is_htmx(request):
        ctx = _item_or_404(session, spec, principal, draft_id, batch)
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
    run_id, _ = _draft_or_404(session, draft_id)
    batch = form.batch(run_id)
    try:
        with write_section(session):
            skip_draft(
                session=session, draft_id=draft_id, grader_id=principal.user_id, reason=form.reason, detail=form.detail
            )
            # The skipped draft is passed over now even if nothing else is left; it comes back later, last.
            nxt = _reserve_following(session, spec, principal, batch, draft_id, htmx=is_htmx(request))
    except GradingError as exc:
        if exc.status == 404:
            raise HTTPException(status_code=404, detail=exc.message) from exc
        session.rollback()
        ctx = _item_or_404(session, spec, principal, draft_id, batch)
        ctx.update({"skip_error": exc.message, "flash": None, "skip_values": form.model_dump()})
        return _item_response(request, ctx, status_code=200 if is_htmx(request) else exc.status)
    return _open_next(
        request, session, spec, principal, batch, nxt, f"Skipped draft {draft_id} ({SKIP_REASONS[form.reason]})."
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
    for adj in list_adjudications(session=session, status=status):
        draft = session.get(Draft, adj.draft_id)
        case = session.get(EvalCase, draft.case_pk) if draft else None
        grades = grades_visible_to(session=session, draft_id=adj.draft_id, principal=principal)
        final = session.exec(select(FinalGrade).where(FinalGrade.draft_id == adj.draft_id)).first()
        letters = {g.id: "AB"[i] if i < 2 else str(i + 1) for i, g in enumerate(grades)}
        claims = [(g.unsupported_claim, letters[g.id]) for g in grades if g.unsupported_claim]
        prefill: dict[str, Any] = {}
        taken_from = None
        for g in grades:
            if take == f"{adj.id}:{g.id}":
                prefill = scores_of(g)
                taken_from = letters[g.id]
        items.append(
            {
                "adj": adj,
                "draft": draft,
                "case": case,
                "grades": grades,
                "letters": letters,
                "final": final,
                "cited": cited_kb_texts(session=session, citations=draft.citations) if draft else [],
                "segments": highlight(draft.draft_text or "", claims) if draft else [],
                "prefill": prefill,
                "taken_from": taken_from,
                "signals": model_signals(
                    session=session,
                    spec=spec,
                    draft_id=adj.draft_id,
                    confidence=draft.confidence,
                    has_graded=True,
                    judge=judge_verdict,
                )
                if draft
                else None,
            }
        )
    counts = {
        s: len(list_adjudications(session=session, status=s))
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
        scores = validate_scores(spec=spec, data=data)
        final = resolve_adjudication(
            session=session,
            spec=spec,
            adjudication_id=adjudication_id,
            lead_id=principal.user_id,
            scores=scores,
            note=form.note,
        )
    except GradingError as exc:
        session.rollback()
        return _see_other(
            "/grading/adjudication?" + urlencode({"error": f"Adjudication {adjudication_id}: {exc.message}"})
        )
    after_grading(session=session, spec=spec, draft_id=final.draft_id)
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
        grade = return_grade(
            session=session,
            adjudication_id=adjudication_id,
            grade_id=grade_id,
            lead_id=principal.user_id,
            comment=form.comment,
        )
    except (GradingError, ValueError) as exc:
        session.rollback()
        message = exc.message if isinstance(exc, GradingError) else "grade_id: not a number"
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
    report = agreement_report(session=session, spec=spec, run_id=run_id)
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


def _kb_for_reference(session: Session, case: EvalCase, draft: Draft | None) -> list[CitedKbText]:
    """Return the KB beside the reference editor: the draft's cited revisions, else the case's articles (current)."""
    if draft is not None and draft.citations:
        return cited_kb_texts(session=session, citations=draft.citations)
    articles = [str(a) for a in (case.kb_articles or [])]
    if not articles:
        return []
    return cited_kb_texts(session=session, citations=[{"article_id": a} for a in articles])


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
    versions = reference_versions(session=session, case_pk=case_pk)
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
        v = reference_service.save_reference(
            session=session, case_pk=case_pk, author_id=principal.user_id, text=form.text, note=form.note
        )
    except GradingError as exc:
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
        v = reference_service.approve_reference(session=session, reference_id=reference_id, lead_id=principal.user_id)
    except GradingError as exc:
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
        scores = validate_scores(spec=spec, data=data)
        reference_service.grade_reference(
            session=session, reference_id=reference_id, grader_id=principal.user_id, scores=scores
        )
    except GradingError as exc:
        return _see_other(f"/grading/references/{ref.case_pk}?" + urlencode({"error": exc.message}))
    return _see_other(f"/grading/references/{ref.case_pk}?" + urlencode({"flash": "Reference graded."}))
