"""Pages of the PM's draft-vs-sent review: periods, one period's pairs, verdicts, regression cases."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.core.spec import EvalSpec
from webapp.metrics import daily as metrics_daily
from webapp.metrics.models import Event
from webapp.regression import service as regression_service
from webapp.reviews import cadence, service
from webapp.reviews.models import ReviewItem, ReviewSample
from webapp.web.deps import SpecDep, require_role
from webapp.web.flash import consume_flash, flash_context, redirect_with_flash
from webapp.web.templating import is_htmx, render_view

router = APIRouter()

REVIEWERS = ("pm", "support_lead")


def _today(spec: EvalSpec) -> dt.date:
    return dt.datetime.now(spec.tz).date()


def _bounds(period: str) -> tuple[dt.date, dt.date, str]:
    try:
        return service.period_bounds(period)
    except service.ReviewError as exc:
        raise HTTPException(404, detail=str(exc)) from exc


@router.get("/reviews", response_class=HTMLResponse)
def reviews_index(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*REVIEWERS))
) -> HTMLResponse:
    """List the review periods (newest first) with their progress; past periods stay browsable."""
    view = ReviewsIndexView(periods=service.list_periods(session=session, spec=spec, today=_today(spec)), cadence=spec.review.cadence)
    return render_view(request, "reviews/index.html", view)


@dataclass(frozen=True)
class ReviewsIndexView:
    """The review periods, newest first, with their progress; the spec's cadence."""

    periods: list[service.PeriodSummary]
    cadence: str



@dataclass(frozen=True)
class ReviewPair:
    """One sampled pair: the review item, its event, and the draft and sent text as word diffs."""

    item: ReviewItem
    event: Event
    draft: list[service.Segment]  # the draft, deletions marked
    sent: list[service.Segment]  # the sent reply, insertions marked


@dataclass(frozen=True)
class ReviewPeriodView:
    """A review period: its bounds, its sample and pairs, the progress, and the reviewer's filter."""

    show: str  # "" (every pair) or "unreviewed"
    unreviewed: int
    period: str
    start: dt.date
    end: dt.date
    cadence: str
    complete: bool  # the period is over
    sample: ReviewSample | None
    pairs: list[ReviewPair]
    progress: service.Progress | None
    candidates: int  # the sent drafts the sample is drawn from
    verdicts: dict[str, str]
    limit: float  # the minor-edit limit
    flash: str | None = None



def _pair(item: ReviewItem, event: Event) -> ReviewPair:
    return ReviewPair(item, event, *service.word_diff(event.draft_text or "", event.sent_text or ""))


def period_view(
    session: SessionDep, spec: EvalSpec, period: str, sample: ReviewSample | None, show: str = "", *, only_item: int | None = None
) -> ReviewPeriodView:
    """Build a period's page from its sample's items (with `only_item`: that pair alone, for an htmx answer)."""
    start, end, cadence = _bounds(period)
    items = service.sample_items(session=session, sample=sample) if sample else []
    unreviewed = sum(1 for i, _ in items if i.verdict is None)
    if show == "unreviewed":
        items = [(i, e) for i, e in items if i.verdict is None]
    if only_item is not None:
        items = [(i, e) for i, e in items if i.id == only_item]
    return ReviewPeriodView(
        show=show, unreviewed=unreviewed, period=period, start=start, end=end, cadence=cadence,
        complete=end < _today(spec), sample=sample, pairs=[_pair(i, e) for i, e in items],
        progress=service.progress(session=session, sample=sample) if sample else None,
        candidates=len(service.candidate_ids(session=session, start=start, end=end)) if sample is None else sample.candidates,
        verdicts=service.VERDICTS, limit=spec.online_metrics.minor_edit_limit,
    )


@router.get("/reviews/{period}", response_class=HTMLResponse)
def review_period(
    request: Request,
    period: str,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(require_role(*REVIEWERS)),
    show: Literal["", "unreviewed"] = "",
) -> HTMLResponse:
    """Show a period's sampled pairs side by side with a word diff; a finished period's sample is drawn on first view."""
    start, end, _ = _bounds(period)
    sample = service.get_sample(session=session, period=period)
    if sample is None and end < _today(spec):
        # the draw is seeded by the period, so drawing on first view gives the same pairs whoever opens it
        try:
            sample = service.draw_sample(session=session, spec=spec, period=period, today=_today(spec), drawn_by=principal.user_id)
        except service.SampleAlreadyDrawn:  # another viewer's first view drew it meanwhile: show theirs
            sample = service.get_sample(session=session, period=period)
    return render_view(request, "reviews/period.html", period_view(session, spec, period, sample, show))


