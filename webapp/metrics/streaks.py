"""Business-day streaks: runs of business days on which every daily target was met, for a window and a segment."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from sqlmodel import Session

from webapp.core.spec import EvalSpec
from webapp.metrics import daily
from webapp.metrics.aggregates import SEGMENT_DIMS
from webapp.metrics.daily import DayMetrics, daily_metrics, segment_filter


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
    segment = segment_filter(intent, plan, agent_id)
    days = daily_metrics(session=session, spec=spec, start=start, end=end, **segment)
    return streaks_from_days(days, spec, window=window, segment=segment)


def pilot_streaks(*, session: Session, spec: EvalSpec, today: dt.date | None = None) -> Streaks:
    """Return the production gate's streaks: the pilot window (up to today), all traffic."""
    pilot = spec.online_metrics.pilot
    # through the module attribute: the one place a test (or the demo check) pins today
    end = min(pilot.end, today or daily.today_in(spec))
    if end < pilot.start:  # the pilot has not started: nothing to count yet
        empty = streaks_from_days([], spec, window="pilot")
        empty.window_start, empty.window_end = pilot.start, pilot.end
        return empty
    return business_day_streaks(session=session, spec=spec, start=pilot.start, end=end, window="pilot")
