"""Pages: the regression suite and its results per run, adding a case from a draft, the suite
export, run comparison, baselines, and regression alerts."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from webapp.app import flows
from webapp.auth.service import Principal
from webapp.checks.draft_checks import draft_results
from webapp.checks.rules import CHECK_LABELS
from webapp.core.db import SessionDep, stored_id
from webapp.core.spec import EvalSpec
from webapp.regression import alerts, case_pair, comparison, service
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
from webapp.web.templating import is_htmx, render

router = APIRouter()


@router.get("/regression", response_class=HTMLResponse, name="regression_suite")
def suite_page(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*READ_ROLES, "labeler"))
) -> HTMLResponse:
    """Show the regression suite, its progress towards the target, and its results for a run (newest by default)."""
    ref = request.query_params.get("run", "").strip()
    run = None
    if ref:
        run = run_or_404(session, ref)
    else:
        latest = service.latest_run_id(session=session)
        run = run_or_404(session, str(latest)) if latest is not None else None
    report = service.suite_report(session=session, run_id=stored_id(run.id)) if run is not None else None
    # Blind grading: a case's pass or fail in the run is its drafts' check results (and final grade).
    signals = flows.signals_view(session=session, spec=spec, principal=principal, run_id=stored_id(run.id)) if run else None
    hidden = {
        r.case_id
        for r in (report.results if report else [])
        if signals and r.status in ("pass", "fail") and any(signals.hides(d) for d in r.draft_ids)
    }
    cases = service.list_cases(session=session)
    # After "Add to suite" (no JS): say that the next run must include the case just added.
    added = request.query_params.get("added", "")
    flash = None
    if added and any(c.case_id == added for c in cases):
        flash = f"Added {added} to the regression suite. " + service.inclusion_notice(session=session, case_id=added)
    return render(
        request,
        "regression/index.html",
        {
            "cases": cases,
            "report": report,
            "results": {r.case.case_id: r for r in report.results} if report else {},
            "hidden": hidden,
            "counts": service.suite_counts(report=report, hidden=hidden) if report else {},
            "run": run,
            "runs": service.runs_for_picker(session=session),
            "target": spec.regression.target_cases,
            "months": spec.regression.target_months,
            "flash": flash,
            "flash_kind": "warn",
        },
        block="results",
    )


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
    report = service.suite_report(session=session, run_id=stored_id(run.id))
    return render(request, "regression/run.html", {"run": run, "report": report, "target": spec.regression.target_cases})


def _draft_context(session: SessionDep, spec: EvalSpec, principal: Principal, draft_id: int) -> dict[str, Any]:
    """Return the draft's check results for the form, and whether blind grading hides them from the caller."""
    try:
        d = draft_results(session=session, draft_id=draft_id)
    except DraftNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    hidden = flows.signals_view(session=session, spec=spec, principal=principal, draft_ids=[draft_id]).hides(draft_id)
    return {"d": d, "hidden": hidden}


@router.get("/regression/cases/from-draft/{draft_id}", response_class=HTMLResponse, name="regression_from_draft_form")
def from_draft_form(
    request: Request,
    draft_id: int,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(require_role(*ADD_ROLES)),
) -> HTMLResponse:
    """Show the form that adds a draft's case to the regression suite with a note of the failure."""
    ctx = _draft_context(session, spec, principal, draft_id)
    failures = [] if ctx["hidden"] else [r for r in ctx["d"].results if r.failed]
    # Pages that link here may prefill the note and say where the failure was found.
    note = request.query_params.get("note") or "; ".join(f"{r.key}: {r.reason}" for r in failures)
    source = request.query_params.get("source", "run")
    if source not in ("run", "grading", "review"):
        source = "run"
    return render(request, "regression/from_draft.html", {**ctx, "note": note, "source": source, "error": None})


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
    ctx = _draft_context(session, spec, principal, draft_id)
    if source not in ("run", "grading", "review"):
        source = "run"
    try:
        case = service.add_case_from_draft(
            session=session, draft_id=draft_id, created_by=principal.user_id, note=note, source=source
        )
    except service.RegressionError as exc:
        return render(
            request,
            "regression/from_draft.html",
            {**ctx, "note": note, "source": source, "error": str(exc)},
            status_code=409 if "already" in str(exc) else 422,
        )
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
    cmp = None
    if a_ref and b_ref:
        try:
            ra, rb = resolve_run(session=session, ref=a_ref), resolve_run(session=session, ref=b_ref)
            cmp = comparison.compare_runs(session=session, spec=spec, a_id=stored_id(ra.id), b_id=stored_id(rb.id))
        except (RunNotFound, service.NotComparable) as exc:
            error = str(exc)
    rows = cmp.filtered(**filters.case_filters()) if cmp else []
    if cmp and filters.format == "csv":
        return csv_download(cmp.to_csv(rows), f"compare-{cmp.a.run_name}-{cmp.b.run_name}.csv")
    return render(
        request,
        "regression/compare.html",
        {
            "a_ref": a_ref,
            "b_ref": b_ref,
            "runs": service.runs_for_picker(session=session),
            "cmp": cmp,
            "rows": rows,
            "filters": filters,
            "outcomes": comparison.OUTCOME_LABELS,
            "check_labels": CHECK_LABELS,
            "error": error,
        },
        block="cases",
        status_code=422 if error else 200,
        headers={"Vary": "HX-Request"},
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
            judge=flows.judge_scores(session=session, spec=spec, principal=principal),
        )
    except service.NotComparable as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    except LookupError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return render(
        request, "regression/compare_case.html", {"pair": pair, "ra": ra, "rb": rb, "check_labels": CHECK_LABELS}
    )


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
    rows = alerts.list_alerts(session=session)
    rows.sort(key=lambda ar: ar[0].acknowledged_at is not None)
    return render(
        request,
        "regression/alerts.html",
        {
            "rows": rows,
            "can_ack": principal.has_role(*ACK_ROLES),
            "drop": spec.regression.alert_pass_rate_drop,
            "kind_label": alerts.alert_kind_label,
            "readings": flows.pass_rate_readings(session=session, spec=spec),
            "verdict_labels": alerts.DROP_VERDICT_LABELS,
        },
        block="results",
    )


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
