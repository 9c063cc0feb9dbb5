"""The alerts firing now: the online metrics' alert rules and the weekly human-graded quality alert.

One count for home's card and /metrics' "alerts firing"; the weekly quality comes from ppi through
metrics' hooks (webapp/metrics/hooks.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field
from sqlmodel import Session

from webapp.core.spec import EvalSpec
from webapp.metrics import alert_states, hooks
from webapp.metrics.targets import METRIC_LABELS


class FiringAlertsView(BaseModel):
    """The alerts firing now: the online metrics' alert rules and the weekly human-graded quality alert."""

    metrics: list[str] = Field(description="Labels of the online-metric alerts firing")
    quality_weeks: list[str] = Field(description="ISO weeks whose human-graded quality alert fires (upper bound below the target)")

    @property
    def count(self) -> int:
        """Return how many alerts fire: each online-metric rule, and the human-graded quality alert once (whatever its weeks)."""
        return len(self.metrics) + (1 if self.quality_weeks else 0)

    @property
    def names(self) -> list[str]:
        """Return what fires, for a sentence: 'deflection rate', 'human-graded quality (2026-W46)'."""
        quality = [f"human-graded quality ({', '.join(self.quality_weeks)})"] if self.quality_weeks else []
        return [m.lower() for m in self.metrics] + quality


def count_firing(
    *, metric_alerts: Sequence[alert_states.AlertStatus], quality_weeks: Sequence[hooks.QualityWeek]
) -> FiringAlertsView:
    """Return the alerts firing among these: the one count home's card and /metrics' "alerts firing" show.

    Decision: the human-graded quality alert is one alert rule, like each online metric's, so it
    counts once however many weeks fire; the weeks are named. Home passes every metric alert (all
    traffic) and every production week; /metrics passes the range's and segment's metric alerts and
    the weeks its quality panel shows, so its count matches the panel's "alert: firing".
    """
    return FiringAlertsView(
        metrics=[METRIC_LABELS.get(a.metric, a.metric) for a in metric_alerts if a.state == "firing"],
        quality_weeks=[w.week for w in quality_weeks if w.below_target],
    )


def firing_alerts(*, session: Session, spec: EvalSpec) -> FiringAlertsView:
    """Return the alerts firing now over all traffic: every online-metric rule and every production week."""
    return count_firing(
        metric_alerts=alert_states.alerts(session=session, spec=spec),
        quality_weeks=hooks.weekly_quality(session=session, spec=spec),
    )
