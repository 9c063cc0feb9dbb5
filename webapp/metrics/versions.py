"""Model and prompt version changes: the days on which a new version first appears in the events."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlmodel import Session

from webapp.core.spec import EvalSpec
from webapp.metrics import aggregates
from webapp.metrics.daily import DayMetrics, daily_metrics


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
    bounds = aggregates.event_days(session)
    if bounds is None:
        return []
    days = daily_metrics(session=session, spec=spec, start=min(bounds[0], start), end=end)
    return [c for c in version_changes(days) if start <= c.day <= end]
