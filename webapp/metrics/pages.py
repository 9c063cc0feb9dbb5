"""Pages: the metrics dashboard, the day drill-down, CSV export, and the hallucination queue."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core import units
from webapp.core.csv_export import csv_response, csv_text
from webapp.core.db import SessionDep
from webapp.core.facts import record_fact
from webapp.core.spec import METRIC_NAMES, EvalSpec
from webapp.metrics import daily as metrics_daily
from webapp.metrics import drilldown, hallucinations
from webapp.metrics import reports as metrics_reports
from webapp.metrics import targets as metrics_targets
from webapp.metrics.dashboard_pages import (
    DEFAULT_DAYS,
    Filters,
    MetricsView,
    dashboard_view,
    metrics_form,
    range_query,
    resolve_range,
)
from webapp.metrics.dashboard_pages import segment_filters as _filters
from webapp.metrics.models import Event
from webapp.web.deps import SpecDep, require_role
from webapp.web.templating import is_htmx, render, render_view

router = APIRouter()

VIEWERS = ("support_lead", "pm", "lead", "ml_lead", "admin")  # the ML lead reads the pilot metrics the production gate reads (issue 41)


def _parse_day(value: str | None, name: str) -> dt.date | None:
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError as exc:
        raise HTTPException(422, detail=f"{name}: not a date (YYYY-MM-DD): {value!r}") from exc


def _range(session: Session, spec: EvalSpec, start: str | None, end: str | None) -> tuple[dt.date, dt.date]:
    """Return the requested range; by default the last six weeks up to the last day with events."""
    try:
        return metrics_daily.default_range(
            session=session, spec=spec, start=_parse_day(start, "start"), end=_parse_day(end, "end"), days=DEFAULT_DAYS
        )
    except metrics_daily.MetricsError as exc:
        raise HTTPException(422, detail=str(exc)) from exc


def _params(query: str) -> list[tuple[str, str]]:
    # blank values (a dropdown on "All") are the same view as no value
    return sorted((k, v) for k, v in parse_qsl(query) if v)


def shown_already(request: Request, canonical: str) -> bool:
    """Tell whether the browser already shows this view, so that htmx must not push another history entry.

    The filter form applies on change *and* on Apply: a dropdown change, then Apply, sends the same
    query twice. htmx says which page it is on (`HX-Current-URL`); when that page's parameters
    equal this request's (or the range it resolves to), the answer carries `HX-Push-Url: false`.
    """
    current = request.headers.get("hx-current-url")
    if not current:
        return False
    shown = urlsplit(current)
    return shown.path == request.url.path and _params(shown.query) in (_params(request.url.query), _params(canonical))


@router.get("/metrics", response_class=HTMLResponse)
def metrics_page(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    start: str | None = None,
    end: str | None = None,
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
    range: str | None = None,  # noqa: A002 - the quick-range button's name in the form
    principal: Principal = Depends(require_role(*VIEWERS)),
) -> Response:
    """Show daily metrics against targets and alerts, with charts, a table, alerts and calibration."""
    filters = _filters(intent, plan, agent_id)
    try:
        s, e = resolve_range(session=session, spec=spec, start=start, end=end, quick=range)
    except metrics_daily.MetricsError as exc:
        # the page again, with the message beside the inputs and what was typed kept; htmx swaps
        # only 2xx answers, so its fragment comes back 200 (the full page says 422)
        form = metrics_form(session=session, spec=spec, filters=filters, start_text=start or "", end_text=end or "",
                            oob_dates=False, range_error=str(exc))
        return render(request, "metrics/index.html", MetricsView(form, None).names(), block="results",
                      status_code=200 if is_htmx(request) else 422)
    if range and not is_htmx(request):
        return RedirectResponse(f"/metrics?{range_query(s, e, filters)}", status_code=303)  # a bookmarkable URL
    form = metrics_form(session=session, spec=spec, filters=filters, start_text=s.isoformat(), end_text=e.isoformat(),
                        oob_dates=bool(range))
    view = MetricsView(form, dashboard_view(session=session, spec=spec, start=s, end=e, filters=filters))
    headers: dict[str, str] | None = None
    query = range_query(s, e, filters)
    if is_htmx(request) and shown_already(request, query):
        headers = {"HX-Push-Url": "false"}  # Apply after a dropdown applied the same view: no second entry
    elif range:
        headers = {"HX-Push-Url": f"/metrics?{query}"}
    return render(request, "metrics/index.html", view.names(), block="results", headers=headers)


@router.get("/metrics/daily.csv")
def metrics_csv(
    session: SessionDep,
    spec: SpecDep,
    start: str | None = None,
    end: str | None = None,
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
    principal: Principal = Depends(require_role(*VIEWERS)),
) -> Response:
    """Download the daily numbers of the range and segment as CSV."""
    s, e = _range(session, spec, start, end)
    days = metrics_daily.daily_metrics(session=session, spec=spec, start=s, end=e, **_filters(intent, plan, agent_id))
    # the same unit and decimals as the page (webapp/core/units.py); the unit is in the column name
    header = ["day", "events", "drafts_shown", *[units.csv_column(m) for m in METRIC_NAMES],
              *[f"{m}_target_met" for m in METRIC_NAMES], "all_targets_met"]
    rows = (
        [d.day.isoformat(), d.events, d.drafts_shown, *[units.number(m, d.value(m)) for m in METRIC_NAMES],
         *[d.target_met.get(m) for m in METRIC_NAMES], d.all_targets_met]
        for d in days
    )
    return csv_response(csv_text(header, rows), f"metrics-{s}-{e}.csv")


# which drill-down filter shows the events behind a missed target
_MISSED_SHOWS = {"reject_rate": "reject", "edit_distance": "edit", "escalation_rate": "escalation"}


@router.get("/metrics/day/{day}", response_class=HTMLResponse)
def day_page(
    request: Request,
    day: str,
    session: SessionDep,
    spec: SpecDep,
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
    show: str | None = None,
    page: int = 1,
    principal: Principal = Depends(require_role(*VIEWERS)),
) -> HTMLResponse:
    """Show one day's events draft by draft (all, or only rejects, edits or escalations), flagging missed targets."""
    d = _parse_day(day, "day")
    assert d is not None
    if show and show not in drilldown.DAY_KINDS:
        raise HTTPException(422, detail=f"show: must be one of {', '.join(drilldown.DAY_KINDS)} (or empty), not {show!r}")
    view = day_view(session=session, spec=spec, day=d, filters=_filters(intent, plan, agent_id), show=show or "", page=max(page, 1))
    return render_view(request, "metrics/day.html", view)


