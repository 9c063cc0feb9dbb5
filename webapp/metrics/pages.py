"""Pages: the metrics dashboard, the day drill-down, CSV export, and the hallucination queue."""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from webapp.app import flows
from webapp.auth.service import Principal
from webapp.core.csv_export import csv_response, csv_text
from webapp.core.db import SessionDep
from webapp.core.spec import METRIC_NAMES, EvalSpec
from webapp.metrics import (
    aggregates,
    alert_states,
    charts,
    drilldown,
    hallucinations,
    units,
    versions,
    watermark,
    weekly,
)
from webapp.metrics import calibration as metrics_calibration
from webapp.metrics import daily as metrics_daily
from webapp.metrics import reports as metrics_reports
from webapp.metrics import streaks as metrics_streaks
from webapp.metrics import targets as metrics_targets
from webapp.metrics.background import REBUILD_INTERVAL_S
from webapp.web.deps import SpecDep, require_role
from webapp.web.templating import is_htmx, render

router = APIRouter()

VIEWERS = ("support_lead", "pm", "lead", "admin")
DEFAULT_DAYS = 42


def _parse_day(value: str | None, name: str) -> dt.date | None:
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError as exc:
        raise HTTPException(422, detail=f"{name}: not a date (YYYY-MM-DD): {value!r}") from exc


def _range(session: Any, spec: EvalSpec, start: str | None, end: str | None) -> tuple[dt.date, dt.date]:
    """Return the requested range; by default the last six weeks up to the last day with events."""
    try:
        return metrics_daily.default_range(
            session=session, spec=spec, start=_parse_day(start, "start"), end=_parse_day(end, "end"), days=DEFAULT_DAYS
        )
    except metrics_daily.MetricsError as exc:
        raise HTTPException(422, detail=str(exc)) from exc


def _filters(intent: str | None, plan: str | None, agent_id: str | None) -> dict[str, str | None]:
    return {"intent": intent or None, "plan": plan or None, "agent_id": agent_id or None}


def _query(start: dt.date, end: dt.date, filters: dict[str, str | None]) -> str:
    from urllib.parse import urlencode

    params = {"start": start.isoformat(), "end": end.isoformat(), **{k: v for k, v in filters.items() if v}}
    return urlencode(params)


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


QUICK_DAYS = (7, 14, 30)


def quick_ranges(*, session: Any, spec: EvalSpec) -> list[dict[str, Any]]:
    """Return the quick ranges: the last 7 / 14 / 30 days up to the last day with events, and the pilot window."""
    bounds = aggregates.event_days(session)
    last = bounds[1] if bounds else metrics_daily.today_in(spec)
    out: list[dict[str, Any]] = [
        {"key": f"{n}d", "label": f"Last {n} days", "start": last - dt.timedelta(days=n - 1), "end": last} for n in QUICK_DAYS
    ]
    pilot = spec.online_metrics.pilot
    out.append({"key": "pilot", "label": "Pilot window", "start": pilot.start, "end": pilot.end})
    return out


def resolve_range(
    *, session: Any, spec: EvalSpec, start: str | None, end: str | None, quick: str | None
) -> tuple[dt.date, dt.date]:
    """Return the range asked for (a quick range wins over the dates); raise MetricsError naming the field."""
    if quick:
        for q in quick_ranges(session=session, spec=spec):
            if q["key"] == quick:
                return q["start"], q["end"]
        raise metrics_daily.MetricsError(f"range: unknown quick range {quick!r}")
    parsed: dict[str, dt.date | None] = {}
    for name, value in (("start", start), ("end", end)):
        try:
            parsed[name] = dt.date.fromisoformat(value) if value else None
        except ValueError:
            label = "From" if name == "start" else "To"
            raise metrics_daily.MetricsError(f"{label}: {value!r} is not a date (YYYY-MM-DD)") from None
    try:
        s, e = metrics_daily.default_range(
            session=session, spec=spec, start=parsed["start"], end=parsed["end"], days=DEFAULT_DAYS
        )
    except metrics_daily.MetricsError:
        s, e = parsed["start"], parsed["end"] or metrics_daily.default_range(
            session=session, spec=spec, start=None, end=None, days=DEFAULT_DAYS
        )[1]
        raise metrics_daily.MetricsError(f"To ({e}) is before From ({s}): the range is reversed") from None
    if (e - s).days > 3660:
        raise metrics_daily.MetricsError("From / To: a range of at most ten years, please")
    return s, e


