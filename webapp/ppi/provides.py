"""Ppi's answers to the hooks of the domains below it (webapp/core/hooks.py).

Regression's alerts list the sampled pass-rate differences; the metrics page shows the production
weeks' human-graded quality and counts their alert.
"""

from __future__ import annotations

import datetime as dt

from sqlmodel import Session

from webapp.core.spec import EvalSpec
from webapp.metrics import hooks as metrics_hooks
from webapp.ppi import charts, production, report
from webapp.ppi.stored_figures import stored_weekly_quality
from webapp.regression import hooks as regression_hooks


def weekly_quality(*, session: Session, spec: EvalSpec) -> list[production.WeekQuality]:
    """Return every production week's human-graded quality, oldest first."""
    return stored_weekly_quality(session=session, spec=spec)


def production_quality(
    *, session: Session, spec: EvalSpec, start: dt.date, end: dt.date
) -> tuple[list[production.WeekQuality], str]:
    """Return the production weeks overlapping start..end with their quality estimates, and their chart as plotly JSON."""
    weeks = stored_weekly_quality(session=session, spec=spec, start=start, end=end)
    return weeks, charts.to_json(charts.quality_figure(weeks, production.quality_targets(spec)))


PROVIDES = (
    regression_hooks.pass_rate_readings.by(report.baseline_differences),
    metrics_hooks.weekly_quality.by(weekly_quality),
    metrics_hooks.production_quality.by(production_quality),
)
