"""Daily metrics of a segment: each day's figures from the stored aggregates, and the ranges and filters around them.

Numbers come from the spec's `online_metrics` section; every metric of a day is derived from the
per-day aggregates rebuilt at ingestion (webapp/metrics/ingest.py), or, for a full
(intent, plan, agent) segment, from the raw events with the same code.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TypedDict, cast

from sqlalchemy import func, select
from sqlmodel import Session, col

from webapp.core.db import table_of
from webapp.core.spec import METRIC_NAMES, EvalSpec
from webapp.core.timeutil import utcnow
from webapp.metrics import aggregates, stale
from webapp.metrics.aggregates import SEGMENT_DIMS
from webapp.metrics.models import ALL, DailyAggregate, Event, HallucinationReport
from webapp.metrics.targets import check_target, target_rule


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
    # Set while the day's stored figures lag its events: when the oldest waiting batch was stored
    # (its stale mark's time), and how many of the segment's events the figures above leave out.
    updating_since: dt.datetime | None = None
    pending_events: int = 0

    @property
    def updating(self) -> bool:
        """Tell whether events of this day are not yet in its figures (the next rebuild pass adds them)."""
        return self.updating_since is not None

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



def _ratio(num: float, den: float) -> float | None:
    return None if den == 0 else num / den


def segment_filter(intent: str | None, plan: str | None, agent_id: str | None) -> dict[str, str | None]:
    """Return the segment as a filter per dimension (None, or an empty string, means every value)."""
    return {"intent": intent or None, "plan": plan or None, "agent_id": agent_id or None}


class DaySums(TypedDict):
    """One day's sums for a segment: a stored metric_daily_aggregate row, or the same computed from raw events."""

    day: dt.date
    n_events: int
    n_shown: int
    n_accept: int
    n_reject: int
    ed_sum: float
    ed_n: int
    n_escalated: int
    ht_sum: float
    ht_n: int
    lat_p95_s: float | None
    cost_sum: float
    cost_n: int
    calib: list[list[float]] | None
    versions: dict[str, dict[str, int]] | None


def _aggregate_rows(
    session: Session, spec: EvalSpec, start: dt.date, end: dt.date, segment: dict[str, str | None]
) -> list[DaySums]:
    """Return one dict of sums per day with events: the stored aggregates, or raw events for segments not stored.

    Days whose events arrived since their last rebuild (`updating_days`) show the figures of that
    rebuild: `serve`'s rebuilder brings them up to date within REBUILD_INTERVAL_S (see stale.py).
    """
    if _computed_from_raw(segment):
        return stale.frame_rows(aggregates.raw_frame(session, start=start, end=end, segment=segment), spec)
    t = table_of(DailyAggregate).c
    stmt = select(table_of(DailyAggregate)).where(
        t.day >= start,
        t.day <= end,
        *[t[d] == (segment[d] if segment[d] is not None else ALL) for d in SEGMENT_DIMS],
    )
    # the table's columns hold these sums (and more: the segment, the id)
    return [cast(DaySums, dict(r._mapping)) for r in session.execute(stmt)]


def updating_days(*, session: Session, start: dt.date | None = None, end: dt.date | None = None) -> list[dt.date]:
    """Return the days (within [start, end] when given) with events not yet in their stored figures, oldest first."""
    return sorted(stale.stale_days(session, start=start, end=end))


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


def confirmed_report_counts(
    *, session: Session, start: dt.date, end: dt.date, intent: str | None = None, plan: str | None = None, agent_id: str | None = None
) -> dict[dt.date, int]:
    """Count confirmed hallucination reports per event day over [start, end] for the segment (days without any left out)."""
    return _confirmed_counts(session, start, end, segment_filter(intent, plan, agent_id))


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
    segment = segment_filter(intent, plan, agent_id)
    rows = {r["day"]: r for r in _aggregate_rows(session, spec, start, end, segment)}
    confirmed = _confirmed_counts(session, start, end, segment)
    lagging = lagging_days(session=session, start=start, end=end, segment=segment)
    out: list[DayMetrics] = []
    day = start
    while day <= end:
        dm = _day_metrics(day, rows.get(day), confirmed.get(day, 0), spec)
        if day in lagging:
            dm.updating_since, dm.pending_events = lagging[day]
        out.append(dm)
        day += dt.timedelta(days=1)
    return out