@dataclass(frozen=True)
class DayView:
    """One day's drill-down: a page of its events, its metrics, and the targets it missed."""

    day: dt.date
    events: list[Event]
    total: int
    page: int
    pages: int
    metrics: metrics_daily.DayMetrics
    names: tuple[str, ...]
    labels: dict[str, str]
    filters: Filters
    query: str
    limit: float  # the minor-edit limit
    show: str  # the kind of events shown ("" for all)
    kinds: dict[str, str]  # kind -> its label
    kind_counts: dict[str, int]
    missed: list[str]
    missed_show: dict[str, str]
    targets: dict[str, str]
    page_query: str
    pruned: drilldown.PrunedDay | None  # retention removed the day's events; its figures are the kept ones



DAY_PAGE_SIZE = 100


def day_view(*, session: Session, spec: EvalSpec, day: dt.date, filters: Filters, show: str, page: int) -> DayView:
    """Return a day's drill-down page: its events (one page), kind counts, metrics and missed targets."""
    events, total = drilldown.day_events(
        session=session, day=day, limit=DAY_PAGE_SIZE, offset=(page - 1) * DAY_PAGE_SIZE, kind=show or None, **filters
    )
    metrics = metrics_daily.daily_metrics(session=session, spec=spec, start=day, end=day, **filters)[0]
    query = range_query(day, day, filters)
    return DayView(
        day=day, events=events, total=total, page=page, pages=max(1, -(-total // DAY_PAGE_SIZE)),
        metrics=metrics, names=METRIC_NAMES, labels=metrics_targets.METRIC_LABELS, filters=filters,
        query=query, limit=spec.online_metrics.minor_edit_limit, show=show,
        kinds=drilldown.DAY_KINDS, kind_counts=drilldown.day_kind_counts(session=session, day=day, **filters),
        missed=[m for m in METRIC_NAMES if metrics.target_met.get(m) is False], missed_show=_MISSED_SHOWS,
        targets={m: metrics_targets.describe_target(m, spec) for m in METRIC_NAMES},
        page_query=query + (f"&show={show}" if show else ""),
        pruned=drilldown.pruned_day(session=session, day=day),
    )


# --- hallucination reports ------------------------------------------------------------------------


@dataclass(frozen=True)
class HallucinationQueueView:
    """The hallucination queue: the reports of one status with their evidence, and the counts per status."""

    views: list[hallucinations.ReportView]
    status: str  # pending | confirmed | dismissed | all
    counts: dict[str, int]
    can_decide: bool  # the lead confirms and dismisses; the support lead reads
    flash: str | None = None
    error: str | None = None



def hallucination_queue(
    *, session: Session, status: str, can_decide: bool, flash: str | None = None, error: str | None = None
) -> HallucinationQueueView:
    """Return the queue of one status (an unknown status shows the pending reports)."""
    if status not in ("pending", "confirmed", "dismissed", "all"):
        status = "pending"
    reports = metrics_reports.list_reports(session=session, status=None if status == "all" else status)
    counts = {s: len(metrics_reports.list_reports(session=session, status=s)) for s in ("pending", "confirmed", "dismissed")}
    return HallucinationQueueView(
        views=hallucinations.report_views(session=session, reports=reports), status=status, counts=counts,
        can_decide=can_decide, flash=flash, error=error,
    )


def _queue(
    request: Request, session: SessionDep, status: str, *, can_decide: bool, flash: str | None = None,
    error: str | None = None, headers: dict[str, str] | None = None, status_code: int = 200,
) -> HTMLResponse:
    view = hallucination_queue(session=session, status=status, can_decide=can_decide, flash=flash, error=error)
    return render_view(request, "metrics/hallucinations.html", view, block="queue", headers=headers, status_code=status_code)


@router.get("/metrics/hallucinations", response_class=HTMLResponse)
def hallucinations_page(
    request: Request,
    session: SessionDep,
    status: str = "pending",
    principal: Principal = Depends(require_role("lead", "support_lead")),
) -> HTMLResponse:
    """List agent-flagged hallucination reports with their evidence; the lead confirms, dismisses or undoes."""
    return _queue(request, session, status, can_decide=principal.has_role("lead"))


@router.post("/metrics/hallucinations/{report_id}/decide", response_class=HTMLResponse)
def decide_hallucination(
    request: Request,
    report_id: int,
    session: SessionDep,
    spec: SpecDep,
    decision: str = Form(...),
    note: str = Form(""),
    status: str = Form("pending"),
    principal: Principal = Depends(require_role("lead")),
) -> Response:
    """Confirm or dismiss one hallucination report, with a note saying why."""
    try:
        metrics_reports.decide_report(session=session, report_id=report_id, decision=decision, decided_by=principal.user_id, note=note)
    except metrics_daily.MetricsError as exc:
        if "no hallucination" in str(exc):
            raise HTTPException(404, detail=str(exc)) from exc
        session.rollback()
        # htmx swaps only 2xx answers: the queue comes back with the message beside it.
        return _queue(request, session, status, can_decide=True, error=str(exc), status_code=200 if is_htmx(request) else 422)
    record_fact(session, "hallucination_decided", report_id=report_id)  # alerts react: a confirmed report -> outbox
    return _decided(request, session, status, f"Report {report_id} {decision}.")


@router.post("/metrics/hallucinations/{report_id}/undo", response_class=HTMLResponse)
def undo_hallucination_decision(
    request: Request,
    report_id: int,
    session: SessionDep,
    spec: SpecDep,
    status: str = Form("pending"),
    principal: Principal = Depends(require_role("lead")),
) -> Response:
    """Undo the newest decision on a report (a new decision row; the history is kept)."""
    try:
        report = hallucinations.undo_last_decision(session=session, report_id=report_id, decided_by=principal.user_id)
    except metrics_daily.MetricsError as exc:
        raise HTTPException(404 if "no hallucination" in str(exc) else 409, detail=str(exc)) from exc
    record_fact(session, "hallucination_decided", report_id=report_id)  # an undone confirmation resolves its alert
    return _decided(request, session, status, f"Report {report_id}: decision undone, now {report.status}.")


def _decided(request: Request, session: SessionDep, status: str, flash: str) -> Response:
    if not is_htmx(request):
        return RedirectResponse(f"/metrics/hallucinations?status={status}", status_code=303)
    return _queue(request, session, status, can_decide=True, flash=flash, headers={"HX-Trigger": "hallucination-decided"})
