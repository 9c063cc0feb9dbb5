"""Daily metrics against targets, alert windows, business-day streaks, calibration, hallucination reports.

Numbers come from the spec's `online_metrics` section; every metric of a day is derived from the
per-day aggregates rebuilt at ingestion (webapp/metrics/ingest.py), or, for a full
(intent, plan, agent) segment, from the raw events with the same code.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlmodel import Session, col

from webapp.db import table_of
from webapp.metrics import ingest, stale, units
from webapp.metrics.ingest import ALL, CALIBRATION_BINS, SEGMENT_DIMS
from webapp.metrics.models import DailyAggregate, Event, HallucinationDecision, HallucinationReport
from webapp.spec import METRIC_NAMES, AlertRule, EvalSpec, TargetRule
from webapp.timeutil import utcnow

# Comparisons are made on values rounded to this many decimals, so that 0.10 - 0.08 counts as 0.02.
_DECIMALS = 12

METRIC_LABELS: dict[str, str] = {
    "accept_rate": "Accept rate",
    "reject_rate": "Reject rate",
    "edit_distance": "Edit distance (mean)",
    "escalation_rate": "Escalation rate",
    "handle_time_s": "Handle time (s)",
    "latency_p95_s": "Latency p95 (s)",
    "hallucination_reports": "Confirmed hallucinations",
    "cost_per_draft": "Cost per draft ($)",
}


class MetricsError(ValueError):
    """A request the metrics service cannot answer (bad range, unknown event or report)."""


@dataclass
class DayMetrics:
    """One day's metrics (None = no data), which targets they meet, and the sums behind the means."""

    day: dt.date
    events: int
    drafts_shown: int
    accept_rate: float | None
    reject_rate: float | None
    edit_distance: float | None
    escalation_rate: float | None
    handle_time_s: float | None
    latency_p95_s: float | None
    cost_per_draft: float | None
    hallucination_reports: int | None
    target_met: dict[str, bool | None] = field(default_factory=dict)
    # metric -> (numerator, denominator) for windowed means; latency has none (a p95 does not add up)
    parts: dict[str, tuple[float, float]] = field(default_factory=dict, repr=False)
    versions: dict[str, dict[str, int]] | None = field(default=None, repr=False)
    # [[count, sum of confidence, accepted], ...] per confidence bin (see calibration_from_days)
    calib: list[list[float]] | None = field(default=None, repr=False)

    @property
    def all_targets_met(self) -> bool | None:
        """Tell whether every target with data was met; None when the day has no events."""
        if self.events == 0:
            return None
        verdicts = [v for v in self.target_met.values() if v is not None]
        if not verdicts:
            return None
        return all(verdicts)

    def value(self, metric: str) -> float | None:
        """Return the value of one metric."""
        return getattr(self, metric)

    def as_dict(self) -> dict[str, Any]:
        """Return the day as the API shows it."""
        out: dict[str, Any] = {"day": self.day.isoformat(), "events": self.events, "drafts_shown": self.drafts_shown}
        for m in METRIC_NAMES:
            out[m] = self.value(m)
        out["target_met"] = dict(self.target_met)
        out["all_targets_met"] = self.all_targets_met
        return out


def _ratio(num: float, den: float) -> float | None:
    return None if den == 0 else num / den


def target_rule(metric: str, spec: EvalSpec) -> TargetRule | None:
    """Return a metric's daily target rule, if the spec has one."""
    return next((rule for name, rule in spec.online_metrics.targets.items() if name == metric), None)


def alert_rule(metric: str, spec: EvalSpec) -> AlertRule | None:
    """Return a metric's alert rule, if the spec has one."""
    return next((rule for name, rule in spec.online_metrics.alerts.items() if name == metric), None)


def check_target(rule: TargetRule, value: float | None, spec: EvalSpec) -> bool | None:
    """Tell whether a value meets a target rule; None without a value."""
    if value is None:
        return None
    v = round(value, _DECIMALS)
    t = rule.value
    if rule.op == "within_baseline":
        return round(abs(value - spec.online_metrics.escalation_baseline), _DECIMALS) <= t
    return _compare(v, rule.op, t)


