"""The metrics page's view: the range form (quick ranges, segments, the range error) and the dashboard
of a range and segment (charts, alerts, streaks, calibration, weekly figures), each part from a named query.

`webapp/metrics/pages.py` answers the requests; this module builds what they render. It is one of the
domain's pages (it asks ppi for the weekly human-graded quality through webapp/metrics/hooks.py, since
metrics may not import ppi).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from sqlmodel import Session

from webapp.core.spec import METRIC_NAMES, EvalSpec
from webapp.metrics import aggregates, alert_states, charts, hooks, versions, watermark, weekly
from webapp.metrics import calibration as metrics_calibration
from webapp.metrics import daily as metrics_daily
from webapp.metrics import firing as metrics_firing
from webapp.metrics import streaks as metrics_streaks
from webapp.metrics import targets as metrics_targets
from webapp.metrics.background import REBUILD_INTERVAL_S
from webapp.web.templating import view_names

DEFAULT_DAYS = 42
QUICK_DAYS = (7, 14, 30)

Filters = dict[str, str | None]  # intent, plan, agent_id (None: all)


def segment_filters(intent: str | None, plan: str | None, agent_id: str | None) -> Filters:
    """Return the segment asked for; a blank value (a dropdown on "All") is no filter."""
    return {"intent": intent or None, "plan": plan or None, "agent_id": agent_id or None}


def range_query(start: dt.date, end: dt.date, filters: Filters) -> str:
    """Return the page's query string for a range and segment (blank filters left out)."""
    return urlencode({"start": start.isoformat(), "end": end.isoformat(), **{k: v for k, v in filters.items() if v}})


@dataclass(frozen=True)
class QuickRange:
    """A quick range button: the last n days up to the last day with events, or the pilot window."""

    key: str  # 7d | 14d | 30d | pilot
    label: str
    start: dt.date
    end: dt.date


def quick_ranges(*, session: Session, spec: EvalSpec) -> list[QuickRange]:
    """Return the quick ranges: the last 7 / 14 / 30 days up to the last day with events, and the pilot window."""
    bounds = aggregates.event_days(session)
    last = bounds[1] if bounds else metrics_daily.today_in(spec)
    out = [QuickRange(f"{n}d", f"Last {n} days", last - dt.timedelta(days=n - 1), last) for n in QUICK_DAYS]
    pilot = spec.online_metrics.pilot
    out.append(QuickRange("pilot", "Pilot window", pilot.start, pilot.end))
    return out


