"""Pages: the regression suite and its results per run, adding a case from a draft, the suite
export, run comparison, baselines, and regression alerts."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from webapp.auth.service import Principal
from webapp.checks.draft_checks import DraftChecks, draft_results
from webapp.core.db import SessionDep, stored_id
from webapp.core.spec import EvalSpec
from webapp.grading import evidence as grading_evidence
from webapp.regression import alerts, case_pair, comparison, drop, hooks, service, views
from webapp.regression.judge_scores import judge_scores
from webapp.regression.routes import (
    ACK_ROLES,
    ADD_ROLES,
    BASELINE_ROLES,
    READ_ROLES,
    CaseFilters,
    csv_download,
)
from webapp.runs.deps import RunDep, run_or_404
from webapp.runs.service import DraftNotFound, RunNotFound, resolve_run
from webapp.web.deps import SpecDep, require_role
from webapp.web.templating import is_htmx, render_view

router = APIRouter()


@router.get("/regression", response_class=HTMLResponse, name="regression_suite")
def suite_page(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*READ_ROLES, "labeler"))
) -> HTMLResponse:
    """Show the regression suite, its progress towards the target, and its results for a run (newest by default)."""
    ref = request.query_params.get("run", "").strip()
    latest = None if ref else service.latest_run_id(session=session)
    run = run_or_404(session, ref or str(latest)) if ref or latest is not None else None
    # Blind grading: a case's pass or fail in the run is its drafts' check results (and final grade).
    signals = grading_evidence.signals_view(session=session, spec=spec, principal=principal, run_id=stored_id(run.id)) if run else None
    added = request.query_params.get("added", "")
    view = views.suite_view(session=session, spec=spec, run=run, signals=signals, added=added)
    return render_view(request, "regression/index.html", view, block="results")


@router.get("/regression/export.jsonl", name="regression_export")
def suite_export(session: SessionDep, principal: Principal = Depends(require_role(*READ_ROLES))) -> PlainTextResponse:
    """Download the suite as JSONL in the dataset format guide's schema."""
    return PlainTextResponse(
        service.export_jsonl(session=session),
        media_type="application/jsonl",
        headers={"Content-Disposition": 'attachment; filename="regression-suite.jsonl"'},
    )


@router.get("/runs/{run}/regression", response_class=HTMLResponse, name="run_regression")
def run_regression_page(
    request: Request, session: SessionDep, spec: SpecDep, *, principal: Principal = Depends(require_role(*READ_ROLES)), run: RunDep
) -> HTMLResponse:
    """Show the regression suite's result for one run, case by case."""
    view = views.run_regression_view(session=session, spec=spec, run=run, run_id=stored_id(run.id))
    return render_view(request, "regression/run.html", view)


def _draft_checks(session: SessionDep, spec: EvalSpec, principal: Principal, draft_id: int) -> tuple[DraftChecks, bool]:
    """Return the draft's check results for the form, and whether blind grading hides them from the caller."""
    try:
        d = draft_results(session=session, draft_id=draft_id)
    except DraftNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    hidden = grading_evidence.signals_view(session=session, spec=spec, principal=principal, draft_ids=[draft_id]).hides(draft_id)
    return d, hidden


@router.get("/regression/cases/from-draft/{draft_id}", response_class=HTMLResponse, name="regression_from_draft_form")
def from_draft_form(
    request: Request,
    draft_id: int,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(require_role(*ADD_ROLES)),
) -> HTMLResponse:
    """Show the form that adds a draft's case to the regression suite with a note of the failure."""
    d, hidden = _draft_checks(session, spec, principal, draft_id)
    # Pages that link here may prefill the note and say where the failure was found.
    note, source = request.query_params.get("note") or None, request.query_params.get("source", "run")
    return render_view(request, "regression/from_draft.html", views.from_draft_view(d=d, hidden=hidden, note=note, source=source))


@router.post("/regression/cases/from-draft/{draft_id}", name="regression_from_draft")
def from_draft_submit(
    request: Request,
    draft_id: int,
    session: SessionDep,
    spec: SpecDep,
    note: str = Form(""),
    source: str = Form("run"),
    principal: Principal = Depends(require_role(*ADD_ROLES)),
) -> Response:
    """Append a draft's case to the regression suite with a note (never edited or removed afterwards)."""
    d, hidden = _draft_checks(session, spec, principal, draft_id)
    source = views.page_source(source)
    try:
        case = service.add_case_from_draft(
            session=session, draft_id=draft_id, created_by=principal.user_id, note=note, source=source
        )
    except service.RegressionError as exc:
        view = views.from_draft_view(d=d, hidden=hidden, note=note, source=source, error=str(exc))
        return render_view(request, "regression/from_draft.html", view, status_code=409 if "already" in str(exc) else 422)
    target = f"/regression?added={quote(case.case_id)}#case-{quote(case.case_id)}"
    if is_htmx(request):
        return Response(status_code=204, headers={"HX-Trigger": "regression-case-added", "HX-Redirect": target})
    return RedirectResponse(target, status_code=303)