def alert_breached(rule: AlertRule, value: float, spec: EvalSpec) -> bool:
    """Tell whether a (window) value crosses an alert threshold."""
    return _compare(round(value, _DECIMALS), *_alert_threshold(rule, spec))


def _alert_threshold(rule: AlertRule, spec: EvalSpec) -> tuple[str, float]:
    if rule.op == "above_baseline":
        return ">", round(spec.online_metrics.escalation_baseline + rule.value, _DECIMALS)
    return rule.op, rule.value


def alert_threshold_value(metric: str, spec: EvalSpec) -> float | None:
    """Return the threshold line of a metric's alert (baseline-relative rules resolved)."""
    rule = alert_rule(metric, spec)
    return None if rule is None else _alert_threshold(rule, spec)[1]


def target_lines(metric: str, spec: EvalSpec) -> list[float]:
    """Return the target line(s) of a metric (two for a band around the baseline)."""
    rule = target_rule(metric, spec)
    if rule is None:
        return []
    if rule.op == "within_baseline":
        b = spec.online_metrics.escalation_baseline
        return [round(b - rule.value, _DECIMALS), round(b + rule.value, _DECIMALS)]
    return [rule.value]


def _compare(v: float, op: str, t: float) -> bool:
    return {
        ">": v > t,
        "<": v < t,
        ">=": v >= t,
        "<=": v <= t,
        "==": v == t,
    }[op]


def _segment(intent: str | None, plan: str | None, agent_id: str | None) -> dict[str, str | None]:
    return {"intent": intent or None, "plan": plan or None, "agent_id": agent_id or None}


def _aggregate_rows(
    session: Session, spec: EvalSpec, start: dt.date, end: dt.date, segment: dict[str, str | None]
) -> list[dict[str, Any]]:
    """Return one dict of sums per day with events: stored aggregates, or raw events for stale days and full segments."""
    if tuple(d for d in SEGMENT_DIMS if segment[d] is not None) not in ingest.ROLLUPS:
        return stale.frame_rows(ingest.raw_frame(session, start=start, end=end, segment=segment), spec)
    # the marks before the stored rows: a day rebuilt in between is then computed, never missed
    lagging = stale.stale_days(session, start=start, end=end)
    t = table_of(DailyAggregate).c
    stmt = select(table_of(DailyAggregate)).where(
        t.day >= start,
        t.day <= end,
        *[t[d] == (segment[d] if segment[d] is not None else ALL) for d in SEGMENT_DIMS],
    )
    stored = [dict(r._mapping) for r in session.execute(stmt)]
    if not lagging:
        return stored
    fresh = stale.computed_rows(session, spec, days=lagging, segment=segment)
    return [r for r in stored if r["day"] not in lagging] + fresh


def _confirmed_counts(
    session: Session, start: dt.date, end: dt.date, segment: dict[str, str | None]
) -> dict[dt.date, int]:
    stmt = (
        select(col(Event.day), func.count(col(HallucinationReport.id)))
        .join(Event, col(Event.event_id) == HallucinationReport.event_id)
        .where(col(HallucinationReport.status) == "confirmed", col(Event.day) >= start, col(Event.day) <= end)
        .group_by(col(Event.day))
    )
    for d in SEGMENT_DIMS:
        if segment[d] is not None:
            stmt = stmt.where(getattr(Event, d) == segment[d])
    return {day: int(n) for day, n in session.execute(stmt)}


def daily_metrics(
    *,
    session: Session,
    spec: EvalSpec,
    start: dt.date,
    end: dt.date,
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
) -> list[DayMetrics]:
    """Return one DayMetrics per calendar day of [start, end] for the segment (filters apply to every metric)."""
    if end < start:
        raise MetricsError(f"end {end} is before start {start}")
    if (end - start).days > 3660:
        raise MetricsError("a range of at most ten years, please")
    segment = _segment(intent, plan, agent_id)
    rows = {r["day"]: r for r in _aggregate_rows(session, spec, start, end, segment)}
    confirmed = _confirmed_counts(session, start, end, segment)
    out: list[DayMetrics] = []
    day = start
    while day <= end:
        out.append(_day_metrics(day, rows.get(day), confirmed.get(day, 0), spec))
        day += dt.timedelta(days=1)
    return out