@router.post("/reviews/{period}/draw")
def draw(
    period: str, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*REVIEWERS))
) -> RedirectResponse:
    """Draw the period's sample now (also for the week in progress); an existing sample is kept (409).

    A period that has not begun, one before 2000, or a malformed one is refused (422) with the reason;
    a period already drawn, by an earlier request or one running at the same time, is a 409.
    """
    try:
        service.draw_sample(session=session, spec=spec, period=period, today=_today(spec), drawn_by=principal.user_id,
                            if_drawn="refuse")
    except service.SampleAlreadyDrawn as exc:
        raise HTTPException(409, detail=str(exc)) from exc
    except service.ReviewError as exc:
        raise HTTPException(422, detail=str(exc)) from exc
    return RedirectResponse(f"/reviews/{period}", status_code=303)


def _item_response(request: Request, session: SessionDep, spec: EvalSpec, item: ReviewItem, flash: str | None = None) -> Response:
    sample = session.get(ReviewSample, item.sample_id)
    assert sample is not None
    if not is_htmx(request):
        return RedirectResponse(f"/reviews/{sample.period}#item-{item.id}", status_code=303)
    view = replace(period_view(session, spec, sample.period, sample, only_item=item.id), flash=flash)
    return render_view(request, "reviews/period.html", view, block="pairs", headers={"HX-Trigger": "review-updated"})


@router.post("/reviews/items/{item_id}/verdict")
def verdict(
    request: Request,
    item_id: int,
    session: SessionDep,
    spec: SpecDep,
    verdict: str = Form(...),
    notes: str = Form(""),
    principal: Principal = Depends(require_role(*REVIEWERS)),
) -> Response:
    """Record the reviewer's verdict and notes on one pair."""
    try:
        item = service.record_verdict(session=session, item_id=item_id, verdict=verdict, notes=notes, reviewer=principal.user_id)
    except service.ReviewError as exc:
        raise HTTPException(404 if "no review item" in str(exc) else 422, detail=str(exc)) from exc
    return _item_response(request, session, spec, item)


@router.post("/reviews/items/{item_id}/regression")
def to_regression(
    request: Request,
    item_id: int,
    session: SessionDep,
    spec: SpecDep,
    input: str = Form(""),
    reference: str = Form(""),
    note: str = Form(""),
    principal: Principal = Depends(require_role(*REVIEWERS)),
) -> Response:
    """Add the pair to the regression suite, with the reference text the reviewer confirmed or edited."""
    try:
        case_id = service.add_to_regression(
            session=session, item_id=item_id, created_by=principal.user_id, input_text=input, reference_text=reference, note=note
        )
    except service.ReviewError as exc:
        raise HTTPException(404 if "no review item" in str(exc) else 422, detail=str(exc)) from exc
    item = session.get(ReviewItem, item_id)
    assert item is not None
    notice = regression_service.inclusion_notice(session=session, case_id=case_id)
    return _item_response(request, session, spec, item, flash=f"Added to the regression suite as {case_id}. {notice}")


@router.get("/reviews/{period}/progress", response_class=HTMLResponse)
def progress_fragment(
    request: Request, period: str, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*REVIEWERS))
) -> HTMLResponse:
    """Return the progress line of a period (refreshed after each verdict)."""
    sample = service.get_sample(session=session, period=period)
    return render_view(request, "reviews/period.html", period_view(session, spec, period, sample), block="progress")


@router.get("/cadence", response_class=HTMLResponse)
def cadence_page(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*cadence.ALL_MARKERS, "admin"))
) -> HTMLResponse:
    """List the reviews the plan's cadence has made due so far, with who marked each done and when."""
    today = metrics_daily.today_in(spec)
    view = CadenceView(
        due=cadence.due_reviews(session=session, spec=spec, today=today), today=today, phase=spec.review.phase,
        markers=cadence.MARKERS, error=flash_context(request)["error"],
    )
    return consume_flash(request, render_view(request, "reviews/cadence.html", view))


@dataclass(frozen=True)
class CadenceView:
    """The reviews the plan's cadence has made due so far, who may mark each done, and an error to show."""

    due: list[cadence.DueReview]
    today: dt.date
    phase: str
    markers: dict[str, tuple[str, ...]]
    error: str | None



@router.post("/cadence/done")
def cadence_done(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    kind: str = Form(...),
    period: str = Form(...),
    note: str = Form(""),
    principal: Principal = Depends(require_role(*cadence.ALL_MARKERS)),
) -> Response:
    """Mark one review of the cadence done by the signed-in person."""
    try:
        cadence.mark_done(
            session=session, spec=spec, principal=principal, kind=kind, period=period, today=metrics_daily.today_in(spec), note=note
        )
    except cadence.CadenceError as exc:
        return redirect_with_flash(request, "/cadence", text=str(exc), kind="error")
    return RedirectResponse(f"/cadence#{quote(kind)}-{quote(period)}", status_code=303)