def _typed_day(value: str | None, label: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(value) if value else None
    except ValueError:
        raise metrics_daily.MetricsError(f"{label}: {value!r} is not a date (YYYY-MM-DD)") from None


def resolve_range(
    *, session: Session, spec: EvalSpec, start: str | None, end: str | None, quick: str | None
) -> tuple[dt.date, dt.date]:
    """Return the range asked for (a quick range wins over the dates); raise MetricsError naming the field."""
    if quick:
        for q in quick_ranges(session=session, spec=spec):
            if q.key == quick:
                return q.start, q.end
        raise metrics_daily.MetricsError(f"range: unknown quick range {quick!r}")
    first, last = _typed_day(start, "From"), _typed_day(end, "To")
    try:
        s, e = metrics_daily.default_range(session=session, spec=spec, start=first, end=last, days=DEFAULT_DAYS)
    except metrics_daily.MetricsError:
        s, e = first, last or metrics_daily.default_range(session=session, spec=spec, start=None, end=None, days=DEFAULT_DAYS)[1]
        raise metrics_daily.MetricsError(f"To ({e}) is before From ({s}): the range is reversed") from None
    if (e - s).days > 3660:
        raise metrics_daily.MetricsError("From / To: a range of at most ten years, please")
    return s, e


@dataclass(frozen=True)
class MetricsForm:
    """The range form: the dates as typed, the segment dropdowns, the quick ranges and the range error."""

    filters: Filters
    segments: dict[str, list[str]]
    quick: list[QuickRange]
    start_text: str
    end_text: str
    oob_dates: bool  # an htmx answer to a quick range sets the date inputs too
    range_error: str | None = None


def metrics_form(
    *, session: Session, spec: EvalSpec, filters: Filters, start_text: str, end_text: str, oob_dates: bool,
    range_error: str | None = None,
) -> MetricsForm:
    """Return the range form of the page (the segments' values and the quick ranges from the events)."""
    return MetricsForm(
        filters=filters, segments=metrics_daily.segment_values(session=session), quick=quick_ranges(session=session, spec=spec),
        start_text=start_text, end_text=end_text, oob_dates=oob_dates, range_error=range_error,
    )


@dataclass(frozen=True)
class DashboardView:
    """Everything the metrics page shows for a range and segment."""

    start: dt.date
    end: dt.date
    updating: list[metrics_daily.DayMetrics]  # days whose figures lag their events (their own events, whatever the segment)
    rebuild_interval: float
    pruned_before: dt.date | None  # the retention footnote
    query: str
    days: list[metrics_daily.DayMetrics]
    metrics: tuple[str, ...]
    labels: dict[str, str]
    figures: dict[str, str]  # metric -> its plotly figure as JSON
    alerts: list[alert_states.AlertStatus]
    alert_by_metric: dict[str, alert_states.AlertStatus]
    firing: metrics_firing.FiringAlertsView  # one count with home's card: the metrics' alerts and the weekly quality alert
    changes: list[versions.VersionChange]
    calibration: metrics_calibration.Calibration
    calibration_figure: str
    streaks: metrics_streaks.Streaks  # the range's, for the segment shown
    gate_streaks: metrics_streaks.Streaks  # the production gate's: the pilot window, all traffic
    gate_differs: bool
    streak_needed: int
    low_volume: int
    low_days: int
    pilot_in_range: bool
    # the production weeks overlapping the range (ppi's WeekQuality, which metrics may not import: the
    # template reads their attributes), their chart, the team's targets and the weeks below them
    quality_weeks: Sequence[object]
    quality_figure: str
    quality_targets: dict[str, float]
    quality_firing: Sequence[object]
    hallucination_weeks: list[weekly.WeekCount]  # the plan's "0 per week", over the ISO weeks of the range


@dataclass(frozen=True)
class MetricsView:
    """The metrics page: the form, and the dashboard unless the range is wrong."""

    form: MetricsForm
    dashboard: DashboardView | None

    def names(self) -> dict[str, object]:
        """Return the form's and the dashboard's fields as the template's names (the page is the two views)."""
        return view_names(self.form, *([self.dashboard] if self.dashboard else []))


@dataclass(frozen=True)
class _AlertHistory:
    all_days: list[metrics_daily.DayMetrics]  # from the first event (alert windows look back)
    days: list[metrics_daily.DayMetrics]  # the range's
    alerts: list[alert_states.AlertStatus]
    changes: list[versions.VersionChange]


def _alert_history(*, session: Session, spec: EvalSpec, start: dt.date, end: dt.date, filters: Filters) -> _AlertHistory:
    """Return the segment's days from the first event (alerts need the days before the range), the range's
    days, the alerts over them, and the version changes of the range (all traffic)."""
    bounds = aggregates.event_days(session)
    history_start = min(bounds[0], start) if bounds else start
    all_days = metrics_daily.daily_metrics(session=session, spec=spec, start=history_start, end=end, **filters)
    unfiltered = all_days if not any(filters.values()) else metrics_daily.daily_metrics(
        session=session, spec=spec, start=history_start, end=end
    )
    return _AlertHistory(
        all_days=all_days,
        days=[d for d in all_days if d.day >= start],
        alerts=alert_states.evaluate_alerts(all_days, spec),
        changes=[c for c in versions.version_changes(unfiltered) if start <= c.day <= end],
    )


def _metric_figures(h: _AlertHistory, spec: EvalSpec) -> dict[str, str]:
    """Return each metric's chart (as JSON): values, target and alert threshold, pilot window, firing, versions."""
    pilot = (spec.online_metrics.pilot.start, spec.online_metrics.pilot.end)
    by_metric = {a.metric: a for a in h.alerts}
    return {
        m: charts.to_json(charts.metric_figure(
            m, h.days, spec, by_metric.get(m), h.changes, pilot=pilot, low_volume=spec.metrics.low_volume_events
        ))
        for m in METRIC_NAMES
    }


def dashboard_view(*, session: Session, spec: EvalSpec, start: dt.date, end: dt.date, filters: Filters) -> DashboardView:
    """Gather everything the metrics page shows for a range and segment."""
    h = _alert_history(session=session, spec=spec, start=start, end=end, filters=filters)
    days, low = h.days, spec.metrics.low_volume_events
    cal = metrics_calibration.calibration_from_days(days)
    streaks = metrics_streaks.streaks_from_days(days, spec, window="range", segment=filters)
    gate_streaks = metrics_streaks.pilot_streaks(session=session, spec=spec)
    # human-graded quality of the production weeks overlapping the range (all traffic: the sample is the week's)
    quality_weeks, quality_json = hooks.production_quality(session=session, spec=spec, start=start, end=end)
    pilot = spec.online_metrics.pilot
    return DashboardView(
        start=start, end=end, updating=[d for d in days if d.updating], rebuild_interval=REBUILD_INTERVAL_S,
        pruned_before=watermark.pruned_before(session), query=range_query(start, end, filters), days=days,
        metrics=METRIC_NAMES, labels=metrics_targets.METRIC_LABELS, figures=_metric_figures(h, spec), alerts=h.alerts,
        alert_by_metric={a.metric: a for a in h.alerts},
        firing=metrics_firing.count_firing(metric_alerts=h.alerts, quality_weeks=quality_weeks),
        changes=h.changes, calibration=cal, calibration_figure=charts.to_json(charts.calibration_figure(cal)),
        streaks=streaks, gate_streaks=gate_streaks,
        gate_differs=(gate_streaks.longest, gate_streaks.current) != (streaks.longest, streaks.current),
        streak_needed=spec.gates.production.consecutive_business_days,
        low_volume=low, low_days=sum(1 for d in days if 0 < d.events < low),
        pilot_in_range=pilot.start <= end and pilot.end >= start,
        quality_weeks=quality_weeks, quality_figure=quality_json,
        quality_targets=spec.team_targets.weekly_human_quality,  # the team's targets (ppi.production.quality_targets)
        quality_firing=[w for w in quality_weeks if w.below_target],
        hallucination_weeks=weekly.weekly_hallucinations(
            session=session, spec=spec, start=start, end=end,
            intent=filters["intent"], plan=filters["plan"], agent_id=filters["agent_id"],
        ),
    )