def _day_metrics(day: dt.date, r: dict[str, Any] | None, confirmed: int, spec: EvalSpec) -> DayMetrics:
    if r is None or int(r["n_events"]) == 0:
        dm = DayMetrics(day, 0, 0, None, None, None, None, None, None, None, None)
    else:
        n_shown = int(r["n_shown"])
        dm = DayMetrics(
            day=day,
            events=int(r["n_events"]),
            drafts_shown=n_shown,
            accept_rate=_ratio(r["n_accept"], n_shown),
            reject_rate=_ratio(r["n_reject"], n_shown),
            edit_distance=_ratio(r["ed_sum"], r["ed_n"]),
            escalation_rate=_ratio(r["n_escalated"], r["n_events"]),
            handle_time_s=_ratio(r["ht_sum"], r["ht_n"]),
            latency_p95_s=None if r["lat_p95_s"] is None else float(r["lat_p95_s"]),
            cost_per_draft=_ratio(r["cost_sum"], r["cost_n"]),
            hallucination_reports=confirmed,
            parts={
                "accept_rate": (r["n_accept"], n_shown),
                "reject_rate": (r["n_reject"], n_shown),
                "edit_distance": (r["ed_sum"], r["ed_n"]),
                "escalation_rate": (r["n_escalated"], r["n_events"]),
                "handle_time_s": (r["ht_sum"], r["ht_n"]),
                "cost_per_draft": (r["cost_sum"], r["cost_n"]),
                "hallucination_reports": (confirmed, 1),
            },
            versions=r.get("versions"),
            calib=r["calib"],
        )
    for m in METRIC_NAMES:
        rule = target_rule(m, spec)
        if rule is not None:
            dm.target_met[m] = check_target(rule, dm.value(m), spec)
    return dm


# --- alerts ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Transition:
    day: dt.date
    from_state: str
    to_state: str
    value: float


@dataclass
class AlertStatus:
    """One alert rule over a series of days: its current state, transitions, and firing periods."""

    metric: str
    rule: AlertRule
    threshold: float
    state: str = "ok"  # ok | pending | firing | resolved
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

    def as_dict(self) -> dict[str, Any]:
        """Return the alert as the API shows it."""
        return {
            "metric": self.metric,
            "rule": self.describe(),
            "op": self.rule.op,
            "threshold": self.threshold,
            "window": self.rule.window,
            "days": self.rule.days,
            "state": self.state,
            "value": self.value,
            "last_evaluated": self.last_evaluated.isoformat() if self.last_evaluated else None,
            "history": [
                {"day": t.day.isoformat(), "from": t.from_state, "to": t.to_state, "value": t.value} for t in self.history
            ],
            "firing_periods": [[a.isoformat(), b.isoformat()] for a, b in self.firing_periods],
        }


def evaluate_alert(metric: str, rule: AlertRule, days: list[DayMetrics], spec: EvalSpec) -> AlertStatus:
    """Run one alert rule over consecutive days; days without data leave the state unchanged."""
    status = AlertStatus(metric=metric, rule=rule, threshold=_alert_threshold(rule, spec)[1])
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
            new = ("firing" if full else "pending") if breach else None
        else:
            value = float(day_value)
            breach = alert_breached(rule, value, spec)
            run = run + 1 if breach else 0
            new = ("firing" if run >= rule.days else "pending") if breach else None
        if new is None:
            new = {"firing": "resolved", "pending": "ok"}.get(status.state, status.state)
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
    bounds = ingest.event_days(session)
    if bounds is None:
        return [
            AlertStatus(metric=m, rule=r, threshold=_alert_threshold(r, spec)[1])
            for m, r in spec.online_metrics.alerts.items()
        ]
    start = bounds[0]
    end = end or bounds[1]
    days = daily_metrics(session=session, spec=spec, start=start, end=max(start, end), intent=intent, plan=plan, agent_id=agent_id)
    return evaluate_alerts(days, spec)