@router.get("/runs/compare", response_class=HTMLResponse, name="runs_compare")
def compare_page(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    filters: Annotated[CaseFilters, Query()],
    principal: Principal = Depends(require_role(*READ_ROLES)),
) -> Response:
    """Compare two runs case by case: outcomes, per-check and rubric deltas with a noise test, CSV export."""
    a_ref, b_ref = filters.a.strip(), filters.b.strip()
    error = None
    cmp = plan_drop = None
    if a_ref and b_ref:
        try:
            ra, rb = resolve_run(session=session, ref=a_ref), resolve_run(session=session, ref=b_ref)
            cmp = comparison.compare_runs(session=session, spec=spec, a_id=stored_id(ra.id), b_id=stored_id(rb.id))
            plan_drop = drop.compare_drop(session=session, spec=spec, a_run=ra, a=cmp.a, b=cmp.b)
        except (RunNotFound, service.NotComparable) as exc:
            error = str(exc)
    rows = cmp.filtered(**filters.case_filters()) if cmp else []
    if cmp and filters.format == "csv":
        return csv_download(cmp.to_csv(rows), f"compare-{cmp.a.run_name}-{cmp.b.run_name}.csv")
    view = views.CompareView(
        a_ref=a_ref, b_ref=b_ref, runs=service.runs_for_picker(session=session), cmp=cmp, rows=rows, filters=filters, error=error,
        drop=plan_drop,
    )
    return render_view(
        request, "regression/compare.html", view, block="cases", status_code=422 if error else 200, headers={"Vary": "HX-Request"}
    )


@router.get("/runs/compare/cases/{case_id}", response_class=HTMLResponse, name="runs_compare_case")
def compare_case_page(
    request: Request,
    case_id: str,
    session: SessionDep,
    spec: SpecDep,
    a: str,
    b: str,
    principal: Principal = Depends(require_role(*READ_ROLES)),
) -> HTMLResponse:
    """Show one case's drafts in both runs side by side, with a word diff, checks, grades, judge, latency, cost."""
    ra, rb = run_or_404(session, a), run_or_404(session, b)
    try:
        pair = case_pair.case_pair(
            session=session,
            spec=spec,
            a_id=stored_id(ra.id),
            b_id=stored_id(rb.id),
            case_id=case_id,
            judge=judge_scores(session=session, spec=spec, principal=principal),
        )
    except service.NotComparable as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    except LookupError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return render_view(request, "regression/compare_case.html", views.CompareCaseView(pair=pair, ra=ra, rb=rb))


@router.post("/runs/{run}/baseline", name="run_baseline")
def baseline_submit(
    session: SessionDep,
    action: str = Form("mark"),
    *, principal: Principal = Depends(require_role(*BASELINE_ROLES)), run: RunDep,
) -> RedirectResponse:
    """Mark (or unmark) a run as the baseline of its dataset, then go back to its checks."""
    if action == "unmark":
        service.unmark_baseline(session=session, run_id=stored_id(run.id))
    else:
        service.mark_baseline(session=session, run_id=stored_id(run.id))
    return RedirectResponse(f"/runs/{run.id}/checks", status_code=303)


@router.get("/regression/alerts", response_class=HTMLResponse, name="regression_alerts")
def alerts_page(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*READ_ROLES))
) -> HTMLResponse:
    """List regression alerts, open ones first, with an Acknowledge button for the PM and the lead, and the sampled pass-rate readings."""
    readings = hooks.pass_rate_readings(session=session, spec=spec)
    view = views.alerts_view(session=session, spec=spec, can_ack=principal.has_role(*ACK_ROLES), readings=readings)
    return render_view(request, "regression/alerts.html", view, block="results")


@router.post("/regression/alerts/{alert_id}/acknowledge", name="regression_alert_ack")
def alert_ack(
    request: Request, alert_id: int, session: SessionDep, principal: Principal = Depends(require_role(*ACK_ROLES))
) -> Response:
    """Acknowledge a regression alert."""
    try:
        alerts.acknowledge_alert(session=session, alert_id=alert_id, user_id=principal.user_id)
    except LookupError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    if is_htmx(request):
        return Response(status_code=204, headers={"HX-Trigger": "alerts-updated"})
    return RedirectResponse("/regression/alerts", status_code=303)
