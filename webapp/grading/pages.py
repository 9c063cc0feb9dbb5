"""Grading pages: queues, batch overview, the grading page, adjudication, agreement and references."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
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
from webapp.templating import render
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
        },
    )


@router.post("/runs/{run_id}/next")
async def take_next(
    run_id: int, request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(GRADERS)
) -> Response:
    """Reserve my next draft of the batch and open it (or say the batch is done)."""
    form = await request.form()
    batch = _batch_from(form, run_id)
    draft = gs.next_item(session=session, spec=spec, grader_id=principal.user_id, batch=batch)
    if draft is None:
        return _see_other(f"/grading/runs/{run_id}?{batch.query_string()}&done=1")
    qs = batch.query_string()
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
            "done": request.query_params.get("done") == "1",
        },
    )


def _draft_context(
    session: SessionDep, spec: EvalSpec, draft_id: int, principal: Principal, batch: gs.BatchFilter | None
) -> dict[str, Any]:
    draft = _draft_or_404(session, draft_id)
    case = session.get(EvalCase, draft.case_pk)
    run = session.get(Run, draft.run_id)
    batch = batch or gs.BatchFilter(run_id=draft.run_id)
    own = gs.own_grade(session=session, draft_id=draft_id, grader_id=principal.user_id)
    # Blind: other grades only once the caller has graded the draft (the lead may open them anyway).
    others: list[Grade] = []
    if own is not None or principal.has_role("lead"):
        others = [
            g
            for g in gs.grades_visible_to(session=session, draft_id=draft_id, principal=principal)
            if g.grader_id != principal.user_id
        ]
    adjudication = session.exec(select(Adjudication).where(Adjudication.draft_id == draft_id)).first()
    final = session.exec(select(FinalGrade).where(FinalGrade.draft_id == draft_id)).first()
    slot = session.exec(
        select(GradingSlot).where(
            GradingSlot.draft_id == draft_id, GradingSlot.grader_id == principal.user_id
        )
    ).first()
    now = utcnow()
    live_places = [
        s
        for s in session.exec(select(GradingSlot).where(GradingSlot.draft_id == draft_id))
        if s.grade_id is not None or (s.expires_at is not None and as_utc(s.expires_at) > now)
    ]
    has_place = own is not None or slot is not None or len(live_places) < spec.grading.graders_per_draft
    reference = gs.current_reference(session=session, case_pk=draft.case_pk)
    progress = gs.batch_progress(session=session, spec=spec, batch=batch)
    mine_in_batch = next((p for p in progress.graders if p.grader_id == principal.user_id), None)
    return {
        "draft": draft,
        "case": case,
        "run": run,
        "batch": batch,
        "batch_qs": batch.query_string(),
        "cited": gs.cited_revisions(session=session, draft=draft),
        "reference": reference,
        "own": own,
        "others": others,
        "show_others": own is not None or principal.has_role("lead"),
        # A lead who grades the draft too can keep it blind: others' grades start folded away.
        "others_folded": own is None,
        "history": gs.grade_history(session=session, draft_id=draft_id, principal=principal),
        "adjudication": adjudication if (own is not None or principal.has_role("lead")) else None,
        "final": final if (own is not None or principal.has_role("lead")) else None,
        # Why the grader may not change their grade now (resolved, or a disagreement the lead holds).
        "locked": (
            gs.grade_lock(session=session, grade=own)
            if own is not None
            else "this draft has been adjudicated; grades can no longer change"
            if adjudication is not None and adjudication.status == "resolved"
            else None
        ),
        "has_place": has_place,
        "reservation": slot if slot is not None and slot.grade_id is None else None,
        "progress": progress,
        "mine_in_batch": mine_in_batch,
        "users": _users(session),
        "shortcuts": SHORTCUTS,
        "factual_keys": FACTUAL_KEYS,
        "as_utc": as_utc,
    }


@router.get("/drafts/{draft_id}", response_class=HTMLResponse)
def grading_page(
    draft_id: int,
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(GRADERS),
) -> HTMLResponse:
    """Show a draft with its ticket, KB text, reference and the rubric form."""
    draft = _draft_or_404(session, draft_id)
    ctx = _draft_context(session, spec, draft_id, principal, _batch_from(request.query_params, draft.run_id))
    own = ctx["own"]
    ctx["values"] = gs.scores_of(own) if own is not None else {}
    ctx["flash"] = request.query_params.get("flash")
    return render(request, "grading/draft.html", ctx)


@router.post("/drafts/{draft_id}", response_class=HTMLResponse)
async def submit_grade(
    draft_id: int,
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(GRADERS),
) -> Response:
    """Save my grade of the draft (first grade or revision); with next=1 open my next item."""
    draft = _draft_or_404(session, draft_id)
    form = await request.form()
    data = {k: form.get(k) for k in ("factual_accuracy", *gs.SCALE_KEYS, "rationale", "unsupported_claim")}
    batch = _batch_from(form, draft.run_id)
    try:
        scores = gs.validate_scores(spec=spec, data=data)
        own = gs.own_grade(session=session, draft_id=draft_id, grader_id=principal.user_id)
        if own is None:
            gs.record_grade(
                session=session, spec=spec, draft_id=draft_id, grader_id=principal.user_id, scores=scores
            )
            message = "Grade saved."
        else:
            gs.revise_grade(
                session=session, spec=spec, grade_id=own.id, grader_id=principal.user_id, scores=scores
            )  # type: ignore[arg-type]
            message = "Grade revised."
    except gs.GradingError as exc:
        # Keep everything the grader typed: the page comes back with their values and the error.
        ctx = _draft_context(session, spec, draft_id, principal, batch)
        ctx.update({"values": data, "error": exc.message, "error_field": exc.field, "flash": None})
        return render(request, "grading/draft.html", ctx, status_code=exc.status)
    qs = batch.query_string()
    if form.get("next") == "1":
        nxt = gs.next_item(session=session, spec=spec, grader_id=principal.user_id, batch=batch)
        if nxt is not None:
            return _see_other(
                f"/grading/drafts/{nxt.id}?"
                + urlencode({"flash": f"{message} Next item."})
                + (f"&{qs}" if qs else "")
            )
        return _see_other(f"/grading/runs/{draft.run_id}?done=1" + (f"&{qs}" if qs else ""))
    return _see_other(
        f"/grading/drafts/{draft_id}?" + urlencode({"flash": message}) + (f"&{qs}" if qs else "")
    )


@router.post("/drafts/{draft_id}/skip")
async def skip(
    draft_id: int,
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(GRADERS),
) -> Response:
    """Give back my reservation of the draft so someone else can take it."""
    draft = _draft_or_404(session, draft_id)
    form = await request.form()
    gs.release_reservation(session=session, draft_id=draft_id, grader_id=principal.user_id)
    qs = _batch_from(form, draft.run_id).query_string()
    return _see_other(f"/grading/runs/{draft.run_id}" + (f"?{qs}" if qs else ""))


@router.get("/adjudication", response_class=HTMLResponse)
def adjudication_queue(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(LEAD)
) -> HTMLResponse:
    """Show disagreements waiting for the lead, both grades side by side."""
    status = request.query_params.get("status", "open")
    if status not in ("open", "rework", "resolved", "dissolved"):
        status = "open"
    items = []
    for adj in gs.list_adjudications(session=session, status=status):
        draft = session.get(Draft, adj.draft_id)
        case = session.get(EvalCase, draft.case_pk) if draft else None
        grades = gs.grades_visible_to(session=session, draft_id=adj.draft_id, principal=principal)
        final = session.exec(select(FinalGrade).where(FinalGrade.draft_id == adj.draft_id)).first()
        items.append({"adj": adj, "draft": draft, "case": case, "grades": grades, "final": final})
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


@router.post("/adjudication/{adjudication_id}/resolve")
async def resolve(
    adjudication_id: int,
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(LEAD),
) -> Response:
    """Set the final grade of a disagreement with a note."""
    form = await request.form()
    data = {k: form.get(k) for k in ("factual_accuracy", *gs.SCALE_KEYS, "rationale", "unsupported_claim")}
    try:
        scores = gs.validate_scores(spec=spec, data=data)
        final = gs.resolve_adjudication(
            session=session,
            spec=spec,
            adjudication_id=adjudication_id,
            lead_id=principal.user_id,
            scores=scores,
            note=str(form.get("note") or ""),
        )
    except gs.GradingError as exc:
        return _see_other(
            "/grading/adjudication?" + urlencode({"error": f"Adjudication {adjudication_id}: {exc.message}"})
        )
    return _see_other(
        "/grading/adjudication?" + urlencode({"flash": f"Draft {final.draft_id}: final grade set."})
    )


@router.post("/adjudication/{adjudication_id}/return")
async def send_back(
    adjudication_id: int, request: Request, session: SessionDep, principal: Principal = Depends(LEAD)
) -> Response:
    """Return one grade of a disagreement to its grader with a comment."""
    form = await request.form()
    try:
        grade_id = int(str(form.get("grade_id") or "0"))
        grade = gs.return_grade(
            session=session,
            adjudication_id=adjudication_id,
            grade_id=grade_id,
            lead_id=principal.user_id,
            comment=str(form.get("comment") or ""),
        )
    except (gs.GradingError, ValueError) as exc:
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


@router.get("/references/{case_pk}", response_class=HTMLResponse)
def reference_page(
    case_pk: int, request: Request, session: SessionDep, principal: Principal = Depends(GRADERS)
) -> HTMLResponse:
    """Show a case's reference: every version, the editor, approval and grades of the reference."""
    case = session.get(EvalCase, case_pk)
    if case is None:
        raise HTTPException(status_code=404, detail=f"test case {case_pk} does not exist")
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