def evaluate_alerts(days: list[DayMetrics], spec: EvalSpec) -> list[AlertStatus]:
    """Evaluate every alert rule of the spec over a series of days."""
    return [evaluate_alert(m, r, days, spec) for m, r in spec.online_metrics.alerts.items()]


# --- business-day streaks -------------------------------------------------------------------------


@dataclass
class Streaks:
    """Runs of business days on which every target was met (days without data are skipped), with their scope.

    `window` says which days were counted ("pilot": the spec's pilot period up to today, the
    production gate's figure; "range": the range a page shows) and `segment` which events.
    """

    current: int
    current_start: dt.date | None
    longest: int
    longest_start: dt.date | None
    longest_end: dt.date | None
    verdicts: list[tuple[dt.date, bool | None]]
    window: str = "range"  # pilot | range
    window_start: dt.date | None = None
    window_end: dt.date | None = None
    segment: dict[str, str | None] = field(default_factory=dict)
    missed: list[tuple[dt.date, list[str]]] = field(default_factory=list)  # business days that missed, and which targets

    @property
    def window_text(self) -> str:
        """Return the window in words, e.g. 'pilot window 2026-11-02 – 2026-11-13'."""
        name = "pilot window" if self.window == "pilot" else "range"
        if self.window_start is None or self.window_end is None:
            return name
        return f"{name} {self.window_start.isoformat()} – {self.window_end.isoformat()}"

    @property
    def segment_text(self) -> str:
        """Return the segment in words: 'all traffic' or 'intent = billing_charge, plan = pro'."""
        parts = [f"{k} = {v}" for k, v in self.segment.items() if v]
        return ", ".join(parts) if parts else "all traffic"

    @property
    def scope_text(self) -> str:
        """Return the window and the segment, e.g. 'pilot window 2026-11-02 – 2026-11-13, all traffic'."""
        return f"{self.window_text}, {self.segment_text}"

    def as_dict(self) -> dict[str, Any]:
        """Return the streaks as the API shows them."""
        iso = lambda d: d.isoformat() if d else None  # noqa: E731
        return {
            "window": {"kind": self.window, "start": iso(self.window_start), "end": iso(self.window_end)},
            "segment": {k: self.segment.get(k) for k in SEGMENT_DIMS},
            "scope": self.scope_text,
            "current": self.current,
            "current_start": iso(self.current_start),
            "longest": self.longest,
            "longest_start": iso(self.longest_start),
            "longest_end": iso(self.longest_end),
            "missed_days": [{"day": d.isoformat(), "targets": ms} for d, ms in self.missed],
        }


def is_business_day(day: dt.date, spec: EvalSpec) -> bool:
    """Tell whether a day is Monday-Friday and not a holiday of the spec."""
    return day.weekday() < 5 and day not in spec.online_metrics.holidays


def streaks_from_verdicts(verdicts: list[tuple[dt.date, bool | None]]) -> Streaks:
    """Compute current and longest runs of True verdicts, skipping None (no data)."""
    longest = run = 0
    longest_start = longest_end = run_start = None
    for day, ok in verdicts:
        if ok is None:
            continue
        if ok:
            if run == 0:
                run_start = day
            run += 1
            if run > longest:
                longest, longest_start, longest_end = run, run_start, day
        else:
            run = 0
    return Streaks(run, run_start if run else None, longest, longest_start, longest_end, verdicts)


def streaks_from_days(
    days: list[DayMetrics],
    spec: EvalSpec,
    *,
    window: str = "range",
    segment: dict[str, str | None] | None = None,
) -> Streaks:
    """Compute the business-day streaks over consecutive days already computed for one segment."""
    business = [d for d in days if is_business_day(d.day, spec)]
    out = streaks_from_verdicts([(d.day, d.all_targets_met) for d in business])
    out.window = window
    out.window_start = days[0].day if days else None
    out.window_end = days[-1].day if days else None
    out.segment = {k: (segment or {}).get(k) or None for k in SEGMENT_DIMS}
    out.missed = [(d.day, [m for m, ok in d.target_met.items() if ok is False]) for d in business if d.all_targets_met is False]
    return out