def dashboard_context(
    *, session: Any, spec: EvalSpec, start: dt.date, end: dt.date, filters: dict[str, str | None]
) -> dict[str, Any]:
    """Gather everything the metrics page shows for a range and segment."""
    bounds = aggregates.event_days(session)
    # alerts need the days before the range (windows, state), so they are evaluated from the first event
    history_start = min(bounds[0], start) if bounds else start
    all_days = metrics_daily.daily_metrics(session=session, spec=spec, start=history_start, end=end, **filters)
    days = [d for d in all_days if d.day >= start]
    alert_list = alert_states.evaluate_alerts(all_days, spec)
    by_metric = {a.metric: a for a in alert_list}
    unfiltered = all_days if not any(filters.values()) else metrics_daily.daily_metrics(
        session=session, spec=spec, start=history_start, end=end
    )
    changes = [c for c in versions.version_changes(unfiltered) if start <= c.day <= end]
    pilot = (spec.online_metrics.pilot.start, spec.online_metrics.pilot.end)
    low = spec.metrics.low_volume_events
    built = {
        m: charts.metric_figure(m, days, spec, by_metric.get(m), changes, pilot=pilot, low_volume=low) for m in METRIC_NAMES
    }
    cal = metrics_calibration.calibration_from_days(days)
    cal_figure = charts.calibration_figure(cal)
    # the range's streak counts the segment shown; the production gate's counts the pilot window, all traffic
    streaks = metrics_streaks.streaks_from_days(days, spec, window="range", segment=filters)
    gate_streaks = metrics_streaks.pilot_streaks(session=session, spec=spec)
    # human-graded quality of the production weeks overlapping the range (all traffic: the sample is the week's)
    quality_weeks, quality_fig = flows.production_quality(session=session, spec=spec, start=start, end=end)
    return {
        "start": start,
        "end": end,
        # the days of the range whose figures lag their events (their own events, whatever the segment)
        "updating": [d for d in days if d.updating],
        "rebuild_interval": REBUILD_INTERVAL_S,
        "pruned_before": watermark.pruned_before(session),  # the retention footnote
        "filters": filters,
        "query": _query(start, end, filters),
        "days": days,
        "metrics": METRIC_NAMES,
        "labels": metrics_targets.METRIC_LABELS,
        "figures": {m: charts.to_json(fig) for m, fig in built.items()},
        "alerts": alert_list,
        "alert_by_metric": by_metric,
        # one count with home's card: the online metrics' alerts and the weekly human-graded quality alert
        "firing": flows.count_firing(metric_alerts=alert_list, quality_weeks=quality_weeks),
        "changes": changes,
        "calibration": cal,
        "calibration_figure": charts.to_json(cal_figure),
        "streaks": streaks,
        "gate_streaks": gate_streaks,
        "gate_differs": (gate_streaks.longest, gate_streaks.current) != (streaks.longest, streaks.current),
        "streak_needed": spec.gates.production.consecutive_business_days,
        "low_volume": low,
        "low_days": sum(1 for d in days if 0 < d.events < low),
        "pilot_in_range": pilot[0] <= end and pilot[1] >= start,
        "quality_weeks": quality_weeks,
        "quality_figure": charts.to_json(quality_fig),
        "quality_targets": spec.team_targets.weekly_human_quality,  # the team's targets (ppi.production.quality_targets)
        "quality_firing": [w for w in quality_weeks if w.below_target],
        # the plan's "0 per week" target, over the ISO weeks of the range (the daily alert stays above)
        "hallucination_weeks": weekly.weekly_hallucinations(
            session=session, spec=spec, start=start, end=end,
            intent=filters["intent"], plan=filters["plan"], agent_id=filters["agent_id"],
        ),
    }


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
    form: dict[str, Any] = {
        "filters": filters, "segments": metrics_daily.segment_values(session=session),
        "quick": quick_ranges(session=session, spec=spec), "oob_dates": bool(range), "range_error": None,
    }
    try:
        s, e = resolve_range(session=session, spec=spec, start=start, end=end, quick=range)
    except metrics_daily.MetricsError as exc:
        # the page again, with the message beside the inputs and what was typed kept; htmx swaps
        # only 2xx answers, so its fragment comes back 200 (the full page says 422)
        ctx = {**form, "range_error": str(exc), "start_text": start or "", "end_text": end or "", "oob_dates": False}
        return render(request, "metrics/index.html", ctx, block="results", status_code=200 if is_htmx(request) else 422)
    if range and not is_htmx(request):
        return RedirectResponse(f"/metrics?{_query(s, e, filters)}", status_code=303)  # a bookmarkable URL
    ctx = {**form, **dashboard_context(session=session, spec=spec, start=s, end=e, filters=filters)}
    ctx.update(start_text=s.isoformat(), end_text=e.isoformat())
    headers: dict[str, str] | None = None
    if is_htmx(request) and shown_already(request, ctx["query"]):
        headers = {"HX-Push-Url": "false"}  # Apply after a dropdown applied the same view: no second entry
    elif range:
        headers = {"HX-Push-Url": f"/metrics?{ctx['query']}"}
    return render(request, "metrics/index.html", ctx, block="results", headers=headers)


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
    # the same unit and decimals as the page (webapp/metrics/units.py); the unit is in the column name
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
    filters = _filters(intent, plan, agent_id)
    if show and show not in drilldown.DAY_KINDS:
        raise HTTPException(422, detail=f"show: must be one of {', '.join(drilldown.DAY_KINDS)} (or empty), not {show!r}")
    per_page = 100
    page = max(page, 1)
    events, total = drilldown.day_events(
        session=session, day=d, limit=per_page, offset=(page - 1) * per_page, kind=show or None, **filters
    )
    metrics = metrics_daily.daily_metrics(session=session, spec=spec, start=d, end=d, **filters)[0]
    missed = [m for m in METRIC_NAMES if metrics.target_met.get(m) is False]
    query = _query(d, d, filters)
    return render(
        request,
        "metrics/day.html",
        {
            "day": d, "events": events, "total": total, "page": page, "pages": max(1, -(-total // per_page)),
            "metrics": metrics, "names": METRIC_NAMES, "labels": metrics_targets.METRIC_LABELS, "filters": filters,
            "query": query, "limit": spec.online_metrics.minor_edit_limit, "show": show or "",
            "kinds": drilldown.DAY_KINDS, "kind_counts": drilldown.day_kind_counts(session=session, day=d, **filters),
            "missed": missed, "missed_show": _MISSED_SHOWS,
            "targets": {m: metrics_targets.describe_target(m, spec) for m in METRIC_NAMES},
            "page_query": query + (f"&show={show}" if show else ""),
        },
    )


# --- hallucination reports ------------------------------------------------------------------------


def _queue(
    request: Request, session: SessionDep, status: str, *, can_decide: bool, flash: str | None = None,
    error: str | None = None, headers: dict[str, str] | None = None, status_code: int = 200,
) -> HTMLResponse:
    if status not in ("pending", "confirmed", "dismissed", "all"):
        status = "pending"
    reports = metrics_reports.list_reports(session=session, status=None if status == "all" else status)
    counts = {s: len(metrics_reports.list_reports(session=session, status=s)) for s in ("pending", "confirmed", "dismissed")}
    return render(
        request,
        "metrics/hallucinations.html",
        {
            "views": hallucinations.report_views(session=session, reports=reports),
            "status": status,
            "counts": counts,
            "can_decide": can_decide,
            "flash": flash,
            "error": error,
        },
        block="queue",
        headers=headers,
        status_code=status_code,
    )


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
    flows.after_metrics_changed(session=session, spec=spec)  # a confirmed report -> outbox, same transaction
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
    flows.after_metrics_changed(session=session, spec=spec)  # an undone confirmation resolves its alert
    return _decided(request, session, status, f"Report {report_id}: decision undone, now {report.status}.")


def _decided(request: Request, session: SessionDep, status: str, flash: str) -> Response:
    if not is_htmx(request):
        return RedirectResponse(f"/metrics/hallucinations?status={status}", status_code=303)
    return _queue(request, session, status, can_decide=True, flash=flash, headers={"HX-Trigger": "hallucination-decided"})
