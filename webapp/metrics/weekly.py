"""Confirmed hallucination reports per week, against the plan's target "0 per week".

The plan's online-metrics table sets the hallucination target per week ("0 per week") and the
alert per report ("any single confirmed report"): the daily alert stays as it is (webapp.metrics
.alert_states), and this module gives the weekly figure the target is about.

Decisions (documented in docs/metrics.md):
- Weeks are ISO 8601 weeks: Monday to Sunday, named `2026-W45`; a report counts in the week of
  its event's day (in the spec's time zone, like every daily figure).
- A week that overlaps the range shown is counted whole (all seven days), so a week's figure does
  not depend on where the range starts; the page says which days each week covers.
- The target's comparison is the spec's (`online_metrics.targets.hallucination_reports`, `== 0`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from sqlmodel import Session

from webapp.core.spec import EvalSpec
from webapp.metrics import daily as metrics_daily
from webapp.metrics.targets import check_target, target_rule

METRIC = "hallucination_reports"


def week_start(day: dt.date) -> dt.date:
    """Return the Monday of the day's ISO week."""
    return day - dt.timedelta(days=day.weekday())


@dataclass(frozen=True)
class WeekCount:
    """One ISO week's confirmed hallucination reports and whether they meet the weekly target."""

    start: dt.date  # Monday
    count: int
    target: float
    met: bool
    complete: bool  # the week has ended (its Sunday is before today)

    @property
    def end(self) -> dt.date:
        return self.start + dt.timedelta(days=6)

    @property
    def iso(self) -> str:
        year, week, _ = self.start.isocalendar()
        return f"{year}-W{week:02d}"

    @property
    def label(self) -> str:
        return f"{self.iso} ({self.start:%b %d} – {self.end:%b %d})"

    def as_dict(self) -> dict[str, object]:
        return {
            "week": self.iso, "start": self.start.isoformat(), "end": self.end.isoformat(), "confirmed": self.count,
            "target": self.target, "met": self.met, "complete": self.complete,
        }


def weekly_counts(
    counts: Mapping[dt.date, int], *, start: dt.date, end: dt.date, spec: EvalSpec, today: dt.date
) -> list[WeekCount]:
    """Sum per-day counts into every ISO week that overlaps [start, end] (each week counted whole)."""
    rule = target_rule(METRIC, spec)
    target = rule.value if rule is not None else 0.0
    out: list[WeekCount] = []
    monday = week_start(start)
    while monday <= end:
        n = sum(counts.get(monday + dt.timedelta(days=i), 0) for i in range(7))
        met = bool(check_target(rule, float(n), spec)) if rule is not None else n == 0
        out.append(WeekCount(monday, n, target, met, monday + dt.timedelta(days=6) < today))
        monday += dt.timedelta(days=7)
    return out


def weekly_hallucinations(
    *,
    session: Session,
    spec: EvalSpec,
    start: dt.date,
    end: dt.date,
    today: dt.date | None = None,
    intent: str | None = None,
    plan: str | None = None,
    agent_id: str | None = None,
) -> list[WeekCount]:
    """Return the confirmed hallucination reports of every ISO week overlapping [start, end], for the segment."""
    first, last = week_start(start), week_start(end) + dt.timedelta(days=6)
    counts = metrics_daily.confirmed_report_counts(
        session=session, start=first, end=last, intent=intent, plan=plan, agent_id=agent_id
    )
    return weekly_counts(counts, start=start, end=end, spec=spec, today=today or metrics_daily.today_in(spec))