def business_day_streaks(
    *,
    session: Session,
    spec: EvalSpec,
    start: dt.date,
    end: dt.date,
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
    window: str = "range",
) -> Streaks:
    """Return the current and longest streak of business days in [start, end] with every target met (for the segment)."""
    segment = _segment(intent, plan, agent_id)
    days = daily_metrics(session=session, spec=spec, start=start, end=end, **segment)
    return streaks_from_days(days, spec, window=window, segment=segment)


def today_in(spec: EvalSpec) -> dt.date:
    """Return today's date in the spec's time zone."""
    return utcnow().astimezone(spec.tz).date()


def pilot_streaks(*, session: Session, spec: EvalSpec, today: dt.date | None = None) -> Streaks:
    """Return the production gate's streaks: the pilot window (up to today), all traffic."""
    pilot = spec.online_metrics.pilot
    end = min(pilot.end, today or today_in(spec))
    if end < pilot.start:  # the pilot has not started: nothing to count yet
        empty = streaks_from_days([], spec, window="pilot")
        empty.window_start, empty.window_end = pilot.start, pilot.end
        return empty
    return business_day_streaks(session=session, spec=spec, start=pilot.start, end=end, window="pilot")


def describe_target(metric: str, spec: EvalSpec) -> str:
    """Return a metric's daily target in its unit, e.g. '> 75.0%' or '8.0% ± 2.0 pts'."""
    rule = target_rule(metric, spec)
    if rule is None:
        return "no target"
    if rule.op == "within_baseline":
        base = spec.online_metrics.escalation_baseline
        return f"{units.text(metric, base)} ± {units.delta(rule.value, units.unit(metric)).text.lstrip('+')}"
    return units.threshold(metric, rule.op, rule.value)


def default_range(
    *, session: Session, spec: EvalSpec, start: dt.date | None, end: dt.date | None, days: int = 42
) -> tuple[dt.date, dt.date]:
    """Return [start, end], by default the last `days` days up to the last day with events."""
    bounds = ingest.event_days(session)
    last = bounds[1] if bounds else today_in(spec)
    end = end or last
    start = start or max(bounds[0] if bounds else end, end - dt.timedelta(days=days - 1))
    if end < start:
        raise MetricsError(f"end: {end} is before start {start}")
    return start, end


# --- calibration ----------------------------------------------------------------------------------


@dataclass
class CalibrationBin:
    lo: float
    hi: float
    n: int
    mean_confidence: float | None
    accept_rate: float | None


@dataclass
class Calibration:
    bins: list[CalibrationBin]
    n: int
    ece: float | None  # sum over bins of n_b / n * |accept rate_b - mean confidence_b|


def calibration_from_days(days: list[DayMetrics]) -> Calibration:
    """Bin shown drafts by confidence and compare each bin's accept rate with its mean confidence."""
    totals = [[0.0, 0.0, 0.0] for _ in range(CALIBRATION_BINS)]
    for d in days:
        for b, (n, conf, acc) in enumerate(d.calib or []):
            totals[b][0] += n
            totals[b][1] += conf
            totals[b][2] += acc
    total = sum(t[0] for t in totals)
    bins = []
    ece = 0.0
    for b, (n, conf, acc) in enumerate(totals):
        mean_conf = conf / n if n else None
        rate = acc / n if n else None
        if rate is not None and mean_conf is not None:
            ece += n / total * abs(rate - mean_conf)
        bins.append(CalibrationBin(b / CALIBRATION_BINS, (b + 1) / CALIBRATION_BINS, int(n), mean_conf, rate))
    return Calibration(bins, int(total), ece if total else None)


# --- version changes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionChange:
    day: dt.date
    kind: str  # model_version | prompt_version
    value: str


