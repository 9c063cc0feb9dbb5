"""Transitions worth a notification, each as one item: metric alerts, "no data", regression alerts, confirmed hallucinations,
and production weeks whose human-graded quality is below target.

Each item has a stable key; webapp/alerts/outbox.py records the keys in the `alert_notice` ledger
so that a transition is notified once.
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

from sqlalchemy import select
from sqlmodel import Session, col

from webapp.alerts.items import AlertItem
from webapp.alerts.models import AlertNotice
from webapp.core import units as metrics_units
from webapp.core.spec import AlertRule, EvalSpec
from webapp.core.timeutil import as_utc
from webapp.metrics import aggregates as metrics_aggregates
from webapp.metrics import alert_states as metrics_alert_states
from webapp.metrics import daily as metrics_daily
from webapp.metrics import targets as metrics_targets
from webapp.metrics.daily import DayMetrics
from webapp.metrics.models import Event, HallucinationReport
from webapp.ppi import production as ppi_production
from webapp.regression.models import RegressionAlert
from webapp.runs.models import Run

SEGMENT_ALL = "all traffic"


def _fmt(metric: str, value: float | None) -> str:
    # The metric's own unit and decimals (webapp/core/units.py), as on the metrics page:
    # "9.00 s vs threshold 6.00 s", never a bare "9 vs 6".
    if value is None:
        return "n/a"
    return metrics_units.text(metric, value)


def _window_words(rule: AlertRule) -> str:
    if rule.window == "trailing_mean":
        return f"mean of the trailing {rule.days} days"
    return "1 day" if rule.days == 1 else f"{rule.days} consecutive days"


def _metrics_path(start: dt.date, end: dt.date) -> str:
    return "/metrics?" + urlencode({"start": start.isoformat(), "end": end.isoformat()})


def metric_items(*, session: Session, spec: EvalSpec) -> list[AlertItem]:
    """Return every notifiable transition of the metric alerts (to firing; firing to resolved), over all traffic."""
    bounds = metrics_aggregates.event_days(session)
    if bounds is None:
        return []
    days = metrics_daily.daily_metrics(session=session, spec=spec, start=bounds[0], end=bounds[1])
    data_days = {d.day: d for d in days}
    out: list[AlertItem] = []
    for status in metrics_alert_states.evaluate_alerts(days, spec):
        rule = status.rule
        op = ">" if rule.op == "above_baseline" else rule.op
        label = metrics_targets.METRIC_LABELS.get(status.metric, status.metric)
        for t in status.history:
            if t.to_state == "firing":
                state = "firing"
            elif t.from_state == "firing" and t.to_state == "resolved":
                state = "resolved"
            else:
                continue
            window = _window_days(status.metric, rule, t.day, state, data_days, spec)
            out.append(
                {
                    "key": f"metric:{status.metric}:{t.day.isoformat()}:{t.from_state}>{t.to_state}",
                    "kind": "metric",
                    "topic": status.metric,
                    "state": state,
                    "alert": label,
                    "rule": status.describe(),
                    "window": _window_words(rule),
                    "value": t.value,
                    "threshold": status.threshold,
                    "op": op,
                    "value_text": _fmt(status.metric, t.value),
                    "threshold_text": _fmt(status.metric, status.threshold),
                    "days": [d.isoformat() for d in window],
                    "segment": SEGMENT_ALL,
                    "path": _metrics_path(window[0], window[-1]),
                }
            )
    return out


def _window_days(
    metric: str, rule: AlertRule, day: dt.date, state: str, data_days: dict[dt.date, DayMetrics], spec: EvalSpec
) -> list[dt.date]:
    """Return the days behind a transition: the breaching run or trailing window when firing, the day itself when resolved."""
    if state == "resolved":
        return [day]
    if rule.window == "trailing_mean":
        return [day - dt.timedelta(days=i) for i in range(rule.days - 1, -1, -1)]
    run: list[dt.date] = []
    d = day
    first = min(data_days)
    while d >= first and len(run) < rule.days:
        dm = data_days.get(d)
        value = None if dm is None else dm.value(metric)
        if value is not None:
            if not metrics_targets.alert_breached(rule, float(value), spec):
                break
            run.append(d)
        d -= dt.timedelta(days=1)
    return sorted(run) or [day]


def no_data_items(*, session: Session, spec: EvalSpec, now: dt.datetime) -> list[AlertItem]:
    """Return the "no data" transition due now: firing after alerts.no_data_hours without events, resolved when they arrive."""
    tz = spec.tz
    pilot_start = dt.datetime.combine(spec.online_metrics.pilot.start, dt.time(), tzinfo=tz).astimezone(dt.UTC)
    if now < pilot_start:
        return []  # silence before the pilot starts is expected
    # The newest row's receipt time: ids grow with insertion, so the primary key answers this at
    # once where max(received_at) would scan a million rows on every ingested batch.
    last_raw = session.execute(select(col(Event.received_at)).order_by(col(Event.id).desc()).limit(1)).scalar()
    last = as_utc(last_raw) if last_raw is not None else None
    latest = session.execute(
        select(AlertNotice).where(col(AlertNotice.kind) == "no_data").order_by(col(AlertNotice.id).desc()).limit(1)
    ).scalars().first()
    hours = spec.alerts.no_data_hours
    if latest is not None and latest.state == "firing":
        since = dt.datetime.fromisoformat(latest.key.split(":", 1)[1].rsplit(":", 1)[0])
        if last is not None and last > since:
            gap = (last - since).total_seconds() / 3600
            day = last.astimezone(tz).date()
            return [_no_data_item(hours, "resolved", since, gap, f"{gap:.1f} h without events", [day])]
        return []
    since = max(last, pilot_start) if last is not None else pilot_start
    gap = (now - since).total_seconds() / 3600
    if gap < hours:
        return []
    first_day, last_day = since.astimezone(tz).date(), now.astimezone(tz).date()
    text = (
        f"{gap:.1f} h since the last event ({since.strftime('%Y-%m-%d %H:%M')} UTC)"
        if last is not None
        else f"{gap:.1f} h since the pilot started, no event yet"
    )
    days = [first_day + dt.timedelta(days=i) for i in range((last_day - first_day).days + 1)]
    return [_no_data_item(hours, "firing", since, gap, text, days)]


def _no_data_item(hours: float, state: str, since: dt.datetime, gap: float, value_text: str, days: list[dt.date]) -> AlertItem:
    """Return the "no data" item of a silence that began at `since` (firing, or resolved by an event)."""
    return {
        "key": f"no_data:{since.isoformat()}:{state}",
        "kind": "no_data",
        "topic": "no_data",
        "state": state,
        "alert": "No data",
        "rule": f"no event received for {hours:g} hours",
        "window": f"{hours:g} hours",
        "value": gap,
        "threshold": hours,
        "op": ">=",
        "value_text": value_text,
        "threshold_text": f"{hours:g} h",
        "days": [d.isoformat() for d in days],
        "segment": SEGMENT_ALL,
        "path": _metrics_path(days[0], days[-1]),
    }


def regression_items(*, session: Session, spec: EvalSpec) -> list[AlertItem]:
    """Return every regression alert (golden factual failure, pass-rate drop) as a notifiable item."""
    rows = session.execute(
        select(RegressionAlert, col(Run.name)).join(Run, col(Run.id) == col(RegressionAlert.run_id)).order_by(col(RegressionAlert.id))
    ).all()
    out: list[AlertItem] = []
    for alert, run_name in rows:
        ev = alert.evidence or {}
        drop, limit = ev.get("drop"), ev.get("threshold")
        # (drop, limit) when both are numbers: a tuple keeps them typed as numbers where they are used.
        figures = (
            (drop, limit)
            if alert.kind == "pass_rate_drop" and isinstance(drop, (int, float)) and isinstance(limit, (int, float))
            else None
        )
        day = as_utc(alert.created_at).astimezone(spec.tz).date()
        out.append(
            {
                "key": f"regression:{alert.id}",
                "kind": "regression",
                "topic": "regression",
                "state": "raised",
                "alert": "Regression: " + ("pass-rate drop" if alert.kind == "pass_rate_drop" else "golden factual failure"),
                "rule": alert.message,
                "window": f"run {run_name}",
                "value": figures[0] if figures else None,
                "threshold": figures[1] if figures else None,
                "op": ">",
                "value_text": _regression_value_text(ev, figures),
                "threshold_text": f"{figures[1] * 100:.0f} points" if figures else "0 failures allowed",
                "days": [day.isoformat()],
                "segment": f"run {run_name}",
                "path": "/regression/alerts",
            }
        )
    return out


def _regression_value_text(evidence: dict[str, object], figures: tuple[float, float] | None) -> str:
    """Say a regression alert's figure: the sampled difference with its interval, the checks' drop, or the golden failure."""
    if figures is None:
        return "golden example fails"
    interval = evidence.get("interval_text")
    if isinstance(interval, str):
        return interval  # "pass rate -7.2 points [-11.0, -3.4]" (from the two runs' PPI samples)
    return f"pass rate down {figures[0] * 100:.1f} points"


def hallucination_items(*, session: Session, spec: EvalSpec) -> list[AlertItem]:
    """Return every confirmed hallucination report as a notifiable item."""
    rows = session.execute(
        select(HallucinationReport, Event)
        .join(Event, col(Event.event_id) == HallucinationReport.event_id)
        .where(col(HallucinationReport.status) == "confirmed")
        .order_by(col(HallucinationReport.id))
    ).all()
    out: list[AlertItem] = []
    for report, event in rows:
        parts = [f"{k}={v}" for k, v in (("intent", event.intent), ("plan", event.plan), ("agent", event.agent_id)) if v]
        out.append(
            {
                "key": f"hallucination:{report.id}",
                "kind": "hallucination",
                "topic": "hallucination",
                "state": "confirmed",
                "alert": "Confirmed hallucination",
                "rule": f"event {event.event_id}: {report.note or 'no note'}",
                "window": "1 day",
                "value": 1,
                "threshold": 0,
                "op": "==",
                "value_text": "1 confirmed report",
                "threshold_text": "0 allowed",
                "days": [event.day.isoformat()],
                "segment": ", ".join(parts) or SEGMENT_ALL,
                "path": "/metrics/hallucinations?status=confirmed",
            }
        )
    return out


HUMAN_QUALITY = "human_quality"


def human_quality_items(*, session: Session, spec: EvalSpec) -> list[AlertItem]:
    """Return the weekly human-graded quality alert's transitions: firing for a week with a criterion below the team's target.

    A week fires once its sample is fully graded and a criterion's 95% upper bound is below the
    team's target for it (spec `team_targets.weekly_human_quality`; webapp/ppi/production.py,
    `WeekQuality.below_target`). It resolves when a further sample and
    its grades lift the upper bound to the target or above. Each week fires and resolves at most
    once (the ledger's keys are per week).
    """
    recorded = set(session.execute(select(col(AlertNotice.key)).where(col(AlertNotice.kind) == HUMAN_QUALITY)).scalars())
    # a week that fired and resolved has nothing more to send: its estimate is not computed again
    done = {key.split(":")[1] for key in recorded if key.endswith(":resolved")}
    out: list[AlertItem] = []
    for w in ppi_production.weekly_quality(session=session, spec=spec, skip=done):
        if w.provisional or not any(c.estimate is not None for c in w.criteria):
            continue
        firing_key = f"{HUMAN_QUALITY}:{w.week}:firing"
        if w.below_target:
            state, key = "firing", firing_key
        elif firing_key in recorded:
            state, key = "resolved", f"{HUMAN_QUALITY}:{w.week}:resolved"
        else:
            continue
        days = [(w.start + dt.timedelta(days=i)).isoformat() for i in range(7)]
        # The criterion furthest below its target names the figure; resolved: the lowest margin left.
        shown = [c for c in w.criteria if c.estimate is not None]
        worst = min(shown, key=lambda c: (c.estimate.high if c.estimate else 0.0) - c.target)
        e = worst.estimate
        assert e is not None
        below = ", ".join(f"{c.name} (upper bound {c.estimate.high:.2f} < {c.target:g})" for c in w.below_criteria if c.estimate)
        out.append(
            {
                "key": key,
                "kind": HUMAN_QUALITY,
                "topic": HUMAN_QUALITY,
                "state": state,
                "alert": "Human-graded quality (weekly sample, the team's target)",
                "rule": f"{w.week}: a criterion's 95% interval lies below the team's target: {below}"
                if below else f"{w.week}: every criterion's 95% upper bound is at or above the team's target",
                "window": f"ISO week {w.week}",
                "value": e.high,
                "threshold": worst.target,
                "op": "<",
                "value_text": f"{worst.name} {e.estimate:.2f} [{e.low:.2f}, {e.high:.2f}] from {w.graded} human grades of {w.drafts} drafts",
                "threshold_text": f"above {worst.target:g} (the team's target)",
                "days": days,
                "segment": SEGMENT_ALL,
                "path": _metrics_path(w.start, w.end) + "#quality-weekly",
            }
        )
    return out