def lagging_days(
    *,
    session: Session,
    start: dt.date | None = None,
    end: dt.date | None = None,
    segment: dict[str, str | None] | None = None,
) -> dict[dt.date, tuple[dt.datetime, int]]:
    """Return the days (of [start, end] when given) whose stored figures lag their events: since when, and how many of the segment's events wait.

    Decision (issue 33): the figures stay those of the last rebuild pass (internally consistent:
    every rate over the same events), flagged, with the count of the events they leave out, so a
    day never reads as "no events" while its events wait (at most one pass, REBUILD_INTERVAL_S).
    A day lags while some of the segment's events are pending (a mark whose events a full rebuild
    already took does not count); segments computed from the raw events (not stored) never lag.
    """
    segment = segment or segment_filter(None, None, None)
    if _computed_from_raw(segment):
        return {}
    since = stale.updating_since(session, start=start, end=end)
    if not since:
        return {}
    e = table_of(Event).c
    stmt = select(e.day, func.count()).where(e.day.in_(sorted(since)), aggregates.PENDING).group_by(e.day)
    for d in SEGMENT_DIMS:
        if segment[d] is not None:
            stmt = stmt.where(e[d] == segment[d])
    waiting = {stale.as_date(d): int(n) for d, n in session.execute(stmt)}
    return {day: (t, waiting[day]) for day, t in since.items() if waiting.get(day)}


def _computed_from_raw(segment: dict[str, str | None]) -> bool:
    """Tell whether a segment's figures are computed from the raw events (no stored rollup holds it)."""
    return tuple(d for d in SEGMENT_DIMS if segment[d] is not None) not in aggregates.ROLLUPS


def _day_metrics(day: dt.date, r: DaySums | None, confirmed: int, spec: EvalSpec) -> DayMetrics:
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


def today_in(spec: EvalSpec) -> dt.date:
    """Return today's date in the spec's time zone."""
    return utcnow().astimezone(spec.tz).date()


def default_range(
    *, session: Session, spec: EvalSpec, start: dt.date | None, end: dt.date | None, days: int = 42
) -> tuple[dt.date, dt.date]:
    """Return [start, end], by default the last `days` days up to the last day with events."""
    bounds = aggregates.event_days(session)
    last = bounds[1] if bounds else today_in(spec)
    end = end or last
    start = start or max(bounds[0] if bounds else end, end - dt.timedelta(days=days - 1))
    if end < start:
        raise MetricsError(f"end: {end} is before start {start}")
    return start, end


def sent_drafts_by_day(*, session: Session) -> dict[dt.date, int]:
    """Return how many sent drafts (shown, accepted or edited, both texts kept) each day with any has (stored figures)."""
    t = table_of(DailyAggregate).c
    stmt = select(t.day, t.ed_n).where(t.intent == ALL, t.plan == ALL, t.agent_id == ALL, t.ed_n > 0)
    return {day: int(n) for day, n in session.execute(stmt)}


def segment_values(*, session: Session) -> dict[str, list[str]]:
    """Return the values seen for each segment dimension (for filter menus)."""
    t = table_of(DailyAggregate).c
    out: dict[str, list[str]] = {}
    for dim in SEGMENT_DIMS:
        others = [t[o] == ALL for o in SEGMENT_DIMS if o != dim]
        rows = session.execute(select(t[dim]).where(t[dim] != ALL, t[dim] != "", *others).distinct())
        out[dim] = sorted({r[0] for r in rows})
    return out