def version_changes(days: list[DayMetrics]) -> list[VersionChange]:
    """Return the days on which a model or prompt version first appeared (after the first one seen)."""
    seen: dict[str, set[str]] = {"model_version": set(), "prompt_version": set()}
    out: list[VersionChange] = []
    for d in days:
        if not d.versions:
            continue
        for kind in ("model_version", "prompt_version"):
            for value in sorted(d.versions.get(kind, {})):
                if value not in seen[kind]:
                    if seen[kind]:
                        out.append(VersionChange(d.day, kind, value))
                    seen[kind].add(value)
    return out


def versions_for(*, session: Session, spec: EvalSpec, start: dt.date, end: dt.date) -> list[VersionChange]:
    """Return version changes over [start, end], looking back to the first event so the first is not a change."""
    bounds = ingest.event_days(session)
    if bounds is None:
        return []
    days = daily_metrics(session=session, spec=spec, start=min(bounds[0], start), end=end)
    return [c for c in version_changes(days) if start <= c.day <= end]


# --- drill-down -----------------------------------------------------------------------------------


DAY_KINDS: dict[str, str] = {"reject": "Rejects", "edit": "Edits", "escalation": "Escalations"}


def _kind_clause(kind: str) -> Any:
    """Return the SQL condition of a drill-down filter (the same events the day's rates count)."""
    if kind == "reject":
        return (col(Event.draft_shown).is_(True)) & (Event.action == "reject")
    if kind == "edit":
        return (col(Event.draft_shown).is_(True)) & (Event.action == "edit")
    if kind == "escalation":
        return col(Event.escalated).is_(True)
    raise MetricsError(f"show: must be one of {', '.join(DAY_KINDS)} (or empty for every event), not {kind!r}")


def day_events(
    *,
    session: Session,
    day: dt.date,
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
    kind: str | None = None,
    limit: int = 200,
    offset: int = 0,
) -> tuple[list[Event], int]:
    """Return one page of a day's events (draft by draft) for the segment and kind, and how many there are."""
    stmt = select(Event).where(col(Event.day) == day)
    count = select(func.count()).select_from(Event).where(col(Event.day) == day)
    for dim, value in _segment(intent, plan, agent_id).items():
        if value is not None:
            stmt = stmt.where(getattr(Event, dim) == value)
            count = count.where(getattr(Event, dim) == value)
    if kind:
        stmt = stmt.where(_kind_clause(kind))
        count = count.where(_kind_clause(kind))
    rows = session.execute(stmt.order_by(col(Event.occurred_at), col(Event.id)).limit(limit).offset(offset)).scalars()
    return list(rows), int(session.execute(count).scalar_one())


def day_kind_counts(
    *, session: Session, day: dt.date, intent: str | None = None, plan: str | None = None, agent_id: str | None = None
) -> dict[str, int]:
    """Return how many of a day's events (for the segment) are rejects, edits and escalations."""
    out: dict[str, int] = {}
    for kind in DAY_KINDS:
        stmt = select(func.count()).select_from(Event).where(col(Event.day) == day, _kind_clause(kind))
        for dim, value in _segment(intent, plan, agent_id).items():
            if value is not None:
                stmt = stmt.where(getattr(Event, dim) == value)
        out[kind] = int(session.execute(stmt).scalar_one())
    return out


def sent_drafts_by_day(*, session: Session, spec: EvalSpec) -> dict[dt.date, int]:
    """Return how many sent drafts (shown, accepted or edited, both texts kept) each day with any has."""
    lagging = stale.stale_days(session)
    t = table_of(DailyAggregate).c
    stmt = select(t.day, t.ed_n).where(t.intent == ALL, t.plan == ALL, t.agent_id == ALL, t.ed_n > 0)
    out = {day: int(n) for day, n in session.execute(stmt) if day not in lagging}
    everything = _segment(None, None, None)
    out.update({r["day"]: int(r["ed_n"]) for r in stale.computed_rows(session, spec, days=lagging, segment=everything) if r["ed_n"]})
    return out