@router.post("/references/{case_pk}")
async def save_reference(
    case_pk: int, request: Request, session: SessionDep, principal: Principal = Depends(GRADERS)
) -> Response:
    """Save a new version of the case's reference response."""
    form = await request.form()
    try:
        v = gs.save_reference(
            session=session,
            case_pk=case_pk,
            author_id=principal.user_id,
            text=str(form.get("text") or ""),
            note=str(form.get("note") or ""),
        )
    except gs.GradingError as exc:
        if exc.status == 404:
            raise HTTPException(status_code=404, detail=exc.message) from exc
        return _see_other(f"/grading/references/{case_pk}?" + urlencode({"error": exc.message}))
    return _see_other(f"/grading/references/{case_pk}?" + urlencode({"flash": f"Version {v.version} saved."}))


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
async def grade_reference(
    reference_id: int,
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(GRADERS),
) -> Response:
    """Grade a reference version against the rubric."""
    ref = session.get(ReferenceVersion, reference_id)
    if ref is None:
        raise HTTPException(status_code=404, detail=f"reference {reference_id} does not exist")
    form = await request.form()
    data = {k: form.get(k) for k in ("factual_accuracy", *gs.SCALE_KEYS, "rationale", "unsupported_claim")}
    try:
        scores = gs.validate_scores(spec=spec, data=data)
        gs.grade_reference(
            session=session, reference_id=reference_id, grader_id=principal.user_id, scores=scores
        )
    except gs.GradingError as exc:
        return _see_other(f"/grading/references/{ref.case_pk}?" + urlencode({"error": exc.message}))
    return _see_other(f"/grading/references/{ref.case_pk}?" + urlencode({"flash": "Reference graded."}))
