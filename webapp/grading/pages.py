"""Grading pages: my queues, a batch, the grading page with save-and-next and skip (the lead's and reference pages are included)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from fastapi import Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup
from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc
from webapp.grading import adjudication_pages, hooks, reference_pages  # noqa: F401 (their routes join `router`)
from webapp.grading.errors import GradingError
from webapp.grading.forms import (
    FACTUAL_KEYS,
    GRADERS,
    SHORTCUTS,
    BatchForm,
    GradeForm,
    SkipForm,
    batch_from,
    router,
    see_other,
)
from webapp.grading.grades import save_grade
from webapp.grading.item import GradingItemView, grading_item, reserve_upcoming
from webapp.grading.outcome import finalised
from webapp.grading.overview import batch_view, queues_view
from webapp.grading.plan import plan_closed_reason
from webapp.grading.queue import (
    BatchFilter,
    draft_basics,
    held_drafts,
    next_item,
    reserve_next,
)
from webapp.grading.scores import validate_scores
from webapp.grading.skips import SKIP_REASONS, skip_draft
from webapp.grading.writes import write_section
from webapp.web.deps import SpecDep
from webapp.web.flash import consume_flash, flash_context, redirect_with_flash, set_flash
from webapp.web.templating import is_htmx, render_view, templates

# Shown once on the batch page when the grader asks for the next draft and none is left for them.
BATCH_DONE = "Nothing left for you in this batch. Thank you!"

@router.get("", response_class=HTMLResponse)
def queues(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(GRADERS)
) -> HTMLResponse:
    """Show my queues: the next item of each batch, grades returned to me, my recent grades."""
    view = replace(queues_view(session=session, spec=spec, principal=principal), flash=flash_context(request)["flash"])
    return consume_flash(request, render_view(request, "grading/queues.html", view))


@router.post("/runs/{run_id}/next")
def take_next(
    run_id: int,
    form: Annotated[BatchForm, Form()],
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(GRADERS),
) -> Response:
    """Reserve my next draft of the batch and open it (or say the batch is done)."""
    batch = form.batch(run_id)
    draft = next_item(session=session, spec=spec, grader_id=principal.user_id, batch=batch)
    qs = batch.query_string()
    if draft is None:
        closed = plan_closed_reason(session=session, run_id=run_id)
        text = f"Grading closed: {closed}." if closed else BATCH_DONE
        return redirect_with_flash(request, f"/grading/runs/{run_id}" + (f"?{qs}" if qs else ""), text=text)
    return see_other(f"/grading/drafts/{draft.id}" + (f"?{qs}" if qs else ""))


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def batch_overview(
    run_id: int, request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(GRADERS)
) -> HTMLResponse:
    """Show a batch: progress overall and per grader, filters, and where each draft stands."""
    page_param = request.query_params.get("page", "1")
    page = int(page_param) if page_param.isdigit() else 1  # a malformed page shows the first
    view = batch_view(
        session=session, spec=spec, principal=principal, batch=batch_from(request.query_params, run_id), page=page
    )
    if view is None:
        raise HTTPException(status_code=404, detail=f"run {run_id} does not exist")
    flash = flash_context(request)  # "nothing left" rides in the one-time flash, not in the URL
    view = replace(view, flash=flash["flash"], error=flash["error"])
    return consume_flash(request, render_view(request, "grading/batch.html", view))


def _item_or_404(
    session: Session,
    spec: EvalSpec,
    principal: Principal,
    draft_id: int,
    filters: BatchFilter,
    *,
    saved: tuple[int, float | None] | None = None,
) -> GradingItemView:
    """Return the grading item's view (404 when the draft does not exist)."""
    view = grading_item(
        session=session,
        spec=spec,
        draft_id=draft_id,
        principal=principal,
        filters=filters,
        judge=hooks.judge_lookup(),
        saved=saved,
    )
    if view is None:
        raise HTTPException(status_code=404, detail=f"draft {draft_id} does not exist")
    return replace(view, blank_rubric=_blank_rubric(spec))


_blank_rubric_cache: tuple[EvalSpec, Markup] | None = None


def _blank_rubric(spec: EvalSpec) -> Markup:
    """Return the empty rubric form of the spec, rendered once (it is the same on every new item)."""
    global _blank_rubric_cache
    cached = _blank_rubric_cache
    if cached is None or cached[0] is not spec:
        rubric_fields = vars(templates.env.get_template("grading/_rubric.html").module)["rubric_fields"]
        cached = (spec, Markup(rubric_fields(spec, {}, SHORTCUTS, FACTUAL_KEYS, None, compact=True)))
        _blank_rubric_cache = cached
    return cached[1]


# The grading page's fixed names beside its view: keyboard shortcuts, skip reasons, the time helper.
_ITEM_CONSTANTS: dict[str, object] = {
    "shortcuts": SHORTCUTS,
    "factual_keys": FACTUAL_KEYS,
    "skip_reasons": SKIP_REASONS,
    "as_utc": as_utc,
}


def _item_response(
    request: Request, view: GradingItemView, *, push: bool = False, status_code: int = 200
) -> HTMLResponse:
    """Render the grading page, or for htmx only the item, pushing its URL when it is a new draft."""
    headers = {"Vary": "HX-Request"}
    if push and is_htmx(request):
        headers["HX-Push-Url"] = view.draft_url
    shown = replace(view, htmx_fragment=is_htmx(request))
    return render_view(
        request, "grading/draft.html", shown, block="item", status_code=status_code, headers=headers,
        constants={**_ITEM_CONSTANTS, "batch_qs": shown.batch_qs},
    )