def segment_values(*, session: Session) -> dict[str, list[str]]:
    """Return the values seen for each segment dimension (for filter menus)."""
    t = table_of(DailyAggregate).c
    out: dict[str, list[str]] = {}
    for dim in SEGMENT_DIMS:
        others = [t[o] == ALL for o in SEGMENT_DIMS if o != dim]
        rows = session.execute(select(t[dim]).where(t[dim] != ALL, t[dim] != "", *others).distinct())
        out[dim] = sorted({r[0] for r in rows} | stale.segment_values_of_stale_days(session, dim))
    return out


# --- hallucination reports ------------------------------------------------------------------------


def report_hallucination(
    *, session: Session, event_id: str, note: str, reported_by: int | None,
    citations: list[dict[str, Any]] | None = None,
) -> HallucinationReport:
    """Record an agent's flag of a factual error on an event (pending until the lead decides)."""
    event = session.execute(select(col(Event.id)).where(col(Event.event_id) == event_id)).first()
    if event is None:
        raise MetricsError(f"event_id: no event {event_id!r}")
    report = HallucinationReport(event_id=event_id, note=note.strip(), reported_by=reported_by, citations=citations)
    session.add(report)
    session.flush()
    return report


def decide_report(
    *, session: Session, report_id: int, decision: str, decided_by: int | None, note: str = ""
) -> HallucinationReport:
    """Confirm or dismiss a hallucination report with a note saying why; only confirmed reports count.

    Each decision is kept as a HallucinationDecision row (see webapp.metrics.hallucinations for the
    history and for undoing one).
    """
    if decision not in ("confirmed", "dismissed"):
        raise MetricsError(f"decision: must be confirmed or dismissed, not {decision!r}")
    if not note.strip():
        raise MetricsError(f"note: say why the report is {decision} (the note is kept with the decision)")
    report = session.get(HallucinationReport, report_id)
    if report is None:
        raise MetricsError(f"report: no hallucination report {report_id}")
    return apply_decision(session=session, report=report, decision=decision, decided_by=decided_by, note=note)


def apply_decision(
    *, session: Session, report: HallucinationReport, decision: str, decided_by: int | None, note: str,
    undoes: int | None = None,
) -> HallucinationReport:
    """Record a decision row and make it the report's current state."""
    row = HallucinationDecision(
        report_id=_saved_id(report),
        decision=decision,
        note=note.strip(),
        decided_by=decided_by,
        undoes=undoes,
    )
    session.add(row)
    report.status = decision
    report.decided_at = None if decision == "pending" else row.decided_at
    report.decided_by = None if decision == "pending" else decided_by
    report.decision_note = "" if decision == "pending" else note.strip()
    session.add(report)
    session.flush()
    return report


def _saved_id(report: HallucinationReport) -> int:
    if report.id is None:  # reports reach here from the database, so they have an id
        raise MetricsError("report: not saved yet")
    return report.id


def list_reports(*, session: Session, status: str | None = None) -> list[tuple[HallucinationReport, Event]]:
    """List hallucination reports with their events (pending first, then newest)."""
    stmt = select(HallucinationReport, Event).join(Event, col(Event.event_id) == HallucinationReport.event_id)
    if status:
        stmt = stmt.where(col(HallucinationReport.status) == status)
    stmt = stmt.order_by(col(HallucinationReport.status) != "pending", col(HallucinationReport.created_at).desc())
    return [(r, e) for r, e in session.execute(stmt).all()]


def pending_report_count(*, session: Session) -> int:
    """Return how many hallucination reports wait for the lead."""
    stmt = select(func.count()).select_from(HallucinationReport).where(col(HallucinationReport.status) == "pending")
    return int(session.execute(stmt).scalar_one())


def confirmed_hallucination_reports(*, session: Session, start: dt.date, end: dt.date) -> list[HallucinationReport]:
    """Return the confirmed hallucination reports on events of days [start, end] (spec time zone)."""
    stmt = (
        select(HallucinationReport)
        .join(Event, col(Event.event_id) == HallucinationReport.event_id)
        .where(col(HallucinationReport.status) == "confirmed", col(Event.day) >= start, col(Event.day) <= end)
        .order_by(col(Event.day), col(HallucinationReport.id))
    )
    return list(session.execute(stmt).scalars())
