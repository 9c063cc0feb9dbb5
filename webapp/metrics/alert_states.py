"""Alert states of the metrics: each alert rule run over consecutive days (pending, firing, resolved).

Days without data leave a state unchanged; a trailing-mean rule averages the sums behind the daily
means (webapp.metrics.daily.DayMetrics.parts), so the window's mean weighs days by their volume.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Literal

from sqlmodel import Session

from webapp.core import units
from webapp.core.spec import AlertRule, EvalSpec
from webapp.metrics import aggregates
from webapp.metrics.daily import DayMetrics, daily_metrics
from webapp.metrics.targets import METRIC_LABELS, alert_breached, alert_threshold

AlertState = Literal["ok", "pending", "firing", "resolved"]


@dataclass(frozen=True)
class Transition:
    day: dt.date
    from_state: AlertState
    to_state: AlertState
    value: float


@dataclass
class AlertStatus:
    """One alert rule over a series of days: its current state, transitions, and firing periods."""

    metric: str
    rule: AlertRule
    threshold: float
    state: AlertState = "ok"
    value: float | None = None  # the window value of the last day with data
    last_evaluated: dt.date | None = None
    history: list[Transition] = field(default_factory=list)
    day_states: dict[dt.date, str] = field(default_factory=dict, repr=False)

    @property
    def firing_periods(self) -> list[tuple[dt.date, dt.date]]:
        """Return the [first, last] days of each stretch in which the alert was firing."""
        periods: list[tuple[dt.date, dt.date]] = []
        start: dt.date | None = None
        last: dt.date | None = None
        for day in sorted(self.day_states):
            if self.day_states[day] == "firing":
                if start is None:
                    start = day
                last = day
            elif start is not None and last is not None:
                periods.append((start, last))
                start = None
        if start is not None and last is not None:
            periods.append((start, last))
        return periods

    def describe(self) -> str:
        """Return the rule in words, in the metric's unit, e.g. 'Accept rate < 65.0% on 3 consecutive days'."""
        label = METRIC_LABELS.get(self.metric, self.metric)
        op = ">" if self.rule.op == "above_baseline" else self.rule.op
        limit = units.threshold(self.metric, op, self.threshold)
        if self.rule.window == "trailing_mean":
            return f"{label}: mean over the trailing {self.rule.days} days {limit}"
        days = "a day" if self.rule.days == 1 else f"{self.rule.days} consecutive days"
        return f"{label} {limit} on {days}"


# what a state becomes on a day without a breach
_CLEARED: dict[AlertState, AlertState] = {"firing": "resolved", "pending": "ok"}


def evaluate_alert(metric: str, rule: AlertRule, days: list[DayMetrics], spec: EvalSpec) -> AlertStatus:
    """Run one alert rule over consecutive days; days without data leave the state unchanged."""
    status = AlertStatus(metric=metric, rule=rule, threshold=alert_threshold(rule, spec)[1])
    run = 0
    first_data: dt.date | None = None
    by_day = {d.day: d for d in days}
    for d in days:
        day_value = d.value(metric)
        if day_value is None:
            status.day_states[d.day] = status.state
            continue
        if first_data is None:
            first_data = d.day
        if rule.window == "trailing_mean":
            value = _trailing_mean(metric, d.day, rule.days, by_day)
            breach = alert_breached(rule, value, spec)
            full = (d.day - first_data).days >= rule.days - 1
            new: AlertState | None = ("firing" if full else "pending") if breach else None
        else:
            value = float(day_value)
            breach = alert_breached(rule, value, spec)
            run = run + 1 if breach else 0
            new = ("firing" if run >= rule.days else "pending") if breach else None
        if new is None:
            new = _CLEARED.get(status.state, status.state)
        if new != status.state:
            status.history.append(Transition(d.day, status.state, new, value))
            status.state = new
        status.value = value
        status.last_evaluated = d.day
        status.day_states[d.day] = status.state
    return status


def _trailing_mean(metric: str, day: dt.date, n: int, by_day: dict[dt.date, DayMetrics]) -> float:
    num = den = 0.0
    values: list[float] = []
    for i in range(n):
        d = by_day.get(day - dt.timedelta(days=i))
        day_value = None if d is None else d.value(metric)
        if d is None or day_value is None:
            continue
        if metric in d.parts:
            a, b = d.parts[metric]
            num += a
            den += b
        values.append(float(day_value))
    if den:
        return num / den
    # a percentile does not add up over days: the trailing window then averages the daily values
    return sum(values) / len(values)


def alerts(
    *,
    session: Session,
    spec: EvalSpec,
    end: dt.date | None = None,
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
) -> list[AlertStatus]:
    """Evaluate every alert rule over all days with events up to `end` (default: the last day with events)."""
    bounds = aggregates.event_days(session)
    if bounds is None:
        return [
            AlertStatus(metric=m, rule=r, threshold=alert_threshold(r, spec)[1])
            for m, r in spec.online_metrics.alerts.items()
        ]
    start = bounds[0]
    end = end or bounds[1]
    days = daily_metrics(session=session, spec=spec, start=start, end=max(start, end), intent=intent, plan=plan, agent_id=agent_id)
    return evaluate_alerts(days, spec)


def evaluate_alerts(days: list[DayMetrics], spec: EvalSpec) -> list[AlertStatus]:
    """Evaluate every alert rule of the spec over a series of days."""
    return [evaluate_alert(m, r, days, spec) for m, r in spec.online_metrics.alerts.items()]