@router.get("/drafts/{draft_id}", response_class=HTMLResponse)
def grading_page(
    draft_id: int,
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(GRADERS),
) -> HTMLResponse:
    """Show a draft with its ticket, KB text, reference and the rubric form (htmx: only the item)."""
    view = _item_or_404(session, spec, principal, draft_id, batch_from(request.query_params, 0))
    view = replace(view, flash=flash_context(request)["flash"])
    return consume_flash(request, _item_response(request, view))


def _reserve_following(
    session: Session, spec: EvalSpec, principal: Principal, batch: BatchFilter, draft_id: int, *, htmx: bool
) -> int | None:
    """Reserve the grader's next draft after `draft_id` and, when htmx will show it now, the one after it.

    What the grader holds already is read once for both: usually the next draft, reserved while
    they read this one.
    """
    me = principal.user_id
    held = held_drafts(session=session, spec=spec, grader_id=me, batch=batch, exclude=(draft_id,))
    nxt = reserve_next(
        session=session,
        spec=spec,
        grader_id=me,
        batch=batch,
        exclude=(draft_id,),
        held=held[0] if held else None,
    )
    if nxt is not None and htmx:
        after = next((h for h in held if h[0] != nxt), None)
        reserve_upcoming(session=session, spec=spec, grader_id=me, batch=batch, draft_id=nxt, held=after)
    return nxt


def _open_next(
    request: Request,
    session: Session,
    spec: EvalSpec,
    principal: Principal,
    batch: BatchFilter,
    nxt: int | None,
    flash: str,
    saved: tuple[int, float | None] | None = None,
) -> Response:
    """Open the grader's next item (reserved already): htmx gets it swapped in (URL pushed), a form a redirect.

    `saved` (draft id, confidence): the draft just graded, whose model signals the swapped-in item shows.
    """
    qs = batch.query_string()
    if nxt is None:
        done = f"/grading/runs/{batch.run_id}" + (f"?{qs}" if qs else "")
        if is_htmx(request):
            answer = Response(status_code=204, headers={"HX-Location": done})
            set_flash(request, answer, done, text=BATCH_DONE)
            return answer
        return redirect_with_flash(request, done, text=BATCH_DONE)
    if is_htmx(request):
        view = _item_or_404(session, spec, principal, nxt, batch, saved=saved)
        return _item_response(request, replace(view, flash=flash), push=True)
    return redirect_with_flash(request, f"/grading/drafts/{nxt}" + (f"?{qs}" if qs else ""), text=flash)


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
    data = form.scores_data()
    batch = form.batch(0)  # the draft's run once saved (grading_item, below, reads it for itself)
    following = form.next == "1"
    try:
        scores = validate_scores(spec=spec, data=data)
        # The writes, committed before anything is read for the page (see webapp.grading.writes).
        with write_section(session):
            saved = save_grade(
                session=session, spec=spec, draft_id=draft_id, grader_id=principal.user_id, scores=scores
            )
            batch = form.batch(saved.run_id)
            finalised(session, draft_id, saved.outcome)
            nxt = (
                _reserve_following(session, spec, principal, batch, draft_id, htmx=is_htmx(request))
                if following
                else None
            )
    except GradingError as exc:
        if exc.status == 404:
            raise HTTPException(status_code=404, detail=exc.message) from exc
        # Keep everything the grader typed: the item comes back with their values and the error
        # (200 for htmx, which swaps only successful answers; the URL stays on this draft).
        session.rollback()
        view = _item_or_404(session, spec, principal, draft_id, batch)
        view = replace(view, values=data, error=exc.message, error_field=exc.field, flash=None)
        return _item_response(request, view, status_code=200 if is_htmx(request) else exc.status)
    message = "Grade saved" if saved.created else "Grade revised"
    qs = batch.query_string()
    if following:
        return _open_next(
            request,
            session,
            spec,
            principal,
            batch,
            nxt,
            _saved_flash(message, draft_id),
            (draft_id, saved.confidence),
        )
    if is_htmx(request):
        view = _item_or_404(session, spec, principal, draft_id, batch)
        return _item_response(request, replace(view, flash=f"{message}."))
    return redirect_with_flash(request, f"/grading/drafts/{draft_id}" + (f"?{qs}" if qs else ""), text=f"{message}.")


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
                session=session,
                draft_id=draft_id,
                grader_id=principal.user_id,
                reason=form.reason,
                detail=form.detail,
            )
            # The skipped draft is passed over now even if nothing else is left; it comes back later, last.
            nxt = _reserve_following(session, spec, principal, batch, draft_id, htmx=is_htmx(request))
    except GradingError as exc:
        if exc.status == 404:
            raise HTTPException(status_code=404, detail=exc.message) from exc
        session.rollback()
        view = _item_or_404(session, spec, principal, draft_id, batch)
        view = replace(view, skip_error=exc.message, flash=None, skip_values=form.model_dump())
        return _item_response(request, view, status_code=200 if is_htmx(request) else exc.status)
    return _open_next(
        request,
        session,
        spec,
        principal,
        batch,
        nxt,
        f"Skipped draft {draft_id} ({SKIP_REASONS[form.reason]}).",
    )
